"""Verify the rollback scenario: rollback-a is back on the good version, rollback-b is unaffected.

Runs as molecule's testinfra verifier (hosts from molecule's inventory); the reports written on the
controller are read from the scenario's ephemeral directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ascend_sim.scenario_outputs import api_key

EPHEMERAL = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent"))
GOOD = "quay.io/ascend/vllm-ascend:v0.23.0"
NEW = "quay.io/ascend/vllm-ascend:v0.11.0"
STATE = "/etc/ascend-deploy/vllm"
ASK = (
    "import json, urllib.request; "
    "req = urllib.request.Request('http://127.0.0.1:8000/v1/chat/completions', "
    "data=json.dumps({'messages': [{'role': 'user', 'content': 'What is the capital of France?'}], "
    "'max_tokens': 60, 'temperature': 0, "
    "'chat_template_kwargs': {'enable_thinking': False}}).encode(), "
    "headers={'Content-Type': 'application/json', 'Authorization': 'Bearer %s'}); "
    "print(json.load(urllib.request.urlopen(req, timeout=60))['choices'][0]['message']['content'])"
)


def summary() -> dict:
    return json.loads((EPHEMERAL / "reports" / "rollout" / "summary.json").read_text())


def status_of(name: str) -> dict:
    return next(h for h in summary()["hosts"] if h["host"] == name)


def running_image(host) -> tuple[str, dict]:
    out = host.check_output("docker inspect vllm-0")
    info = json.loads(out)[0]
    assert info["State"]["Running"], info["State"]
    return info["Config"]["Image"], info["Config"]["Labels"]


def test_rollout_run_failed_only_rollback_a():
    log = (EPHEMERAL / "rollout.log").read_text()
    assert log.startswith("rc=2"), log[:2000]
    assert "molecule-rollback-a: verification failed" in log
    assert "molecule-rollback-b: verification failed" not in log


def test_summary_says_why():
    a = status_of("molecule-rollback-a")
    assert a["status"] == "rolled back"
    assert "first_request" in a["checks"]
    assert a["pitfall"] == 4 and "inner error" in a["cause"].lower()
    assert a["rollback"] == f"rolled back to {GOOD} (healthy)"
    md = (EPHEMERAL / "reports" / "rollout" / "summary.md").read_text()
    assert "| molecule-rollback-a | rolled back |" in md
    assert "| molecule-rollback-b | verified |" in md
    for f in ("diagnosis.json", "npu-smi.txt", "vllm-0.log", "vllm-0/verify.json", "plan.json"):
        assert (EPHEMERAL / "reports" / "rollout" / "molecule-rollback-a" / f).is_file(), f


@pytest.mark.parametrize("name", ["molecule-rollback-a", "molecule-rollback-b"])
def test_hosts_serve_the_expected_version(host, name):
    if host.backend.get_hostname() != name:
        pytest.skip("checked on its own host")
    image, labels = running_image(host)
    last_good = json.loads(host.file(f"{STATE}/last-good/containers.json").content_string)
    if name == "molecule-rollback-a":
        assert image == GOOD and labels.get("ascend-deploy.rollback") == "true"
        assert last_good["image"] == GOOD
    else:
        assert image == NEW and "ascend-deploy.rollback" not in labels
        assert last_good["image"] == NEW
        assert status_of(name)["status"] == "verified"
    assert "Paris" in host.check_output(f'python3 -c "{ASK % api_key()}"')
