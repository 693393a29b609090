"""Verify molecule/pitfalls from the outputs converge.yml kept (one deploy.yml run per case)."""

from __future__ import annotations

import json

import pytest

from ascend_sim.scenario_outputs import outputs_dir, read_case, row_of

OUT = outputs_dir("pitfalls")


def case(name: str) -> tuple[dict, list[dict]]:
    found = read_case("pitfalls", name)
    if found is None:
        pytest.skip(f"case {name} missing: run through molecule (converge keeps the outputs)")
    return found


def test_p8_tp3_refused_with_valid_sizes():
    run, _ = case("p8-tp3")
    assert run["rc"] != 0
    assert "tensor parallel size 3 does not divide num_attention_heads" in run["stdout"]
    assert "valid sizes: 1, 2" in run["stdout"]  # the tiny model has 4 / 2 heads


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


def test_p1_resolver_picks_an_image_the_driver_runs_and_the_host_serves():
    """Unpinned, the resolver skips releases whose published HDK pairing excludes the driver.

    It picks the newest release without such a statement (v0.11.0, CANN 8.3.RC2). The emulated
    torch_npu decides with the same library (ascend_deploy.compat): no published refusal, so the
    in-image check passes and the host serves v0.11.0 (never v0.23.0).
    """
    run, rows = case("p1-resolved")
    out = run["stdout"]
    assert "quay.io/ascend/vllm-ascend:v0.23.0" not in out.split("Deploy vLLM-Ascend serving")[1]
    assert run["rc"] == 0, out[-3000:]
    row = row_of(rows, "pit-olddrv")
    assert row["status"] == "deployed"
    assert row["image"] == "quay.io/ascend/vllm-ascend:v0.11.0"


def test_p4_graph_capture_failure_falls_back_to_eager_and_reports_it():
    run, rows = case("p4-graph")
    assert run["rc"] == 0, run["stdout"][-3000:]
    assert "ACL graph capture failed" in run["stdout"]
    assert row_of(rows, "pit-graph")["eager"] == "yes (graph-capture fallback)"


def test_p3_leftover_container_is_cleaned_and_the_service_started():
    run, _ = case("p3-leftover")
    out = run["stdout"]
    assert "changed: [pit-main] => (item=qwen3)" in out, "the leftover container was not removed"
    started = out.split("TASK [vllm_service : Wait until every replica answers /health]")
    assert len(started) > 1, "the service did not reach its health check"
    assert "do not belong to service qwen3" not in out


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
    if host.backend.get_hostname() != "pit-graph":
        pytest.skip("pit-graph only")
    argv = json.loads(host.check_output("docker inspect -f '{{json .Config.Cmd}}' qwen3-0"))
    assert argv[2].endswith("-bf16")
    assert "--quantization" not in argv
