#!/usr/bin/python
"""Ansible module: read driver, firmware, CANN and Python package versions of an Ascend host."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_versions
short_description: Read the Ascend driver, firmware, CANN, NNAL and Python package versions
description:
  - Thin wrapper over C(ascend_deploy.host.versions.read_versions). Read-only; supports check mode.
  - Sets the fact C(ascend_versions).
options:
  root:
    description: Filesystem root to read the version files from.
    type: path
    default: /
  python:
    description: Python interpreter whose packages (torch, torch_npu, vllm, vllm-ascend) are read.
    type: str
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Read versions
  ascend_versions:
  register: versions
"""

RETURN = r"""
ansible_facts:
  description: C(ascend_versions) with driver, firmware, cann, nnal, install_info, packages, checks.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.errors import (
    AscendDeployError,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.host.versions import (
    read_versions,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "default": "/"},
            "python": {"type": "str"},
        },
        supports_check_mode=True,
    )
    try:
        versions = read_versions(root=module.params["root"], python=module.params["python"])
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, ansible_facts={"ascend_versions": versions})


if __name__ == "__main__":
    main()
