"""Verify molecule/fleet from the outputs converge.yml kept (controller side) and the hosts."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

OUT = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent")) / "fleet"
V2 = "/srv/ascend-deploy/models/qwen3-tiny-fp8-v2"


def run(name: str) -> dict:
    path = OUT / name / "run.json"
    assert path.exists(), f"{path} missing: converge did not keep the outputs of run {name}"
    return json.loads(path.read_text())


def rows(name: str) -> dict:
    path = OUT / name / "deploy-summary.json"
    assert path.exists(), f"{path} missing: run {name} wrote no summary"
    return {r["host"]: r for r in json.loads(path.read_text())}


def on(host: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "exec", host, *argv], capture_output=True, text=True)


def test_rollout_deploys_good_hosts_and_names_why_the_bad_one_failed():
    result = run("rollout")
    assert result["rc"] != 0, "a failed host must make the run fail"
    r = rows("rollout")
    assert r["fleet-a"]["status"] == "deployed"
    assert r["fleet-c"]["status"] == "deployed"
    assert r["fleet-b"]["status"] == "FAILED"
    why = r["fleet-b"]["why"]
    assert "preflight" in why and "Alarm" in why and "Fix:" in why, why
    # Issue 16 §2: no image's CANN accepts HDK 23.0.7: the upgrade path, in container terms.
    assert "runs on driver 23.0.7" in why and "26.1.0 (published for CANN 9.1.0)" in why, why
    assert "versions.driver-cann" not in why  # the host's own CANN is not used in container mode
    assert "vLLM-Ascend deployment summary (3 hosts)" in result["stdout"]


def test_unpublished_pairing_is_a_warning_in_the_output_and_the_summary():
    """Issues 16 §3 and 11 F: HDK 25.5.2 with the image's CANN 9.1.0 was accepted silently."""
    out = run("rollout")["stdout"]
    c = rows("rollout")["fleet-c"]
    note = "driver 25.5.2 with CANN 9.1.0: pairing not published"
    assert any(note in w for w in c["warnings"]), c
    assert c["warns"] == "1 (below)"
    assert "fleet-c: 1 preflight warning(s)" in out  # during preflight
    assert re.search(r"fleet-c WARNING driver-cann: " + re.escape(note), out)  # under the table
    assert rows("rollout")["fleet-a"]["warnings"] == []


def test_canary_ran_alone_first():
    out = run("rollout")["stdout"]
    first_batch = out.split("PLAY [Deploy vLLM-Ascend serving]")[1].split("PLAY [")[0]
    assert "fleet-a" in first_batch
    assert "fleet-b" not in first_batch and "fleet-c" not in first_batch


def test_failing_canary_stops_the_rollout_and_the_rest_is_not_run():
    result = run("canary")
    assert result["rc"] != 0
    out = result["stdout"]
    assert "CANARY fleet-b not deployed" in out
    assert "NO MORE HOSTS LEFT" in out
    deploy_part = out.split("PLAY [Deploy vLLM-Ascend serving]")[1]
    # No task ran on fleet-c; the failing canary batch still wrote the summary, which says why.
    assert "[fleet-c]" not in deploy_part.split("NO MORE HOSTS LEFT")[0]
    r = rows("canary")
    assert set(r) == {"fleet-b", "fleet-c"}  # the hosts of this run only
    assert r["fleet-b"]["status"] == "FAILED"
    assert r["fleet-c"]["status"] == "NOT RUN", r["fleet-c"]
    assert "not reached" in r["fleet-c"]["why"]
    line = [x for x in out.splitlines() if x.strip().startswith('"fleet-c ')]
    assert line and "NOT RUN" in line[-1], line


def test_a_host_that_stops_answering_fails_within_its_bound_and_the_rest_goes_on():
    """Issue 16 §1: fleet-c's Python stops during the copy; it fails at the copy's bound."""
    result = run("freeze")
    assert result["rc"] != 0
    r = rows("freeze")
    assert set(r) == {"fleet-a", "fleet-c"}
    assert "vLLM-Ascend deployment summary (2 hosts)" in result["stdout"]  # --limit prints it
    assert r["fleet-a"]["status"] == "deployed", r["fleet-a"]
    c = r["fleet-c"]
    assert c["status"] == "FAILED"
    m = re.search(
        r"fleet-c: staging \S+qwen3-tiny-fp8-v2 failed at 'Copy the model from the controller': "
        r"Task failed: Timed out after (\d+) second\(s\)\. "
        r"\(bound (\d+) s = model_weights_timeout_base_s",
        c["why"],
    )
    assert m and m.group(1) == m.group(2) and 20 <= int(m.group(1)) <= 22, c["why"]
    # What fleet-c served before is untouched: no partial copy, the replicas still run.
    listing = on("fleet-c", "ls", "-A", "/srv/ascend-deploy/models").stdout.split()
    assert sorted(listing) == ["qwen3-tiny-fp8", "qwen3-tiny-fp8-bf16"], listing
    state = on("fleet-c", "docker", "inspect", "-f", "{{.State.Running}}", "qwen3-0").stdout
    assert state.strip() == "true"


def test_a_full_disk_is_refused_before_any_copy_with_the_figures():
    """Issue 16 §4: 'No space left on device' with no figures, after writing into the target."""
    result = run("disk")
    assert result["rc"] != 0
    r = rows("disk")
    assert set(r) == {"fleet-c"} and r["fleet-c"]["status"] == "FAILED"
    why = r["fleet-c"]["why"]
    assert "Check free space on the host before copying" in why, why
    assert re.search(
        r"needs [\d,]+ bytes \([\d.]+ KiB\), [\d,]+ bytes \([\d.]+ KiB\) free on the filesystem of "
        r"/srv/small",
        why,
    ), why
    assert "vLLM-Ascend deployment summary (1 hosts)" in result["stdout"]
    assert on("fleet-c", "ls", "-A", "/srv/small").stdout.split() == ["qwen3-tiny-fp8-v2"]
    assert on("fleet-c", "cat", "/srv/small/qwen3-tiny-fp8-v2/marker").stdout == "earlier\n"


def test_restarts_since_the_verification_are_reported_and_take_every_step():
    """Issue 16 §5: a replica restarted by its restart policy was reported as converged."""
    result = run("restart")
    assert result["rc"] == 0, result["stdout"][-3000:]
    out = result["stdout"]
    assert re.search(
        r"full run: .*container qwen3-0 restarted \d+ time\(s\) since the last verification", out
    )
    a = rows("restart")["fleet-a"]
    assert a["status"] == "deployed"
    assert a["restarts"] and a["restarts"][0].startswith("qwen3-0: "), a
    assert re.search(r"fleet-a RESTARTS qwen3-0: \d+ time\(s\) since the last verification", out)


def test_check_mode_of_a_healthy_host_is_checked_not_failed():
    """Issue 11 F: --check with the fast path off printed 'FAILED ... not reached'."""
    result = run("check")
    assert result["rc"] == 0, result["stdout"][-3000:]
    a = rows("check")["fleet-a"]
    assert a["status"] == "CHECKED" and a["why"].startswith("check mode"), a
    assert a["replicas"] == "2 x TP1" and a["image"].endswith(":v0.23.0"), a
    assert "vLLM-Ascend deployment summary (1 hosts, check mode)" in result["stdout"]


@pytest.mark.parametrize("name", ["fleet-a", "fleet-c"])
def test_good_hosts_serve(name):
    state = on(name, "docker", "inspect", "-f", "{{.State.Running}}", "qwen3-0")
    assert state.stdout.strip() == "true", state.stderr
