#!/usr/bin/python
"""Documentation of the action plugin ascend_role_vars (plugins/action/ascend_role_vars.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_role_vars
short_description: Check every role variable a host sets against the role's argument spec
description:
  - An action plugin. It runs on the controller and touches no host, so the first play of a playbook
    can refuse every bad value before any role changes a host (a role's own argument spec check
    runs only when that role starts).
  - For each role of C(roles) it reads C(roles/<role>/meta/argument_specs.yml) (entry point
    C(main)) and C(roles/<role>/meta/value_bounds.yml), the ranges a spec cannot say (C(min),
    C(max), C(above), C(pattern), C(fix)), and checks every variable of the role the host has
    (inventory, play vars, extra vars) with C(ascend_deploy.host.role_vars), the one copy of the
    rule (type as Ansible converts it, C(elements), C(choices), then the bounds).
  - Fails the host naming each variable, its value (never for C(no_log) options) and the fix.
  - Vaulted and C(!unsafe) values are data, never rendered; a plain value holding C({{) that is
    not a valid template is refused naming the variable. A value that needs a variable not known
    yet (a fact gathered later) is left to the role's own check and listed in C(deferred).
options:
  roles:
    description: Roles of this collection whose variables to check.
    type: list
    elements: str
    required: true
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Check every role variable before any host changes
  ascend_vllm.serving.ascend_role_vars:
    roles: [npu_preflight, ascend_runtime, model_weights, vllm_service, deploy_verify]
"""

RETURN = r"""
checked:
  description: How many variables were checked.
  returned: always
  type: int
deferred:
  description: Variables whose value needs a variable this play does not know yet.
  returned: always
  type: list
  elements: str
problems:
  description: One message per refused value.
  returned: failed
  type: list
  elements: str
"""


def main() -> None:
    """Only reached when called as a module on a host: the action plugin is the implementation."""
    from ansible.module_utils.basic import AnsibleModule

    module = AnsibleModule(
        argument_spec={"roles": {"type": "list", "elements": "str", "required": True}},
        supports_check_mode=True,
    )
    module.fail_json(
        msg="ascend_role_vars is an action plugin of ascend_vllm.serving (plugins/action); "
        "call it by its FQCN ascend_vllm.serving.ascend_role_vars so the controller runs it"
    )


if __name__ == "__main__":
    main()
