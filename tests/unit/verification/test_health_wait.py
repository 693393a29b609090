"""The health wait (what ``vllm_health`` runs) against real HTTP servers and real failure logs.

Replica containers are a stand-in ``docker`` executable: ``inspect`` prints the state written in
a file next to it, ``logs`` prints a log recorded from a real failed start
(tests/data/diagnose/real), so the wait's own docker calls and the diagnosis engine run.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import DATA, REPO

from ascend_deploy.diagnosis.rules import parse_rules
from ascend_deploy.errors import InputError
from ascend_deploy.verification.health_wait import (
    Replica,
    WaitSettings,
    replicas_from,
    wait,
)

REAL = DATA / "diagnose" / "real"
RULES = parse_rules(json.loads((REPO / "src/ascend_deploy/data/diagnose_rules.json").read_text()))
FAST = {"interval": 0.1, "timeout": 20.0}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Health(http.server.BaseHTTPRequestHandler):
    """/health answers 503 for the first ``warmup`` requests (vLLM still loading), then 200."""

    warmup = 0
    seen = 0

    def do_GET(self) -> None:
        cls = type(self)
        cls.seen += 1
        ok = self.path == "/health" and cls.seen > cls.warmup
        self.send_response(200 if ok else 503 if self.path == "/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Callable[..., int]]:
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(warmup: int = 0) -> int:
        handler = type("H", (Health,), {"warmup": warmup, "seen": 0})
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(
            target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        servers.append(srv)
        return srv.server_address[1]

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def fake_docker(tmp_path: Path, states: dict[str, str], logs: dict[str, Path]) -> str:
    """A ``docker`` whose containers have the given ``inspect`` output ('' = no such container)."""
    for name, state in states.items():
        (tmp_path / f"{name}.state").write_text(state)
    cases = "\n".join(f"    {name}) cat '{path}' ;;" for name, path in logs.items())
    script = tmp_path / "docker"
    script.write_text(
        "#!/bin/sh\n"
        f'dir="{tmp_path}"\n'
        'case "$1" in\n'
        '  inspect) [ -s "$dir/$4.state" ] || { echo "Error: No such object: $4" >&2; exit 1; }\n'
        '           cat "$dir/$4.state" ;;\n'
        '  logs) case "$4" in\n'
        f"{cases}\n"
        "  esac ;;\n"
        "esac\n"
    )
    script.chmod(0o755)
    return str(script)


def test_healthy_after_warm_up_and_an_unreachable_replica_times_out(server):
    port = server(warmup=3)
    down = free_port()
    result = wait(
        [Replica("r0", port), Replica("r1", down)],
        WaitSettings(docker="", interval=0.1, timeout=1.5),
    )
    assert result["ready"] == ["r0"] and result["healthy"] is False
    assert result["seconds"] >= 1.5
    [failure] = result["failures"]
    assert failure == {
        "name": "r1",
        "port": down,
        "state": "unknown",
        "exit_code": None,
        "logs": [],
        "diagnosis": None,
        "cause": "timeout",
    }
    assert result["cause"] == "timeout" and result["diagnosis"] is None
    assert result["message"] == "r1 timeout. No failure signature in the log."
    ok = wait([Replica("r0", port)], WaitSettings(docker="", **FAST))
    assert ok["healthy"] is True and ok["failures"] == [] and "message" not in ok


def test_graph_capture_failure_is_named_by_the_engine_and_ends_the_wait_early(tmp_path, server):
    log = REAL / "p4_aclgraph_not_support_deepseek_1458.log"
    docker = fake_docker(tmp_path, {"graph-0": "exited 1", "ok-0": "running 0"}, {"graph-0": log})
    started = time.monotonic()
    result = wait(
        [Replica("ok-0", server()), Replica("graph-0", free_port())],
        WaitSettings(docker=docker, log_lines=5, **FAST),
        RULES,
    )
    assert time.monotonic() - started < 10  # the container exited: no waiting for the timeout
    assert result["healthy"] is False and result["ready"] == ["ok-0"]
    [failure] = result["failures"]
    assert failure["state"] == "exited" and failure["exit_code"] == 1
    assert failure["logs"] == log.read_text().splitlines()[-5:]
    assert failure["cause"] == "graph_capture" == result["cause"]
    diagnosis = result["diagnosis"]
    assert diagnosis["pitfall"] == 4 and diagnosis["rule"] == "graph_capture_failed"
    assert diagnosis["guess"] is False
    message = result["message"]
    assert message.startswith(f"graph-0 graph_capture. [pitfall 4] {diagnosis['title']}.")
    assert message == f"graph-0 graph_capture. {diagnosis['summary']}"
    assert f"Evidence: {diagnosis['evidence'][0]}" in message
    assert message.endswith(f"Fix: {diagnosis['fix']} (variable {diagnosis['variable']})")


def test_graph_capture_wins_over_an_earlier_out_of_memory(tmp_path):
    logs = {
        "oom-0": REAL / "p5_npu_oom_flattened_1617.log",
        "graph-0": REAL / "p4_capture_mode_memcpy_cn_6002.log",
    }
    docker = fake_docker(tmp_path, {"oom-0": "exited 137", "graph-0": "dead 1"}, logs)
    result = wait(
        [Replica("oom-0", free_port()), Replica("graph-0", free_port())],
        WaitSettings(docker=docker, **FAST),
        RULES,
    )
    by_name = {f["name"]: f for f in result["failures"]}
    assert by_name["oom-0"]["cause"] == "exited" and by_name["oom-0"]["exit_code"] == 137
    assert by_name["oom-0"]["diagnosis"]["rule"] == "npu_out_of_memory"
    assert by_name["graph-0"]["cause"] == "graph_capture"
    assert result["cause"] == "graph_capture" and result["diagnosis"]["pitfall"] == 4
    assert result["message"].startswith("oom-0, graph-0 graph_capture. [pitfall 4]")


def test_a_guessed_graph_capture_does_not_trigger_the_eager_fallback(tmp_path):
    """Only a certain pitfall-4 finding means graph_capture: the engine's guess stays a guess."""
    log = REAL / "p4_capture_status_assert_title_2383.log"
    docker = fake_docker(tmp_path, {"g-0": "restarting 1"}, {"g-0": log})
    result = wait([Replica("g-0", free_port())], WaitSettings(docker=docker, **FAST), RULES)
    assert result["diagnosis"]["pitfall"] == 4 and result["diagnosis"]["guess"] is True
    assert result["cause"] == "exited"
    confidence = result["diagnosis"]["confidence"]
    assert result["message"].startswith(
        f"g-0 exited. Best guess (confidence {confidence:.0%}, no known signature) [pitfall 4]"
    )


