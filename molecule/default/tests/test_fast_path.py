"""deploy.yml's converged fast path on the deployed molecule-default host.

converge and idempotence ran with ``ascend_fast_path: false`` (every task, zero changes the
second time). Here deploy.yml runs from the controller as an operator runs it, with the fast
path on: the first run takes every step and records the verified deployment; the second finds
the host as recorded, skips runtime, weights and service and runs the quick checks on every
replica; a stopped replica alone (no variable changed) sends the third run through every step,
which starts the replica again; the fourth changes the model to the ModelSlim W8A8 checkpoint
(tests/data/tiny-qwen3-w8a8, served on 2 NPUs without conversion, also with
``model_weights_convert: never``), a variable change, so it takes every step; the fifth is
converged for the new inputs. test_modelslim.py checks the W8A8 deployment on the host.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).parents[3]))
INVENTORY = os.environ.get("MOLECULE_INVENTORY_FILE", "")
OUT = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent")) / "fast-path"
EPHEMERAL = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent"))
W8A8_SRC = EPHEMERAL / "qwen3-tiny-w8a8"
W8A8_ARGS = (
    "-e",
    json.dumps(
        {
            "model_weights_src": str(W8A8_SRC),
            "model_weights_name": "qwen3-tiny-w8a8",
            "model_weights_convert": "never",
            "vllm_service_npus": [0, 1],
        }
    ),
)
HOST = "molecule-default-a2"
STOPPED = "qwen3-5"
CONVERGED = "converged: qwen3 is as the last verified deploy left it and every replica is healthy"
START_TASK = "TASK [ascend_vllm.serving.vllm_service : Start the replicas"


def deploy(name: str, *extra: str) -> dict:
    # molecule keeps its ephemeral directory between runs of a checkout: an earlier run's reports
    # there would count as this run's
    shutil.rmtree(OUT / name, ignore_errors=True)
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
        # No Prometheus targets file: a new one in each run's report dir would count as a change.
        "-e",
        "ascend_prometheus_sd_file=",
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
        "ok": int(recap.group(1)),
        "changed": int(recap.group(2)),
        "skipped": int(recap.group(3)),
        "summary": json.loads(summary.read_text()) if summary.exists() else [],
    }


def bundle_digest() -> str:
    """deploy.yml's fingerprint of the bundle (the parts its first play names)."""
    sys.path.insert(0, str(REPO / "src"))
    from ascend_deploy.host.deployed_state import tree_digest

    parts = ["playbooks", "roles", "plugins/modules", "plugins/module_utils/ascend_deploy"]
    return tree_digest(str(REPO), parts)


def stage_w8a8() -> None:
    """The committed W8A8 checkpoint with its SHA256SUMS, as the operator's source directory."""
    shutil.rmtree(W8A8_SRC, ignore_errors=True)
    shutil.copytree(REPO / "tests" / "data" / "tiny-qwen3-w8a8", W8A8_SRC)
    lines = [
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}"
        for p in sorted(W8A8_SRC.iterdir())
        if p.is_file()
    ]
    (W8A8_SRC / "SHA256SUMS").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def runs(host) -> dict:
    assert INVENTORY, "run through molecule (needs MOLECULE_INVENTORY_FILE)"
    bundle = bundle_digest()  # what the first run records
    out = {"first": deploy("first"), "second": deploy("second")}
    host.run(f"docker stop -t 1 {STOPPED}")
    out["drifted"] = deploy("drifted")  # the container only: no variable changed
    out["bundle_changed"] = bundle != bundle_digest()
    out["drifted_state"] = json.loads(
        host.check_output(f"docker inspect -f '{{{{json .State}}}}' {STOPPED}")
    )
    stage_w8a8()
    out["w8a8"] = deploy("w8a8", *W8A8_ARGS)
    out["after"] = deploy("after", *W8A8_ARGS)
    return out


def reports(name: str) -> tuple[dict, dict[str, dict]]:
    """status.json and every replica's verify.json of run ``name`` (one run id per run)."""
    status = list((OUT / name).glob(f"*/{HOST}/status.json"))
    assert len(status) == 1, f"no single status.json for {name}: {status}"
    replicas = {
        p.parent.name: json.loads(p.read_text())
        for p in status[0].parent.glob("*/verify.json")
        if not p.parent.name.startswith("rollback-")
    }
    return json.loads(status[0].read_text()), replicas


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
    assert run["ok"] < runs["first"]["ok"] / 2  # runtime, weights and service did not run
    # The roles' includes are skipped, so their tasks never run (nor show).
    assert START_TASK not in run["out"]
    include = (
        "TASK [ascend_vllm.serving.vllm_service : Write the configuration and start the replicas]"
    )
    after = run["out"].split(include, 1)[1].split("TASK [", 1)[0]
    assert f"skipping: [{HOST}]" in after
    row = next(r for r in run["summary"] if r["host"] == HOST)
    assert row["status"] == "deployed" and row["replicas"].startswith("8")
    assert run["seconds"] < runs["first"]["seconds"]


def test_converged_run_ran_the_quick_checks_on_every_replica(runs):
    status, replicas = reports("second")
    assert status["status"] == "verified"
    assert status["verification"].startswith("quick checks"), status["verification"]
    assert sorted(replicas) == [f"qwen3-{i}" for i in range(8)]
    for name, report in replicas.items():
        checks = {c["name"]: c["status"] for c in report["checks"]}
        assert report["ok"] and report["suite"] == "smoke", (name, report["suite"])
        assert checks["readiness"] == checks["first_request"] == checks["smoke"] == "pass", name
        assert checks["streaming"] == "pass", name


def test_stopped_container_alone_takes_every_step_and_restores(runs, host):
    run = runs["drifted"]
    assert run["rc"] == 0, run["out"][-3000:]
    line = next(ln for ln in run["out"].splitlines() if '"msg": "full run: ' in ln)
    assert f"container {STOPPED} is not running" in line
    # Nothing but the container differs (unless the checkout itself changed in between, which
    # happens only while the bundle is being edited; CI runs on a fixed tree).
    if not runs["bundle_changed"]:
        assert line.strip() == f'"msg": "full run: container {STOPPED} is not running"', line
    assert START_TASK in run["out"]
    assert run["changed"] >= 1
    assert runs["drifted_state"]["Running"] is True


def test_new_model_variables_take_every_step(runs):
    run = runs["w8a8"]
    assert run["rc"] == 0, run["out"][-3000:]
    differs = "the desired state differs (variables, bundle or model manifest changed)"
    assert f"full run: {differs}" in run["out"]
    assert START_TASK in run["out"]
    status, replicas = reports("w8a8")
    assert status["status"] == "verified" and status["verification"] == "full"
    assert sorted(replicas) == ["qwen3-0", "qwen3-1"]
    assert all(r["ok"] for r in replicas.values())


def test_run_after_the_change_is_converged_for_the_new_inputs(runs):
    run = runs["after"]
    assert run["rc"] == 0, run["out"][-3000:]
    assert CONVERGED in run["out"]
    assert run["changed"] == 0
