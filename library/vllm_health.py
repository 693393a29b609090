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
  - C(cause) is C(graph_capture) when the log carries an ACL graph-capture signature
    (pitfall 4; signatures from vllm-ascend FAQ 13/17 and acl_graph.py, see
    shared/reference/error-signatures.md), else C(exited), C(timeout) or C(unreachable).
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
  description: One entry per failed replica (name, port, cause, state, exit_code, logs).
  returned: always
  type: list
  elements: dict
cause:
  description: C(graph_capture) if any failed replica shows it, else the first failure's cause.
  returned: when not healthy
  type: str
seconds:
  description: Time spent waiting.
  returned: always
  type: float
"""

import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request

from ansible.module_utils.basic import AnsibleModule

# ACL graph-capture failures (pitfall 4): AclmdlRICaptureBegin/End errors, error codes 507903 and
# 207xxx, rtStreamEndCapture and the stream-resource messages vllm_ascend/compilation/acl_graph.py
# looks for. Source: shared/reference/error-signatures.md "Pitfall 4".
GRAPH_CAPTURE = re.compile(
    r"AclmdlRICapture(?:Begin|End)|rtStreamEndCapture|capture_(?:begin|end):.*error code is"
    r"|insufficient_stream_resources|stream resources are insufficient|error code is 507903",
    re.I,
)


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
    return (out.stdout + out.stderr)[-20000:]


def wait(p: dict) -> dict:
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
        logs = container_logs(docker, entry["name"], p["log_lines"]) if docker else ""
        entry["logs"] = logs.splitlines()[-p["log_lines"] :]
        if GRAPH_CAPTURE.search(logs):
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
        result["cause"] = "graph_capture" if "graph_capture" in causes else causes[0]
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
        },
        supports_check_mode=True,
    )
    for replica in module.params["replicas"]:
        if "name" not in replica or "port" not in replica:
            module.fail_json(msg=f"vllm_health: replica {replica!r} needs 'name' and 'port'")
    module.exit_json(changed=False, **wait(module.params))


if __name__ == "__main__":
    main()
