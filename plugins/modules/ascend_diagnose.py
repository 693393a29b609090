#!/usr/bin/python
"""Ansible module: name the root cause of a vLLM-Ascend failure from logs (thin wrapper)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_diagnose
short_description: Diagnose vLLM-Ascend logs (container log, journal, verify report)
description:
  - Runs C(ascend-deploy diagnose) (C(ascend_deploy/diagnosis/engine.py)) over every file in
    C(paths) (C(ascend_deploy.diagnosis.report.diagnose_paths))
    (missing files are listed in C(missing), not an error, since a crashed container may have
    left no log) and returns the findings of all of them together, most likely cause first.
  - The rules are passed as content (C(rules)) because AnsiballZ ships Python files only; the
    role reads C(ascend_deploy/data/diagnose_rules.json) on the controller.
  - Read-only unless C(dest) is given (the findings are written there as JSON).
options:
  paths:
    description: Log files on the host (plain or .gz).
    type: list
    elements: path
    required: true
  rules:
    description: Content of C(diagnose_rules.json).
    type: dict
    required: true
  model:
    description:
      - Content of C(diagnose_model.json), the learned stage (trained by
        C(tools/train_diagnose_model.py)); it ranks the classes when no rule is specific and
        gives the top three with their confidence. Without it the rules decide alone.
    type: dict
  dest:
    description: Write the diagnosis JSON here.
    type: path
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Diagnose the failed replica
  ascend_diagnose:
    paths: [/etc/ascend-deploy/vllm/reports/run1/vllm-0.log]
    rules: "{{ lookup('ansible.builtin.file', 'diagnose_rules.json') | from_json }}"
    model: "{{ lookup('ansible.builtin.file', 'diagnose_model.json') | from_json }}"
  register: diagnosis
"""

RETURN = r"""
findings:
  description: >-
    List of {pitfall, rule, title, evidence, fix, explanation, variable, guess, summary}, root
    cause first; C(summary) words the finding in one paragraph for the operator. When no rule
    matched a failed log, the only entry is a guess (guess true, confidence, settle: the commands
    that confirm it); C(stage) of each says which stage decided it (rules or learned).
  returned: always
  type: list
stage:
  description: Which stage decided the first finding (rules, learned); null without findings.
  returned: always
  type: str
ranking:
  description: With the learned stage, the three most likely classes, each {class, rule, title,
    confidence}.
  returned: when model is given and a failure was found
  type: list
last_errors:
  description: The last error lines when no rule matched.
  returned: always
  type: list
missing:
  description: Paths that did not exist.
  returned: always
  type: list
unreadable:
  description: Paths that could not be diagnosed ({path, reason}), e.g. binary or truncated files.
  returned: always
  type: list
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.diagnosis.learned import (
    parse_model,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.diagnosis.report import (
    diagnose_paths,
    write_result,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.diagnosis.rules import (
    parse_rules,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.errors import (
    AscendDeployError,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "paths": {"type": "list", "elements": "path", "required": True},
            "rules": {"type": "dict", "required": True},
            "model": {"type": "dict"},
            "dest": {"type": "path"},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        model = parse_model(p["model"], "model") if p["model"] else None
        result = diagnose_paths(p["paths"], parse_rules(p["rules"], "rules"), model)
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    changed = False
    if p["dest"] and not module.check_mode:
        try:
            write_result(p["dest"], result)
        except OSError as exc:
            module.fail_json(msg=f"{p['dest']}: cannot write the diagnosis ({exc.strerror})")
        changed = True
    module.exit_json(changed=changed, **result)


if __name__ == "__main__":
    main()
