"""Verify molecule/pitfalls from the outputs converge.yml kept (one deploy.yml run per case)."""

from __future__ import annotations

import json
import re

import pytest

from ascend_deploy.host import npu_smi
from ascend_sim.scenario_outputs import outputs_dir, read_case, row_of

OUT = outputs_dir("pitfalls")
START_TASK = "TASK [ascend_vllm.serving.vllm_service : Start the replicas"


def case(name: str) -> tuple[dict, list[dict]]:
    found = read_case("pitfalls", name)
    assert found is not None, f"case {name}: no run.json under {OUT} (converge did not keep it)"
    return found


def record(name: str) -> dict:
    """What converge recorded on pit-main at one point (record_host.yml)."""
    path = OUT / f"{name}.json"
    assert path.is_file(), f"{path} missing: converge did not record the host"
    return json.loads(path.read_text())


def names(rec: dict) -> dict[str, str]:
    return {c["Names"]: c["State"] for c in rec["containers"]}


def test_refusals_started_nothing_on_the_host():
    """p8, p7 and the missing image stopped before any serving container or NPU process."""
    for name in ("p8-tp3", "p7-quantization", "no-image"):
        run, _ = case(name)
        assert run["rc"] != 0, name
        assert START_TASK not in run["stdout"], f"{name} reached the container start"
    rec = record("after-refusals")
    assert not [n for n in names(rec) if n.startswith("qwen3")], rec["containers"]
    assert npu_smi.parse(rec["npu_smi"], kind="info")["processes"] == []


def test_missing_image_with_pulls_disabled_names_the_image_and_the_fixes():
    run, _ = case("no-image")
    out = re.sub(r"\s+", " ", run["stdout"])
    assert "Unknown error" not in out
    image = "registry.example.internal/ascend/vllm-ascend:v0.23.0"
    assert f"image {image} is not on the host and pulls are disabled" in out
    for fix in (
        "ascend_runtime_image_archive",
        "ascend_runtime_pull: true",
        "ascend_runtime_registry",
    ):
        assert fix in out, fix


def test_p8_tp3_refused_with_valid_sizes():
    run, _ = case("p8-tp3")
    assert run["rc"] != 0
    assert "tensor parallel size 3 does not divide num_attention_heads" in run["stdout"]
    # the tiny model has 4 heads / 2 KV heads: TP 4 replicates each KV head on 2 ranks
    assert "valid sizes: 1, 2, 4" in run["stdout"]


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
    torch_npu decides with the same library
    (ascend_deploy.planning.compat): no published refusal, so the
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


def test_p3_leftover_replica_is_removed_and_the_service_answers_on_its_port():
    run, rows = case("p3-leftover")
    out = run["stdout"]
    assert run["rc"] == 0, out[-3000:]
    assert row_of(rows, "pit-main")["status"] == "deployed"
    assert "changed: [pit-main] => (item=qwen3-7)" in out, "the leftover replica was not removed"
    assert "do not belong to service qwen3" not in out
    rec = record("after-leftover")
    on_host = names(rec)
    assert "qwen3-7" not in on_host
    assert on_host["qwen3-0"] == on_host["qwen3-1"] == "running"
    # port 8000 (the leftover's) now answers for the new service, with the API key
    assert rec["ports"]["8000"] == {"status": 200, "models": ["qwen3-tiny"]}
    assert rec["ports"]["8001"] == {"status": 200, "models": ["qwen3-tiny"]}


def test_p3_foreign_container_named_like_the_service_survives():
    """A container called qwen3 without the bundle's label is another team's (issue 11 E)."""
    rec = record("after-leftover")
    assert names(rec)["qwen3"] == "running"
    assert "item=qwen3)" not in case("p3-leftover")[0]["stdout"]
    assert rec["ports"]["9200"]["status"] == 200


def test_p3_foreign_job_stops_the_deploy_and_is_listed_by_pid():
    run, _ = case("p3-foreign")
    assert run["rc"] != 0
    pid = (OUT / "p3-foreign" / "pid").read_text().strip()
    out = run["stdout"]
    assert "do not belong to service qwen3" in out
    assert f"PID {pid}" in out
    assert "vllm_service_kill_foreign" in out


def test_p3_foreign_jobs_were_not_touched(host):
    if host.backend.get_hostname() != "pit-main":
        pytest.skip("pit-main only")
    for name in ("batch-job", "qwen3"):
        assert host.check_output(f"docker inspect -f '{{{{.State.Running}}}}' {name}") == "true"
    labels = host.check_output("docker inspect -f '{{json .Config.Labels}}' qwen3")
    assert "ascend-deploy.service" not in labels
    assert (
        host.run(
            "python3 -c \"import urllib.request as u; u.urlopen('http://127.0.0.1:9200/health')\""
        ).rc
        == 0
    )


def test_p2_served_model_is_the_bf16_conversion(host):
    if host.backend.get_hostname() != "pit-graph":
        pytest.skip("pit-graph only")
    argv = json.loads(host.check_output("docker inspect -f '{{json .Config.Cmd}}' qwen3-0"))
    assert argv[2].endswith("-bf16")
    assert "--quantization" not in argv
