"""deploy.yml's Prometheus file_sd targets: the real task file in a real ansible-playbook run.

The fleet hosts are inventory entries carrying the facts the roles leave behind
(vllm_service_result, ascend_deploy_done); the task runs once on the
controller as in deploy.yml's last play and writes the targets file, which is read back as
Prometheus' file_sd reads it (a JSON list of {targets, labels}).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import ANSIBLE_PLAYBOOK, REPO, run_local_play

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="needs the venv's ansible-playbook"),
]

ODD_MODEL = 'acme "qwen3"\\4b'


def replicas(service: str, layout: list[list[int]], base_port: int = 8000) -> list[dict]:
    return [
        {"name": f"{service}-{i}", "index": i, "port": base_port + i, "npus": npus}
        for i, npus in enumerate(layout)
    ]


def host(model: str, layout: list[list[int]], done: bool = True, **extra) -> dict:
    reps = replicas("qwen3", layout)
    out = {
        "vllm_service_result": {
            "name": "qwen3",
            "served_model_name": model,
            "ports": [r["port"] for r in reps],
            "endpoints": reps,
        },
        **extra,
    }
    if done:
        out["ascend_deploy_done"] = True
    return out


def deploy(tmp_path: Path, hosts: dict, run_hosts: list[str], *args: str) -> tuple[int, str]:
    inv = tmp_path / "hosts.yml"
    inv.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {"localhost": {"ascend_run_hosts": run_hosts}},
                    "children": {"ascend_llm": {"hosts": hosts}},
                    "vars": {
                        "ascend_prometheus_sd_file": str(tmp_path / "sd" / "ascend-vllm.json")
                    },
                }
            }
        )
    )
    play = [
        {
            "name": "Deployment summary (as deploy.yml's last play)",
            "hosts": "ascend_llm",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Prometheus targets",
                    "ansible.builtin.include_tasks": str(
                        REPO / "playbooks/tasks/prometheus_targets.yml"
                    ),
                }
            ],
        }
    ]
    done = run_local_play(play, tmp_path, args=["-i", str(inv), *args])
    return done.returncode, done.stdout + done.stderr


def targets_file(tmp_path: Path) -> list[dict]:
    return json.loads((tmp_path / "sd" / "ascend-vllm.json").read_text())


def test_targets_for_every_replica_then_merge_on_a_partial_run(tmp_path):
    fleet = {
        "npu-a": host("qwen3-4b", [[0], [1]], ansible_host="10.0.0.11"),
        "npu-b": host(ODD_MODEL, [[0, 1]], ansible_host="fd00::12"),
        "npu-c": host("qwen3-4b", [[3]], ansible_host="10.0.0.13",
                      ascend_prometheus_address="127.0.0.1",
                      ascend_prometheus_ports={8000: 32768}),
    }  # fmt: skip
    rc, out = deploy(tmp_path, fleet, list(fleet))
    assert rc == 0, out[-3000:]
    assert "Prometheus targets: 4 replica(s)" in out
    groups = targets_file(tmp_path)
    assert groups == [
        {"labels": {"host": "npu-a", "model": "qwen3-4b", "npu": "0", "replica": "qwen3-0",
                    "service": "qwen3"}, "targets": ["10.0.0.11:8000"]},
        {"labels": {"host": "npu-a", "model": "qwen3-4b", "npu": "1", "replica": "qwen3-1",
                    "service": "qwen3"}, "targets": ["10.0.0.11:8001"]},
        {"labels": {"host": "npu-b", "model": ODD_MODEL, "npu": "0,1", "replica": "qwen3-0",
                    "service": "qwen3"}, "targets": ["[fd00::12]:8000"]},
        {"labels": {"host": "npu-c", "model": "qwen3-4b", "npu": "3", "replica": "qwen3-0",
                    "service": "qwen3"}, "targets": ["127.0.0.1:32768"]},
    ]  # fmt: skip
    path = tmp_path / "sd" / "ascend-vllm.json"
    inode = path.stat().st_ino
    assert oct(path.stat().st_mode & 0o777) == "0o644"

    # The same run again: the file is left as it is (no rewrite, no change reported).
    rc, out = deploy(tmp_path, fleet, list(fleet))
    assert rc == 0 and "changed=0" in out and path.stat().st_ino == inode, out[-3000:]

    # Next run: npu-a now serves one TP2 replica, npu-b failed (keeps its targets), npu-c left
    # the inventory (dropped); check mode first writes nothing.
    fleet2 = {
        "npu-a": host("qwen3-8b", [[0, 1]], ansible_host="10.0.0.11"),
        "npu-b": host(ODD_MODEL, [[0, 1]], done=False, ansible_host="fd00::12"),
    }
    rc, out = deploy(tmp_path, fleet2, list(fleet2), "--check")
    assert rc == 0 and "changed=1" in out, out[-3000:]
    assert targets_file(tmp_path) == groups
    rc, out = deploy(tmp_path, fleet2, list(fleet2))
    assert rc == 0, out[-3000:]
    assert path.stat().st_ino != inode  # replaced by a rename, not rewritten in place
    assert [(g["labels"]["host"], g["labels"]["npu"], g["labels"]["model"], g["targets"])
            for g in targets_file(tmp_path)] == [
        ("npu-a", "0,1", "qwen3-8b", ["10.0.0.11:8000"]),
        ("npu-b", "0,1", ODD_MODEL, ["[fd00::12]:8000"]),
    ]  # fmt: skip
    assert sorted(p.name for p in path.parent.iterdir()) == ["ascend-vllm.json"]


def test_no_file_when_turned_off(tmp_path):
    fleet = {"npu-a": host("m", [[0]], ascend_prometheus_sd_file="")}
    rc, out = deploy(tmp_path, fleet, ["npu-a"], "-e", "ascend_prometheus_sd_file=")
    assert rc == 0, out[-3000:]
    assert not (tmp_path / "sd").exists()


def test_a_corrupt_targets_file_stops_with_the_fix(tmp_path):
    (tmp_path / "sd").mkdir()
    (tmp_path / "sd" / "ascend-vllm.json").write_text("[{")
    rc, out = deploy(tmp_path, {"npu-a": host("m", [[0]])}, ["npu-a"])
    assert rc != 0
    assert "ascend-vllm.json is not JSON" in out and "remove it and re-run" in out


def test_module_documentation_parses():
    done = subprocess.run(
        [str(ANSIBLE_PLAYBOOK.with_name("ansible-doc")), "ascend_vllm.serving.ascend_file_sd"],
        cwd=REPO, env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and "file_sd_configs" in done.stdout, done.stderr[-2000:]


PROMTOOL = os.environ.get("PROMTOOL") or shutil.which("promtool")


@pytest.mark.skipif(not PROMTOOL, reason="promtool (Debian package prometheus) is not installed")
def test_promtool_accepts_the_scrape_config_and_the_targets(tmp_path):
    rc, out = deploy(tmp_path, {"npu-a": host(ODD_MODEL, [[0], [1, 2]])}, ["npu-a"])
    assert rc == 0, out[-3000:]
    sd_file = tmp_path / "sd" / "ascend-vllm.json"
    example = (REPO / "docs/prometheus/scrape-config.yml").read_text()
    config = tmp_path / "prometheus.yml"
    config.write_text(example.replace("/etc/prometheus/file_sd/ascend-vllm.json", str(sd_file)))
    done = subprocess.run(
        [PROMTOOL, "check", "config", str(config)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr
