"""Verify molecule/fleet from the outputs converge.yml kept (controller side) and the hosts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

OUT = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent")) / "fleet"


def run(name: str) -> dict:
    path = OUT / name / "run.json"
    assert path.exists(), f"{path} missing: converge did not keep the run's outputs"
    return json.loads(path.read_text())


def test_rollout_deploys_good_hosts_and_names_why_the_bad_one_failed():
    result = run("rollout")
    assert result["rc"] != 0, "a failed host must make the run fail"
    rows = {r["host"]: r for r in json.loads((OUT / "rollout" / "deploy-summary.json").read_text())}
    assert rows["fleet-a"]["status"] == "deployed"
    assert rows["fleet-c"]["status"] == "deployed"
    assert rows["fleet-b"]["status"] == "FAILED"
    why = rows["fleet-b"]["why"]
    assert "preflight" in why and "Alarm" in why and "Fix:" in why, why
    assert "vLLM-Ascend deployment summary (3 hosts)" in result["stdout"]


def test_canary_ran_alone_first():
    out = run("rollout")["stdout"]
    first_batch = out.split("PLAY [Deploy vLLM-Ascend serving]")[1].split("PLAY [")[0]
    assert "fleet-a" in first_batch
    assert "fleet-b" not in first_batch and "fleet-c" not in first_batch


def test_failing_canary_stops_the_rollout():
    result = run("canary")
    assert result["rc"] != 0
    out = result["stdout"]
    assert "CANARY fleet-b not deployed" in out
    assert "NO MORE HOSTS LEFT" in out
    deploy_part = out.split("PLAY [Deploy vLLM-Ascend serving]")[1]
    # No task ran on fleet-c; the failing canary batch still wrote the summary, which says why.
    assert "[fleet-c]" not in deploy_part.split("NO MORE HOSTS LEFT")[0]
    summary = [line for line in out.splitlines() if line.strip().startswith('"fleet-c ')]
    assert summary and "not reached (rollout stopped earlier)" in summary[-1], summary


@pytest.mark.parametrize("name", ["fleet-a", "fleet-c"])
def test_good_hosts_serve(host, name):
    if host.backend.get_hostname() != name:
        pytest.skip("checked on its own host")
    assert host.check_output("docker inspect -f '{{.State.Running}}' qwen3-0") == "true"
