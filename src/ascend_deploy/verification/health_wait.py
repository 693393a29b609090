"""Wait until vLLM replicas answer ``/health``; name the cause when one does not.

A replica whose container exits is reported at once, without waiting for the timeout. A failed
replica's log is classified by the diagnosis engine of ``ascend-deploy diagnose``
(:mod:`ascend_deploy.diagnosis.engine`) with the rules it is given; the cause is
``graph_capture`` when the engine's best finding is an ACL graph-capture failure (pitfall 4,
not a guess), else ``exited``, ``missing`` or ``timeout``. Read-only. Standard library only
(Ansible ships it with ``vllm_health``).
"""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..diagnosis.engine import diagnose_text
from ..diagnosis.report import describe
from ..diagnosis.rules import RuleSet
from ..errors import InputError, shown

GRAPH_CAPTURE_PITFALL = 4
GONE = ("exited", "dead", "restarting")  # container states that end the wait for a replica
LOG_CAP = 4_000_000  # characters of a replica's log kept for the diagnosis
NO_SIGNATURE = "No failure signature in the log."


@dataclass(frozen=True)
class Replica:
    name: str  # container name
    port: int


@dataclass(frozen=True)
class WaitSettings:
    host: str = "127.0.0.1"
    path: str = "/health"
    timeout: float = 600.0
    interval: float = 2.0
    log_lines: int = 40
    docker: str = "docker"  # docker CLI for container state and logs; "" = do not inspect
    diagnose_lines: int = 3000


def replicas_from(items: Sequence[Mapping[str, Any]]) -> list[Replica]:
    """Replicas from ``[{name, port}, ...]``; InputError names an incomplete entry."""
    out = []
    for item in items:
        try:
            out.append(Replica(str(item["name"]), int(item["port"])))
        except (KeyError, TypeError, ValueError):
            raise InputError(
                f"vllm_health: replica {shown(dict(item))} needs 'name' and an integer 'port'"
            ) from None
    return out


def probe(url: str, timeout: float = 3) -> int | None:
    """HTTP status of a GET, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError, ValueError):
        return None


def container_state(docker: str, name: str) -> tuple[str, int | None]:
    """(status, exit code) of a container; ``missing`` when docker does not know it."""
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
    """The last ``lines`` lines of ``docker logs`` (stdout and stderr), or "" when unavailable."""
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
    return (out.stdout + out.stderr)[-LOG_CAP:]


def classify(rules: RuleSet | None, logs: str) -> dict | None:
    """The diagnosis engine's best finding for a replica's log, or None (no rules, no log)."""
    if rules is None or not logs:
        return None
    # Rules only, as on the hosts (the module gets no model): the wait acts on exact causes
    # (a graph-capture failure restarts eager), never on a ranked guess.
    findings = diagnose_text(logs, rules, model=False)["findings"]
    if not findings:
        return None
    return dict(findings[0], summary=describe(findings[0]))


def cause_of(state: str, finding: dict | None) -> str:
    """``graph_capture`` (a certain pitfall-4 finding), else from the container state."""
    if finding and finding["pitfall"] == GRAPH_CAPTURE_PITFALL and not finding["guess"]:
        return "graph_capture"
    if state in GONE:
        return "exited"
    return "missing" if state == "missing" else "timeout"


def wait(replicas: Sequence[Replica], settings: WaitSettings, rules: RuleSet | None = None) -> dict:
    """Poll every replica until all are healthy, a container is gone, or the timeout passes.

    Returns ``healthy``, ``ready`` (names), ``failures`` (name, port, state, exit_code, logs,
    diagnosis, cause), ``seconds``; when not healthy also ``cause`` and ``diagnosis`` (of the
    graph-capture failure if any, else of the first failure) and ``message``.
    """
    s = settings
    docker = shutil.which(s.docker) if s.docker else None
    pending = {r.name: r.port for r in replicas}
    ready: list[str] = []
    failed: list[dict] = []
    started = time.monotonic()
    deadline = started + s.timeout
    while pending:
        for name, port in list(pending.items()):
            if probe(f"http://{s.host}:{port}{s.path}") == 200:
                ready.append(name)
                del pending[name]
                continue
            if docker:
                state, code = container_state(docker, name)
                if state in (*GONE, "missing"):
                    failed.append({"name": name, "port": port, "state": state, "exit_code": code})
                    del pending[name]
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(s.interval)
    for name, port in pending.items():
        state, code = container_state(docker, name) if docker else ("unknown", None)
        failed.append({"name": name, "port": port, "state": state, "exit_code": code})
    for entry in failed:
        logs = (
            container_logs(docker, entry["name"], max(s.log_lines, s.diagnose_lines))
            if docker
            else ""
        )
        entry["logs"] = logs.splitlines()[-s.log_lines :] if s.log_lines > 0 else []
        entry["diagnosis"] = classify(rules, logs)
        entry["cause"] = cause_of(entry["state"], entry["diagnosis"])
    result: dict[str, Any] = {
        "healthy": not failed,
        "ready": sorted(ready),
        "failures": failed,
        "seconds": round(time.monotonic() - started, 1),
    }
    if failed:
        causes = [f["cause"] for f in failed]
        first = failed[causes.index("graph_capture") if "graph_capture" in causes else 0]
        result["cause"] = first["cause"]
        result["diagnosis"] = first["diagnosis"]
        names = ", ".join(f["name"] for f in failed)
        said = first["diagnosis"]["summary"] if first["diagnosis"] else NO_SIGNATURE
        result["message"] = f"{names} {first['cause']}. {said}"
    return result
