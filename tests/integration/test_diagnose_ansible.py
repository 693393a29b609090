"""The Ansible path uses the diagnosis engine (issue 12 part 5): vllm_health classifies a failed
replica's log with diagnose_rules.json, ascend_diagnose reads plain, gzip and broken files.

Real ansible-playbook runs on localhost (AnsiballZ ships ascend_deploy as module_utils); the
replica containers are a stand-in ``docker`` CLI that reports an exited container and prints a
log fixture, so the module's own docker inspect/logs code runs.
"""

from __future__ import annotations

import gzip
import json
import socket
from pathlib import Path

import pytest
from conftest import ANSIBLE_PLAYBOOK, DATA, REPO, run_local_play

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="needs the venv's ansible-playbook"),
]
RULES = json.loads((REPO / "src/ascend_deploy/data/diagnose_rules.json").read_text())
MODEL = json.loads((REPO / "src/ascend_deploy/data/diagnose_model.json").read_text())
LOGS = DATA / "logs"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(tmp_path: Path, tasks: list[dict]) -> dict:
    out = tmp_path / "results.json"
    ids = [t["id"] for t in tasks]
    play_tasks = [
        {k: v for k, v in t.items() if k != "id"} | {"register": t["id"], "ignore_errors": True}
        for t in tasks
    ]
    play_tasks.append(
        {
            "name": "Save results",
            "ansible.builtin.copy": {"content": "{{ _all | to_json }}", "dest": str(out)},
            "vars": {"_all": {i: "{{ " + i + " | default({}) }}" for i in ids}},
        }
    )
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": play_tasks}]
    done = run_local_play(play, tmp_path, env={"ANSIBLE_REMOTE_TEMP": str(tmp_path / "remote")})
    assert out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(out.read_text())


def fake_docker(tmp_path: Path, logs: dict[str, Path]) -> Path:
    """A ``docker`` that says every container exited (code 1) and prints its log fixture."""
    script = tmp_path / "docker"
    cases = "\n".join(f"    {name}) cat '{path}' ;;" for name, path in logs.items())
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        '  inspect) echo "exited 1" ;;\n'
        '  logs) case "$4" in\n'
        f"{cases}\n"
        "  esac ;;\n"
        "esac\n"
    )
    script.chmod(0o755)
    return script


def test_health_wait_classifies_failed_replicas_with_the_diagnosis_rules(tmp_path):
    docker = fake_docker(
        tmp_path,
        {
            "oom-0": LOGS / "pitfall5_2_example.log",
            "graph-0": LOGS / "pitfall4_1_sig.log",
        },
    )
    res = run(
        tmp_path,
        [
            {
                "id": "two",
                "ascend_vllm.serving.vllm_health": {
                    "replicas": [
                        {"name": "oom-0", "port": free_port()},
                        {"name": "graph-0", "port": free_port()},
                    ],
                    "docker": str(docker),
                    "timeout": 5,
                    "interval": 0.2,
                    "rules": RULES,
                },
            },
            {
                "id": "oom",
                "ascend_vllm.serving.vllm_health": {
                    "replicas": [{"name": "oom-0", "port": free_port()}],
                    "docker": str(docker),
                    "timeout": 5,
                    "interval": 0.2,
                    "rules": RULES,
                },
            },
        ],
    )
    two = res["two"]
    assert two["healthy"] is False
    by_name = {f["name"]: f for f in two["failures"]}
    # the graph-capture failure decides the eager fallback, named by the engine's rule
    assert by_name["graph-0"]["cause"] == "graph_capture"
    assert by_name["graph-0"]["diagnosis"]["pitfall"] == 4
    assert by_name["oom-0"]["cause"] == "exited"
    assert by_name["oom-0"]["diagnosis"]["rule"] == "npu_out_of_memory"
    assert two["cause"] == "graph_capture" and two["diagnosis"]["pitfall"] == 4
    # the role prints this paragraph (tasks/health.yml): no wording of its own
    assert two["message"].startswith("oom-0, graph-0 graph_capture. [pitfall 4] ")
    assert two["message"] == f"oom-0, graph-0 graph_capture. {two['diagnosis']['summary']}"
    assert f"Fix: {two['diagnosis']['fix']}" in two["message"]
    oom = res["oom"]
    assert oom["cause"] == "exited" and oom["diagnosis"]["pitfall"] == 5
    assert oom["diagnosis"]["fix"] and oom["diagnosis"]["evidence"]


def test_ascend_diagnose_reads_gzip_and_names_unreadable_files(tmp_path):
    packed = tmp_path / "vllm-0.log.gz"
    packed.write_bytes(gzip.compress((LOGS / "pitfall3_1_example.log").read_bytes()))
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x00\x01\x02" * 1000)
    guess = tmp_path / "vllm-1.log"
    guess.write_text("Traceback (most recent call last):\nRuntimeError: something new\n")
    res = run(
        tmp_path,
        [
            {
                "id": "two",
                "ascend_vllm.serving.ascend_diagnose": {
                    "paths": [str(packed), str(binary)],
                    "rules": RULES,
                },
            },
            {
                "id": "guess",
                "ascend_vllm.serving.ascend_diagnose": {"paths": [str(guess)], "rules": RULES},
            },
            {
                "id": "learned",
                "ascend_vllm.serving.ascend_diagnose": {
                    "paths": [str(guess)],
                    "rules": RULES,
                    "model": MODEL,
                },
            },
        ],
    )
    two = res["two"]
    assert two["findings"][0]["pitfall"] == 3 and two["findings"][0]["guess"] is False
    assert two["sources"] == [str(packed)]
    assert two["unreadable"][0]["path"] == str(binary)
    assert "binary" in two["unreadable"][0]["reason"]
    first = res["guess"]["findings"][0]
    assert first["guess"] is True and first["settle"]
    # the one wording the playbooks print (playbooks/diagnose.yml, deploy_verify failure.yml)
    assert first["summary"].startswith("Best guess (confidence ")
    assert first["summary"].endswith(f"To settle it, run: {'; '.join(first['settle'])}")
    assert two["findings"][0]["summary"].startswith("[pitfall 3] ")
    # With the learned stage (the model passed as content, as the roles do) the same unknown
    # failure gets a ranked guess: which stage decided and the three most likely classes.
    learned = res["learned"]
    assert learned["stage"] == "learned" and len(learned["ranking"]) == 3
    assert learned["findings"][0]["guess"] is True and learned["findings"][0]["settle"]
    assert learned["findings"][0]["rule"] != "unclassified"
