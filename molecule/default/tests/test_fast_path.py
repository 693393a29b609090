"""deploy.yml's converged fast path on the deployed molecule-default host.

converge and idempotence ran with ``ascend_fast_path: false`` (every task, zero changes the
second time). Here deploy.yml runs from the controller as an operator runs it, with the fast
path on: the first run takes every step and records the verified deployment; the second finds
the host as recorded and skips runtime, weights and service; a stopped replica plus a changed
variable send the third run through every step, which starts the replica again; the fourth is
converged for the new inputs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).parents[3]))
INVENTORY = os.environ.get("MOLECULE_INVENTORY_FILE", "")
OUT = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent")) / "fast-path"
HOST = "molecule-default-a2"
STOPPED = "qwen3-5"
CONVERGED = "converged: qwen3 is as the last verified deploy left it and every replica is healthy"
START_TASK = "TASK [vllm_service : Start the replicas"


def deploy(name: str, *extra: str) -> dict:
    OUT.mkdir(parents=True, exist_ok=True)
    cmd = [
        str(REPO / ".venv" / "bin" / "ansible-playbook"),
        "-i",
        INVENTORY,
        str(REPO / "deploy.yml"),
        "-e",
        "ascend_fast_path=true",
        "-e",
        "ascend_canary=false",
        "-e",
        f"ascend_report_dir={OUT / name}",
        *extra,
    ]
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0"}
    start = time.monotonic()
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    (OUT / f"{name}.log").write_text(done.stdout + done.stderr)
    recap = re.search(rf"^{HOST}\s+: ok=(\d+)\s+changed=(\d+).*skipped=(\d+)", done.stdout, re.M)
    assert recap, done.stdout[-3000:]
    summary = OUT / name / "deploy-summary.json"
    return {
        "rc": done.returncode,
        "out": done.stdout,
        "seconds": seconds,
        "changed": int(recap.group(2)),
        "skipped": int(recap.group(3)),
        "summary": json.loads(summary.read_text()) if summary.exists() else [],
    }


@pytest.fixture(scope="module")
def runs(host) -> dict:
    if not INVENTORY:
        pytest.skip("run through molecule (needs MOLECULE_INVENTORY_FILE)")
    out = {"first": deploy("first"), "second": deploy("second")}
    host.run(f"docker stop -t 1 {STOPPED}")
    out["drifted"] = deploy("drifted", "-e", "deploy_verify_concurrency=3")
    out["after"] = deploy("after", "-e", "deploy_verify_concurrency=3")
    return out


def test_first_run_takes_every_step_and_changes_nothing(runs):
    run = runs["first"]
    assert run["rc"] == 0, run["out"][-3000:]
    assert "full run: no record of a verified deployment" in run["out"]
    assert run["changed"] == 0
    assert START_TASK in run["out"]


def test_second_run_is_converged_and_skips_runtime_weights_and_service(runs):
    run = runs["second"]
    assert run["rc"] == 0, run["out"][-3000:]
    assert CONVERGED in run["out"]
    assert run["changed"] == 0
    assert run["skipped"] > runs["first"]["skipped"]
    # The roles' includes are skipped, so their tasks never run (nor show).
    assert START_TASK not in run["out"]
    include = "TASK [vllm_service : Write the configuration and start the replicas]"
    after = run["out"].split(include, 1)[1].split("TASK [", 1)[0]
    assert f"skipping: [{HOST}]" in after
    row = next(r for r in run["summary"] if r["host"] == HOST)
    assert row["status"] == "deployed" and row["replicas"].startswith("8")
    assert run["seconds"] < runs["first"]["seconds"]


def test_stopped_replica_and_new_variable_take_every_step_and_restore(runs, host):
    run = runs["drifted"]
    assert run["rc"] == 0, run["out"][-3000:]
    differs = "the desired state differs (variables, bundle or model manifest changed)"
    assert f"full run: {differs}" in run["out"]
    assert f"container {STOPPED} is not running" in run["out"]
    assert run["changed"] >= 1
    state = json.loads(host.check_output(f"docker inspect -f '{{{{json .State}}}}' {STOPPED}"))
    assert state["Running"] is True


def test_run_after_the_repair_is_converged_for_the_new_inputs(runs):
    run = runs["after"]
    assert run["rc"] == 0, run["out"][-3000:]
    assert CONVERGED in run["out"]
    assert run["changed"] == 0
