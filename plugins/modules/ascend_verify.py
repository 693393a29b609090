#!/usr/bin/python
"""Ansible module: run `ascend-deploy verify` checks against one vLLM endpoint (thin wrapper)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_verify
short_description: Prove a vLLM(-Ascend) endpoint answers correctly (readiness, smoke, suite, load)
description:
  - Runs the checks of C(ascend-deploy verify) (see C(ascend_deploy/verification/verifier.py))
    against C(url)
    and returns the report. Read-only for the service; writes C(verify.json) and C(verify.md)
    to C(report_dir) when given.
  - Never fails because verification failed (C(ok) says it); the C(deploy_verify) role decides
    about diagnosis, rollback and failing the host. Fails only for bad arguments.
  - The suite is passed as content (C(suite)) because AnsiballZ ships Python files only; the
    role reads the shipped default C(ascend_deploy/data/verify_suite.yaml) on the controller.
options:
  url:
    description: Base URL of the replica, for example C(http://127.0.0.1:8000).
    type: str
    required: true
  api_key:
    description: Bearer key of the service.
    type: str
  model:
    description: Served model name (empty = the first one C(/v1/models) lists).
    type: str
  suite:
    description: Suite document (a list of cases or a mapping with C(cases)).
    type: raw
    required: true
  suite_name:
    description: Name of the suite in the report and in error messages.
    type: str
    default: suite
  concurrency:
    description: Concurrent streamed requests of the load check.
    type: int
    default: 4
  burst_tokens:
    description: Output tokens of each concurrent request.
    type: int
    default: 128
  timeout:
    description: Seconds to wait for readiness.
    type: float
    default: 600
  request_timeout:
    description: Seconds per request.
    type: float
    default: 300
  expect_max_model_len:
    description: The planned max_model_len (0 = do not compare).
    type: int
    default: 0
  max_len_probe:
    description: Send one request that fills max_model_len.
    type: bool
    default: true
  report_dir:
    description: Directory on the host for C(verify.json) and C(verify.md).
    type: path
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Verify replica 0
  ascend_verify:
    url: http://127.0.0.1:8000
    suite: "{{ lookup('ansible.builtin.file', 'verify_suite.yaml') | from_yaml }}"
    expect_max_model_len: 32768
    report_dir: /etc/ascend-deploy/vllm/reports/run1/vllm-0
  register: verify
"""

RETURN = r"""
ok:
  description: Whether every check passed.
  returned: always
  type: bool
report:
  description: The full report (checks, cases, performance, server, failures).
  returned: always
  type: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.errors import (
    AscendDeployError,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.verification.verifier import (
    Options,
    render_markdown,
    run_verify,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "api_key": {"type": "str", "no_log": True},
            "model": {"type": "str"},
            "suite": {"type": "raw", "required": True},
            "suite_name": {"type": "str", "default": "suite"},
            "concurrency": {"type": "int", "default": 4},
            "burst_tokens": {"type": "int", "default": 128},
            "timeout": {"type": "float", "default": 600},
            "request_timeout": {"type": "float", "default": 300},
            "expect_max_model_len": {"type": "int", "default": 0},
            "max_len_probe": {"type": "bool", "default": True},
            "report_dir": {"type": "path"},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["concurrency"] < 1 or p["burst_tokens"] < 1:
        module.fail_json(msg="ascend_verify: concurrency and burst_tokens must be >= 1")
    try:
        opts = Options(
            url=p["url"],
            api_key=p["api_key"] or None,
            model=p["model"] or None,
            suite=p["suite_name"],
            suite_doc=p["suite"],
            concurrency=p["concurrency"],
            burst_tokens=p["burst_tokens"],
            ready_timeout=p["timeout"],
            request_timeout=p["request_timeout"],
            expect_max_model_len=p["expect_max_model_len"] or None,
            max_len_probe=p["max_len_probe"],
        )
        report = run_verify(opts)
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    except ValueError as exc:
        module.fail_json(msg=f"ascend_verify: url {p['url']!r}: {exc}")
    changed = False
    if p["report_dir"] and not module.check_mode:
        try:
            os.makedirs(p["report_dir"], mode=0o700, exist_ok=True)
            with open(os.path.join(p["report_dir"], "verify.json"), "w", encoding="utf-8") as fh:
                json.dump(report, fh, indent=2, ensure_ascii=False)
                fh.write("\n")
            with open(os.path.join(p["report_dir"], "verify.md"), "w", encoding="utf-8") as fh:
                fh.write(render_markdown(report))
        except OSError as exc:
            module.fail_json(msg=f"{p['report_dir']}: cannot write the report ({exc.strerror})")
        changed = True
    module.exit_json(changed=changed, ok=report["ok"], report=report)


if __name__ == "__main__":
    main()
