#!/usr/bin/python
"""Ansible module: refuse unsafe names; remove a path only inside the directory that owns it."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_names
short_description: Check names that become paths or container names; remove a path contained in its parent
description:
  - Thin wrapper over C(ascend_deploy.host.names), the one copy of the rule.
  - C(state=check) fails, naming the variable, the value and the pattern, when a name in C(names)
    or C(models) is empty, C(.)/C(..), holds C(/) or C(:), starts with C(-) or does not match
    C(^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$). Read-only; run it before any change to a host.
  - C(state=absent) removes C(path) (file or tree) after checking that it resolves strictly
    inside C(parent); a path outside it fails and nothing is removed. Check mode removes nothing.
options:
  state:
    description: What to do.
    type: str
    choices: [check, absent]
    default: check
  names:
    description: With C(state=check), service names to check, by variable name.
    type: dict
    default: {}
  models:
    description: With C(state=check), model directory names to check, by variable name.
    type: dict
    default: {}
  path:
    description: With C(state=absent), the path to remove.
    type: str
  parent:
    description: With C(state=absent), the directory C(path) must lie inside.
    type: str
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Refuse an unsafe service name
  ascend_names:
    names:
      vllm_service_name: "{{ vllm_service_name }}"

- name: Remove the service's configuration, only inside the config directory
  ascend_names:
    state: absent
    path: /etc/ascend-deploy/qwen3
    parent: /etc/ascend-deploy
"""

RETURN = r"""
path:
  description: The resolved path that was (or would be) removed.
  returned: state=absent
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.errors import (
    AscendDeployError,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.host import (
    names,
)


def run(module: AnsibleModule) -> dict:
    p = module.params
    if p["state"] == "check":
        for variable, value in sorted(p["names"].items()):
            names.check_name(variable, value, "service")
        for variable, value in sorted(p["models"].items()):
            names.check_name(variable, value, "model")
        return {"changed": False}
    target = names.contained(p["parent"] or "", p["path"] or "")
    changed = names.remove_contained(p["parent"], p["path"], module.check_mode)
    return {"changed": changed, "path": target}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["check", "absent"], "default": "check"},
            "names": {"type": "dict", "default": {}},
            "models": {"type": "dict", "default": {}},
            "path": {"type": "str"},
            "parent": {"type": "str"},
        },
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
