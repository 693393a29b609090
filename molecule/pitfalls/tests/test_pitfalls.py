"""Verify molecule/pitfalls from the outputs converge.yml kept (one deploy.yml run per case)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

OUT = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent")) / "pitfalls"


def case(name: str) -> tuple[dict, list[dict]]:
    path = OUT / name / "run.json"
    if not path.exists():
        pytest.skip(f"{path} missing: run through molecule (converge keeps the outputs)")
    run = json.loads(path.read_text())
    summary = OUT / name / "deploy-summary.json"
    rows = json.loads(summary.read_text()) if summary.exists() else []
    return run, rows


def test_p8_tp3_refused_with_valid_sizes():
    run, _ = case("p8-tp3")
    assert run["rc"] != 0
    assert "tensor parallel size 3 does not divide num_attention_heads" in run["stdout"]
    assert "valid sizes: 1, 2, 4, 8" in run["stdout"]


def test_p7_quantization_ascend_refused():
    run, _ = case("p7-quantization")
    assert run["rc"] != 0
    assert "--quantization ascend needs a ModelSlim checkpoint" in run["stdout"]


def test_p1_pinned_image_too_new_for_the_driver_fails_preflight_naming_versions():
    run, _ = case("p1-pinned")
    assert run["rc"] != 0
    out = run["stdout"]
    assert "failed preflight" in out
    assert "24.1.rc3" in out and "9.1.0" in out and "v0.23.0" in out


def test_p1_resolver_picks_an_image_the_driver_runs():
    run, rows = case("p1-resolved")
    assert run["rc"] == 0, run["stdout"][-3000:]
    row = rows[0]
    assert row["status"] == "deployed"
    assert row["image"] != "quay.io/ascend/vllm-ascend:v0.23.0"
    assert row["image"].startswith("quay.io/ascend/vllm-ascend:v0.11.0")


def test_p4_graph_capture_failure_falls_back_to_eager_and_reports_it():
    run, rows = case("p4-graph")
    assert run["rc"] == 0, run["stdout"][-3000:]
    assert "ACL graph capture failed" in run["stdout"]
    assert rows[0]["eager"] == "yes (graph-capture fallback)"


def test_p3_leftover_container_is_cleaned_and_the_service_deployed():
    run, rows = case("p3-leftover")
    assert run["rc"] == 0, run["stdout"][-3000:]
    assert "Remove containers of earlier deployments" in run["stdout"]
    assert "item=qwen3)" in run["stdout"]
    assert rows[0]["status"] == "deployed"


def test_p3_foreign_job_stops_the_deploy_and_is_listed_by_pid():
    run, _ = case("p3-foreign")
    assert run["rc"] != 0
    pid = (OUT / "p3-foreign" / "pid").read_text().strip()
    out = run["stdout"]
    assert "do not belong to service qwen3" in out
    assert f"PID {pid}" in out
    assert "vllm_service_kill_foreign" in out


def test_p3_foreign_job_was_not_touched(host):
    if host.backend.get_hostname() != "pit-main":
        pytest.skip("pit-main only")
    assert host.check_output("docker inspect -f '{{.State.Running}}' batch-job") == "true"


def test_p2_served_model_is_the_bf16_conversion(host):
    if host.backend.get_hostname() != "pit-olddrv":
        pytest.skip("pit-olddrv only")
    argv = json.loads(host.check_output("docker inspect -f '{{json .Config.Cmd}}' qwen3-0"))
    assert argv[2].endswith("-bf16")
    assert "--quantization" not in argv
