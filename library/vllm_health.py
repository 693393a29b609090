#!/usr/bin/python
"""Ansible module: wait until vLLM replicas answer /health; stop early when a container exits."""

# ruff: noqa: E402  (Ansible modules put DOCUMENTATION before the imports)
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
seconds:
  description: Time spent waiting.
  returned: always
  type: float
"""

import shutil
import subprocess
import time
import urllib.error
import urllib.request

from ansible.module_utils.ascend_deploy.diagnosis.engine import Diagnoser, parse_rules
from ansible.module_utils.ascend_deploy.errors import AscendDeployError
from ansible.module_utils.basic import AnsibleModule


def probe(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=3) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError, ValueError):
        return None


def container_state(docker: str, name: str) -> tuple[str, int | None]:
    try:
        out = subprocess.run(
            [docker, "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", name],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown", None
    if out.returncode != 0:
        return "missing", None
    status, _, code = out.stdout.strip().partition(" ")
    return status, int(code) if code.strip().lstrip("-").isdigit() else None


def container_logs(docker: str, name: str, lines: int) -> str:
    try:
        out = subprocess.run(
            [docker, "logs", "--tail", str(lines), name],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (out.stdout + out.stderr)[-4_000_000:]


def classify(rules, logs: str) -> dict | None:
    """The best finding of the diagnosis engine for a replica's log, or None."""
    if rules is None or not logs:
        return None
    d = Diagnoser(rules)
    d.feed_text(logs)
    findings = d.result()["findings"]
    return findings[0] if findings else None


def wait(p: dict, rules=None) -> dict:
    docker = shutil.which(p["docker"]) if p["docker"] else None
    pending = {r["name"]: int(r["port"]) for r in p["replicas"]}
    ready: list[str] = []
    failed: list[dict] = []
    started = time.monotonic()
    deadline = started + p["timeout"]
    while pending:
        for name, port in list(pending.items()):
            if probe(f"http://{p['host']}:{port}{p['path']}") == 200:
                ready.append(name)
                del pending[name]
                continue
            if docker:
                state, code = container_state(docker, name)
                if state in ("exited", "dead", "missing", "restarting"):
                    failed.append({"name": name, "port": port, "state": state, "exit_code": code})
                    del pending[name]
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(p["interval"])
    for name, port in pending.items():
        state, code = container_state(docker, name) if docker else ("unknown", None)
        failed.append({"name": name, "port": port, "state": state, "exit_code": code})
    for entry in failed:
        lines = max(p["log_lines"], p["diagnose_lines"])
        logs = container_logs(docker, entry["name"], lines) if docker else ""
        entry["logs"] = logs.splitlines()[-p["log_lines"] :]
        entry["diagnosis"] = found = classify(rules, logs)
        if found and found["pitfall"] == 4 and not found["guess"]:
            entry["cause"] = "graph_capture"
        elif entry["state"] in ("exited", "dead", "restarting"):
            entry["cause"] = "exited"
        elif entry["state"] == "missing":
            entry["cause"] = "missing"
        else:
            entry["cause"] = "timeout"
    result = {
        "healthy": not failed,
        "ready": sorted(ready),
        "failures": failed,
        "seconds": round(time.monotonic() - started, 1),
    }
    if failed:
        causes = [f["cause"] for f in failed]
        first = causes.index("graph_capture") if "graph_capture" in causes else 0
        result["cause"] = causes[first]
        result["diagnosis"] = failed[first]["diagnosis"]
    return result


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
    for replica in module.params["replicas"]:
        if "name" not in replica or "port" not in replica:
            module.fail_json(msg=f"vllm_health: replica {replica!r} needs 'name' and 'port'")
    rules = None
    if module.params["rules"] is not None:
        try:
            rules = parse_rules(module.params["rules"], "rules")
        except AscendDeployError as exc:
            module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **wait(module.params, rules))


if __name__ == "__main__":
    main()