def test_no_signature_no_rules_and_a_missing_container(tmp_path):
    quiet = REAL / "none_graph_capturing_finished_tp_vllm25848.log"
    docker = fake_docker(tmp_path, {"q-0": "exited 0", "gone-0": ""}, {"q-0": quiet})
    result = wait(
        [Replica("q-0", free_port()), Replica("gone-0", free_port())],
        WaitSettings(docker=docker, **FAST),
        RULES,
    )
    by_name = {f["name"]: f for f in result["failures"]}
    assert by_name["q-0"]["diagnosis"] is None and by_name["q-0"]["cause"] == "exited"
    assert by_name["gone-0"]["cause"] == "missing" and by_name["gone-0"]["logs"] == []
    assert result["message"] == "q-0, gone-0 exited. No failure signature in the log."
    # without rules the log is returned but not classified
    plain = wait([Replica("q-0", free_port())], WaitSettings(docker=docker, **FAST))
    assert plain["failures"][0]["logs"] and plain["diagnosis"] is None


def test_replicas_need_a_name_and_a_port():
    assert replicas_from([{"name": "r", "port": "8000"}]) == [Replica("r", 8000)]
    for bad in ({"name": "r"}, {"port": 1}, {"name": "r", "port": "x"}):
        with pytest.raises(InputError, match="needs 'name' and an integer 'port'"):
            replicas_from([bad])


def test_the_emulated_vllm_server_is_healthy(openai_server):
    """The OpenAI server fixture (emulated vLLM-Ascend): its /health answers 200, with an API
    key set too (vLLM does not guard /health with it)."""
    emu = openai_server("v0.11.0", "--max-model-len", "256", "--api-key", "sk-health")
    result = wait([Replica("vllm-0", emu.port)], WaitSettings(docker="", **FAST))
    assert result["healthy"] is True and result["ready"] == ["vllm-0"]
    wrong_path = wait(
        [Replica("vllm-0", emu.port)],
        WaitSettings(docker="", path="/nope", interval=0.1, timeout=0.5),
    )
    assert wrong_path["healthy"] is False and wrong_path["cause"] == "timeout"
