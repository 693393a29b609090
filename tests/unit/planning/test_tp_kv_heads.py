"""TP and KV heads as vLLM has them (model.tp_heads): one rule for both planners.

vLLM refuses a TP that does not divide the attention heads (verify_with_parallel_config) and,
in QKVParallelLinear, one that neither divides nor is a multiple of the KV heads; a multiple
replicates the KV heads (vLLM-Ascend serves Qwen3-235B-A22B, 4 KV heads, at TP 8).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascend_deploy.errors import CheckFailed, InputError
from ascend_deploy.model.info import inspect_model
from ascend_deploy.model.tp_heads import kv_head_replicas, tp_head_failure, valid_tp_sizes
from ascend_deploy.planning.memory import DEFAULT_MODEL
from ascend_deploy.planning.multinode import group_tp_sizes, load_members, plan_group
from ascend_deploy.planning.plan import make_plan
from ascend_deploy.planning.tp import model_tp_sizes

MODELS = Path(__file__).resolve().parents[2] / "data" / "models"
GB64, IDLE_USED = 65536, 3400


@pytest.fixture(scope="module")
def qwen3_235b_w8a8(tmp_path_factory) -> str:
    """Qwen3-235B-A22B's published config as its W8A8 release ships it (ModelSlim
    description); the index total_size is the BF16 estimate halved, one byte per weight (int8;
    an approximation, the release's own figure is not recorded here), so the single-node A2
    recipe's TP 8 fits 8 x 64 GB."""
    d = tmp_path_factory.mktemp("Qwen3-235B-A22B-W8A8")
    cfg = json.loads((MODELS / "Qwen3-235B-A22B" / "config.json").read_text())
    bf16 = inspect_model(str(MODELS / "Qwen3-235B-A22B"), estimate=True)["weight_bytes_served"]
    (d / "config.json").write_text(json.dumps(cfg))
    (d / "quant_model_description.json").write_text("{}")
    index = {"metadata": {"total_size": bf16 // 2}, "weight_map": {}}
    (d / "quant_model_weight_w8a8.safetensors.index.json").write_text(json.dumps(index))
    return str(d)


def test_vllm_failure_lines_in_vllms_words():
    # Qwen3-4B: 32 heads, 8 KV heads. TP 3 and TP 6 do not divide the heads (pitfall 8).
    for tp in (3, 6):
        assert tp_head_failure(32, 8, tp) == (
            f"ValueError: Total number of attention heads (32) must be divisible by tensor "
            f"parallel size ({tp})."
        )
    # 16 divides 32 and is a multiple of 8: vLLM replicates each KV head on 2 ranks.
    assert tp_head_failure(32, 8, 16) is None and kv_head_replicas(8, 16) == 2
    # The heads divide but the KV heads neither divide nor are divided: divide() asserts.
    assert tp_head_failure(12, 4, 6) == "AssertionError: 6 is not divisible by 4"
    assert tp_head_failure(12, 6, 4) == "AssertionError: 6 is not divisible by 4"
    # MLA splits only the heads.
    assert tp_head_failure(128, 128, 16, mla=True) is None
    assert valid_tp_sizes(12, 4) == [1, 2, 4, 12]


def test_qwen3_235b_a22b_at_tp8_is_planned_with_replicated_kv_heads(qwen3_235b_w8a8):
    """The vLLM-Ascend tutorial's single-node layout (A2, 8 cards, W8A8, TP 8)."""
    plan = make_plan(
        qwen3_235b_w8a8,
        hbm_total_mb=GB64,
        hbm_used_mb=IDLE_USED,
        npus=8,
        tp=8,
        quantization="ascend",
        estimate_weights=True,
    )
    assert plan["feasible"], plan["reasons"]
    assert plan["tp"] == 8 and 8 in plan["valid_tp_sizes"]
    argv = plan["argv"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "8"
    # KV per rank: one (replicated) head: 94 layers x K and V x 1 head x 128 x 2 bytes.
    per_rank = 94 * 2 * 1 * 128 * 2
    assert plan["memory"]["kv_bytes_per_token_per_npu"] == per_rank
    note = next(n for n in plan["notes"] if "KV replication costs memory" in n)
    assert "replicates each KV head on 2 ranks" in note and f"{per_rank} bytes per token" in note


def test_kv_cache_per_rank_counts_replicated_heads(qwen3_235b_w8a8):
    facts = inspect_model(qwen3_235b_w8a8, estimate=True)
    per_token = {t: DEFAULT_MODEL.kv_bytes_per_token_per_npu(facts, t) for t in (1, 2, 4, 8, 16)}
    one_head = 94 * 2 * 128 * 2
    assert per_token == {1: 4 * one_head, 2: 2 * one_head, 4: one_head, 8: one_head, 16: one_head}


def test_tp_below_kv_heads_has_no_replication_note(qwen3_235b_w8a8):
    plan = make_plan(
        qwen3_235b_w8a8,
        hbm_total_mb=GB64,
        hbm_used_mb=IDLE_USED,
        npus=8,
        tp=4,
        estimate_weights=True,
    )
    assert not any("KV replication" in n for n in plan["notes"])


def test_invalid_tp_refused_with_vllms_words_and_valid_sizes(qwen3_235b_w8a8):
    with pytest.raises(CheckFailed) as err:
        make_plan(qwen3_235b_w8a8, hbm_total_mb=GB64, npus=8, tp=6, estimate_weights=True)
    msg = str(err.value)
    assert (
        "Total number of attention heads (64) must be divisible by tensor parallel size (6)" in msg
    )
    assert msg.endswith("valid sizes: 1, 2, 4, 8, 16, 32, 64")


def _members(n: int = 2, chips: int = 8) -> list[dict]:
    raw = [
        {
            "name": f"node{i}",
            "address": f"10.0.0.{10 + i}",
            "nic": "eth0",
            "npus": chips,
            "hbm_total_mb": GB64,
            "hbm_used_mb": 3300,
            "hardware": "a2",
        }
        for i in range(n)
    ]
    return load_members({"members": raw})[0]


@pytest.mark.parametrize("name", ["Qwen3-235B-A22B", "Qwen3-32B", "DeepSeek-R1"])
def test_single_host_and_multi_node_use_the_same_tp_rule(name):
    facts = inspect_model(str(MODELS / name), estimate=True)
    single = model_tp_sizes(facts)[0]
    assert single == group_tp_sizes(facts)
    heads, kv = facts["num_attention_heads"], facts["num_key_value_heads"]
    expected = [
        t
        for t in range(1, heads + 1)
        if heads % t == 0 and (facts["mla"] or kv % t == 0 or t % kv == 0)
    ]
    assert single == expected


def test_both_planners_refuse_the_same_tp_in_vllms_words():
    """Qwen3-32B (64 heads, 8 KV heads) at TP 6: neither planner accepts it; TP 16 both do."""
    model = str(MODELS / "Qwen3-32B")
    vllm_line = (
        "Total number of attention heads (64) must be divisible by tensor parallel size (6)."
    )
    with pytest.raises(InputError) as group_err:
        plan_group(model, _members(), tp=6)
    assert "TP6 is not a valid layout" in str(group_err.value)
    assert f'vLLM fails with "ValueError: {vllm_line}"' in str(group_err.value)
    with pytest.raises(CheckFailed) as single_err:
        make_plan(model, hbm_total_mb=GB64, npus=8, tp=6, estimate_weights=True)
    assert f'vLLM fails with "ValueError: {vllm_line}"' in str(single_err.value)
    single = make_plan(model, hbm_total_mb=GB64, npus=16, tp=16, estimate_weights=True)
    assert single["tp"] == 16
    assert any("replicates each KV head on 2 ranks" in n for n in single["notes"])


def test_multi_node_tp8_over_4_kv_heads_says_what_replication_costs():
    plan = plan_group(str(MODELS / "Qwen3-235B-A22B"), _members(), tp=8)
    assert (plan["dp"], plan["tp"]) == (2, 8) and plan["feasible"]
    note = next(n for n in plan["notes"] if "KV replication costs memory" in n)
    assert f"{94 * 2 * 128 * 2} bytes per token on every NPU" in note


def test_tp_dividing_the_heads_but_not_fitting_the_kv_heads_is_refused(tmp_path):
    """48 heads, 8 KV heads (Qwen3-32B's config otherwise): TP 6 divides the heads, but it
    neither divides the 8 KV heads nor is a multiple of them; 16, 24 and 48 are multiples."""
    cfg = json.loads((MODELS / "Qwen3-32B" / "config.json").read_text())
    cfg.update(num_attention_heads=48, num_key_value_heads=8)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckFailed) as err:
        make_plan(str(tmp_path), hbm_total_mb=GB64, npus=8, tp=6, estimate_weights=True)
    msg = str(err.value)
    assert msg.startswith(
        "tensor parallel size 6 neither divides nor is a multiple of num_key_value_heads 8 "
        '(num_attention_heads 48); vLLM fails with "AssertionError: 8 is not divisible by 6".'
    )
    assert msg.endswith("valid sizes: 1, 2, 4, 8, 16, 24, 48")


def test_replicated_kv_heads_cost_weight_memory_too(qwen3_235b_w8a8):
    """At TP 8 over 4 KV heads each rank loads one whole head of K and V per layer: 94 layers
    x 2 x 4096 x 128 x 2 bytes x (1 - 4/8) = 94 MiB above an even 1/8 split (the emulator's
    weights_per_rank loads the same)."""
    facts = inspect_model(qwen3_235b_w8a8, estimate=True)
    assert DEFAULT_MODEL.replicated_kv_weight_bytes(facts, 4) == 0
    assert DEFAULT_MODEL.replicated_kv_weight_bytes(facts, 8) == 94 * 2 * 4096 * 128 * 2 // 2
    at8 = DEFAULT_MODEL.budget(facts, GB64, IDLE_USED, 0.9, tp=8)["weights_per_npu_mb"]
    even = -(
        -(facts["weight_bytes_served"] + DEFAULT_MODEL.vocab_padding_bytes(facts)) // (8 << 20)
    )
    assert at8 - even == 94
