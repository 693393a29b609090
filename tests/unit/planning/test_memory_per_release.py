"""The memory model per vllm-ascend release: vLLM's profiling from v0.15.0rc1 (start-up
refusal, KV without other processes or the graph pool, capture in the headroom), the older
conservative model before it. Cards are real npu-smi samples under tests/data/samples."""

from __future__ import annotations

import os
import re

import pytest

from ascend_deploy.host import npu_smi
from ascend_deploy.planning.memory import profiles_memory
from ascend_deploy.planning.plan import make_plan
from ascend_deploy.planning.preflight import npu_memory

SAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "data", "samples")


def card(name: str) -> tuple[int, int]:
    """(HBM total, HBM used) MB of a real npu-smi sample, as preflight plans with them."""
    with open(os.path.join(SAMPLES, name), encoding="utf-8") as fh:
        memory = npu_memory(npu_smi.parse(fh.read())["chips"])
    assert memory is not None
    return memory


HOLDER = "npu-smi-info_with_processes_910B1_elided_3.txt"  # python holds 59618 MB of NPU 0
SMALL_HOLDER = "npu-smi-info_910B4_anon_busid_10.txt"  # 6154/65536 MB in use
IDLE = "npu-smi-info_910B2C_trimmed_25.5.2_3.txt"  # 3412/65536 MB: the driver's idle use


@pytest.mark.parametrize(
    ("release", "profiling"),
    [("v0.14.0rc1", False), ("v0.15.0rc1", True), ("v0.13.0", False), ("v0.23.0", True)],
)
def test_the_boundary_is_v0_15_0rc1(release, profiling):
    assert profiles_memory(release) is profiling
    assert profiles_memory(None) is False


def test_v0_23_0_refuses_a_card_held_by_another_process(qwen3_checkpoints):
    total, used = card(HOLDER)
    assert (total, used) == (65536, 64293)
    plan = make_plan(qwen3_checkpoints["4b-bf16"], total, used, vllm_ascend="v0.23.0")
    assert not plan["feasible"]
    (reason,) = plan["reasons"]
    assert "v0.23.0 would refuse to start" in reason
    assert "free HBM at start 1243 MB" in reason
    assert "gpu_memory_utilization 0.9 x 62236 MB = 56012 MB" in reason
    assert "Free memory on device" in reason
    assert "lower vllm_service_gpu_memory_utilization to 0.01 or less" in reason
    assert "free the card" in reason


def test_a_holder_above_the_headroom_v0_23_refused_v0_13_planned_smaller(qwen3_checkpoints):
    total, used = card(SMALL_HOLDER)  # 2854 MB above the idle 3300: more than 4% of 62236
    model = qwen3_checkpoints["4b-bf16"]
    new = make_plan(model, total, used, vllm_ascend="v0.23.0", gpu_memory_utilization=0.96)
    assert not new["feasible"]
    assert "free HBM at start 59382 MB" in new["reasons"][0]
    assert "to 0.95 or less" in new["reasons"][0]
    old = make_plan(model, total, used, vllm_ascend="v0.13.0", gpu_memory_utilization=0.96)
    idle = make_plan(model, total, 3300, vllm_ascend="v0.13.0", gpu_memory_utilization=0.96)
    assert old["feasible"], old["reasons"]
    assert old["memory"]["used_by_others_mb"] == 6154
    assert old["kv_capacity_tokens"] < idle["kv_capacity_tokens"]  # today's: smaller KV


def test_v0_23_0_kv_is_total_times_util_minus_weights_and_activation(qwen3_checkpoints):
    total, used = card(IDLE)
    plan = make_plan(qwen3_checkpoints["4b-bf16"], total, used, vllm_ascend="v0.23.0")
    mem = plan["memory"]
    assert plan["feasible"], plan["reasons"]
    assert mem["memory_model"] == "profiling"
    assert mem["device_total_mb"] == 65536 - 3300  # torch_npu's total, without the driver's
    assert mem["kv_budget_mb"] == (
        int(mem["device_total_mb"] * 0.9) - mem["weights_per_npu_mb"] - mem["activation_mb"]
    )
    assert mem["graph_capture_mb"] == 0 and mem["runtime_reserve_mb"] == 0
    older = make_plan(qwen3_checkpoints["4b-bf16"], total, used, vllm_ascend="v0.13.0")
    old = older["memory"]
    assert old["kv_budget_mb"] == (
        int(65536 * 0.9) - used - old["weights_per_npu_mb"] - old["activation_mb"] - 2048 - 1024
    )
    assert not any("graph capture" in n for n in plan["notes"])


def test_capture_headroom_too_small_is_predicted(qwen3_checkpoints):
    total, used = card(SMALL_HOLDER)
    model = qwen3_checkpoints["4b-bf16"]
    plan = make_plan(model, total, used, vllm_ascend="v0.23.0", gpu_memory_utilization=0.95)
    assert plan["feasible"], plan["reasons"]
    (warning,) = [n for n in plan["notes"] if "graph capture" in n]
    assert "258 MB (free at start 59382 MB - 59124 MB" in warning
    assert "less than the 2048 MB" in warning
    assert "to 0.92 or less" in warning and "vllm_service_enforce_eager: true" in warning
    eager = make_plan(
        model, total, used, vllm_ascend="v0.23.0", gpu_memory_utilization=0.95, enforce_eager=True
    )
    assert not any("graph capture" in n for n in eager["notes"])
    fixed = make_plan(model, total, used, vllm_ascend="v0.23.0", gpu_memory_utilization=0.92)
    assert not any("graph capture" in n for n in fixed["notes"])


def test_preflight_plans_with_the_release_memory_model(tmp_path, qwen3_checkpoints):
    from ascend_deploy.planning.preflight import run_preflight

    with open(os.path.join(SAMPLES, SMALL_HOLDER), encoding="utf-8") as fh:
        info = npu_smi.parse(fh.read(), source=SMALL_HOLDER)
    model = qwen3_checkpoints["4b-bf16"]
    new = run_preflight(str(tmp_path), model_dir=model, npu_info=info, vllm_ascend="v0.23.0")
    checks = {c["id"]: c for c in new["checks"]}
    assert checks["model.plan"]["status"] == "ok"  # 0.9 of the card starts
    old = run_preflight(str(tmp_path), model_dir=model, npu_info=info)
    old_plan = {c["id"]: c for c in old["checks"]}["model.plan"]
    kv = [int(re.search(r"KV cache (\d+) tokens", c["evidence"]).group(1)) for c in
          (checks["model.plan"], old_plan)]  # fmt: skip
    assert kv[0] > kv[1]  # v0.23.0 does not subtract the 2854 MB others hold


def test_describe_shows_the_release_budget(qwen3_checkpoints):
    from ascend_deploy.planning.plan import describe

    total, used = card(IDLE)
    new = describe(make_plan(qwen3_checkpoints["4b-bf16"], total, used, vllm_ascend="v0.23.0"))
    assert "per NPU (vLLM profiling, v0.15.0rc1+): device 62236 MB x 0.9 = 56012 MB" in new
    assert "graph capture 2048 MB in the 6112 MB headroom" in new
    old = describe(make_plan(qwen3_checkpoints["4b-bf16"], total, used, vllm_ascend="v0.13.0"))
    assert "minus in use 3412" in old
