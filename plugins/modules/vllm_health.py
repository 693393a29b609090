#!/usr/bin/python
"""Ansible module: wait until vLLM replicas answer /health (verification.health_wait)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_health
short_description: Wait for vLLM replicas to become healthy, with logs and a cause on failure
description:
  - Polls C(http://<host>:<port>/health) of every replica until all answer 200 or C(timeout)
    passes. A replica whose container exits is reported at once (no waiting for the timeout),
    with the last C(log_lines) lines of C(docker logs) and the failure C(cause).
  - A failed replica's log (the last C(diagnose_lines) lines) is classified by the diagnosis
    engine of C(ascend-deploy diagnose) with the rules in C(rules); C(diagnosis) is its best
    finding (class, evidence, fix; a guess is marked). C(cause) is C(graph_capture) when that
    finding is an ACL graph-capture failure (pitfall 4, not a guess), else C(exited),
    C(missing) or C(timeout).
  - Read-only; never fails by itself (the role decides between fallback and rollback).
    Runs in check mode as a probe.
options:
  replicas:
    description: List of C({name, port}) (name = container name).
    type: list
    elements: dict
    required: true
  host:
    description: Address to probe (the service binds on the host network).
    type: str
    default: 127.0.0.1
  path:
    description: Health path.
    type: str
    default: /health
  timeout:
    description: Seconds to wait for all replicas.
    type: float
    default: 600
  interval:
    description: Seconds between polls.
    type: float
    default: 2
  log_lines:
    description: Log lines returned for a failed replica.
    type: int
    default: 40
  docker:
    description: docker CLI used for container state and logs (empty = do not inspect containers).
    type: str
    default: docker
  rules:
    description: >-
      Content of C(diagnose_rules.json) (the role reads it on the controller); without it failures
      are not classified.
    type: dict
  diagnose_lines:
    description: Log lines of a failed replica given to the diagnosis.
    type: int
    default: 3000
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Wait for the replicas
  vllm_health:
    replicas: [{name: vllm-0, port: 8000}]
    timeout: 300
  register: health
"""

RETURN = r"""
healthy:
  description: All replicas answered 200.
  returned: always
  type: bool
ready:
  description: Names of the healthy replicas.
  returned: always
  type: list
  elements: str
failures:
  description: >-
    One entry per failed replica (name, port, cause, state, exit_code, logs, diagnosis: the best
    finding of ascend-deploy diagnose or null).
  returned: always
  type: list
  elements: dict
cause:
  description: C(graph_capture) if any failed replica shows it, else the first failure's cause.
  returned: when not healthy
  type: str
diagnosis:
  description: The diagnosis of that failure (pitfall, rule, title, evidence, fix, variable, guess).
  returned: when not healthy
  type: dict
message:
  description: >-
    The failed replicas, the cause and the diagnosis in one paragraph (cause or best guess with
    its confidence, pitfall, title, evidence, fix) for the role to print.
  returned: when not healthy
  type: str
seconds:
  description: Time spent waiting.
  returned: always
  type: float
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.diagnosis.rules import (
    parse_rules,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.errors import (
    AscendDeployError,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.verification.health_wait import (
    WaitSettings,
    replicas_from,
    wait,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "replicas": {"type": "list", "elements": "dict", "required": True},
            "host": {"type": "str", "default": "127.0.0.1"},
            "path": {"type": "str", "default": "/health"},
            "timeout": {"type": "float", "default": 600.0},
            "interval": {"type": "float", "default": 2.0},
            "log_lines": {"type": "int", "default": 40},
            "docker": {"type": "str", "default": "docker"},
            "rules": {"type": "dict"},
            "diagnose_lines": {"type": "int", "default": 3000},
        },
        supports_check_mode=True,
    )
    p = module.params
    names = ("host", "path", "timeout", "interval", "log_lines", "docker", "diagnose_lines")
    try:
        replicas = replicas_from(p["replicas"])
        rules = None if p["rules"] is None else parse_rules(p["rules"], "rules")
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(
        changed=False, **wait(replicas, WaitSettings(**{k: p[k] for k in names}), rules)
    )


if __name__ == "__main__":
    main()
