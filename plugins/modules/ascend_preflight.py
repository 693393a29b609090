#!/usr/bin/python
"""Ansible module: run every read-only host check of ascend_deploy.planning.preflight."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_preflight
short_description: Run the read-only Ascend host checks and return their findings
description:
  - Thin wrapper over C(ascend_deploy.planning.preflight.run_preflight).
    Nothing on the host changes.
  - Each finding has C(id), C(pitfall), C(status) (ok, warn or fail), C(evidence) and C(fix).
  - The module itself never fails on a failed check; the calling role asserts on C(checks)
    so that every failure message names the value and the fix.
options:
  root:
    description: Filesystem root to inspect.
    type: path
    default: /
  port:
    description: Serving port that must be free or held by our own service.
    type: int
  model_dir:
    description: Model directory whose size is compared with RAM and disk.
    type: path
  npu_info:
    description: Parsed C(npu-smi info) (the C(ascend_npu) fact); read from npu-smi when omitted.
    type: dict
  service:
    description: Service name; holders of the port or NPU memory carrying it are ours.
    type: str
  hardware:
    description: Hardware family (a2, a3, a5, 310p); detected from the chip names when omitted.
    type: str
  npus:
    description:
      - NPU ids the service would use (empty, the default, means every NPU). NPU memory, its
        holders and the plan are judged on those NPUs only; holders of the other NPUs are listed
        as information (check C(npu.other-memory)). An id the host lacks fails naming it.
    type: list
    elements: int
    default: []
  matrix:
    description:
      - Content of C(ascend_deploy/data/compat_matrix.json). AnsiballZ ships only Python files,
        so the role reads the data on the controller and passes it here.
    type: dict
  rules:
    description: Content of C(ascend_deploy/data/serve_rules.json) (same reason).
    type: dict
  options:
    description: Further keyword arguments passed to C(run_preflight) unchanged.
    type: dict
    default: {}
extends_documentation_fragment:
  - ascend_vllm.serving.site_matrix
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Run host checks
  ascend_preflight:
    port: 8000
    npu_info: "{{ ascend_npu }}"
  register: preflight
"""

RETURN = r"""
ok:
  description: True when no check has status C(fail).
  returned: success
  type: bool
checks:
  description: The findings.
  returned: success
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.errors import (
    AscendDeployError,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.planning.compat import (
    with_site_rows,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.planning.preflight import (
    run_preflight,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "default": "/"},
            "port": {"type": "int"},
            "model_dir": {"type": "path"},
            "npu_info": {"type": "dict"},
            "service": {"type": "str"},
            "hardware": {"type": "str"},
            "npus": {"type": "list", "elements": "int", "default": []},
            "matrix": {"type": "dict"},
            "site_matrix": {"type": "raw"},
            "site_matrix_file": {"type": "str"},
            "rules": {"type": "dict"},
            "options": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        matrix = with_site_rows(p["matrix"], p["site_matrix"], p["site_matrix_file"])
        result = run_preflight(
            root=p["root"],
            port=p["port"],
            model_dir=p["model_dir"],
            npu_info=p["npu_info"],
            service=p["service"],
            hardware=p["hardware"],
            npus=p["npus"],
            matrix=matrix,
            rules=p["rules"],
            **p["options"],
        )
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    except TypeError as exc:
        module.fail_json(msg=f"ascend_preflight: unsupported option in 'options': {exc}")
    result.pop("versions", None)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
