"""The planner on other architectures: MLA (DeepSeek-V3), MoE (Qwen3-MoE), Llama, and refusals.

Issue 13 §4: a DeepSeek-V3-shaped config on 16 x 64 GB cards was planned with 1,748,992 KV
bytes per token (K and V of 128 heads of head_dim 56); MLA caches kv_lora_rank +
qk_rope_head_dim values per layer: 61 x 576 x 2 = 70,272 bytes.
"""

from __future__ import annotations

import json

import pytest

from ascend_deploy.cli import main
from ascend_deploy.errors import CheckFailed
from ascend_deploy.model.info import read_architecture
from ascend_deploy.planning.memory import DEFAULT_MODEL
from ascend_deploy.planning.plan import describe, make_plan
from ascend_sim.arch_configs import (
    DEEPSEEK_V3,
    LLAMA_3_1_8B,
    QWEN3_30B_A3B,
    QWEN3_NEXT_80B_A3B,
    write_sparse_model,
)

GB64 = 65536
IDLE = 3300
# DeepSeek-V3 as a ModelSlim W8A8 checkpoint: int8 linear weights, BF16 embeddings and norms.
DSV3_W8A8_BYTES = 680_000_000_000
QWEN3_30B_BYTES = 61_064_000_000  # BF16, all 128 experts


def flag(argv, name):
    return argv[argv.index(name) + 1] if name in argv else None


@pytest.fixture(scope="module")
def dsv3(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("m") / "DeepSeek-V3-w8a8")
    write_sparse_model(d, DEEPSEEK_V3, DSV3_W8A8_BYTES)
    with open(f"{d}/quant_model_description.json", "w", encoding="utf-8") as fh:
        json.dump({"model_quant_type": "W8A8_DYNAMIC"}, fh)
    return d


@pytest.fixture(scope="module")
def qwen3_moe(tmp_path_factory):
    return write_sparse_model(
        str(tmp_path_factory.mktemp("m") / "Qwen3-30B-A3B"), QWEN3_30B_A3B, QWEN3_30B_BYTES
    )


def test_deepseek_v3_mla_cache_is_latent_plus_rope_per_layer(dsv3):
    plan = make_plan(
        dsv3, hbm_total_mb=GB64, hbm_used_mb=IDLE, npus=16, hardware="a3", vllm_ascend="v0.23.0"
    )
    m = plan["model"]
    assert m["attention"] == "mla"
    assert plan["kv_bytes_per_token"] == 61 * (512 + 64) * 2 == 70_272
    assert m["head_dim"] == 128 + 64  # q/k head size, not hidden / heads = 56
    # MLA's cache is the same on every rank: TP does not divide it.
    assert plan["memory"]["kv_bytes_per_token_per_npu"] == 70_272
    assert DEFAULT_MODEL.kv_bytes_per_token_per_npu(m, 8) == 70_272
    # 680 GB of weights need all 16 cards (42.5 GB each); TP 8 would need 85 GB per card.
    assert plan["feasible"], plan["reasons"]
    assert plan["tp"] == 16 and plan["replicas"] == 1
    budget_mb = plan["memory"]["kv_budget_mb"]
    assert plan["kv_capacity_tokens"] == budget_mb * 2**20 // (70_272 * 128) * 128
    # YaRN: original 4096 x factor 40 = 163840; the cache holds a little less, so it is lowered.
    assert m["max_model_len_limit"] == 163_840
    assert plan["max_model_len"] == min(163_840, plan["kv_capacity_tokens"])
    argv = plan["argv"]
    assert flag(argv, "--quantization") == "ascend"
    assert "--enable-expert-parallel" in argv
    assert "MLA latent 512 + rope 64, MoE 256 experts (top 8)" in describe(plan)


def test_deepseek_v3_at_tp_8_does_not_fit_16_cards_of_64gb(dsv3):
    plan = make_plan(
        dsv3, hbm_total_mb=GB64, hbm_used_mb=IDLE, npus=16, hardware="a3", tp=8,
        vllm_ascend="v0.23.0",
    )  # fmt: skip
    assert not plan["feasible"]
    assert plan["reasons"][0].startswith("weights need 81063 MB per NPU at TP 8")


def test_qwen3_moe_sizes_gqa_cache_and_all_experts(qwen3_moe):
    plan = make_plan(qwen3_moe, hbm_total_mb=GB64, hbm_used_mb=IDLE, npus=8, vllm_ascend="v0.23.0")
    m = plan["model"]
    assert m["moe"]["experts"] == 128 and m["moe"]["experts_per_token"] == 8
    assert plan["kv_bytes_per_token"] == 2 * 48 * 4 * 128 * 2 == 98_304
    # All 128 experts resident: 61 GB do not fit one card, so TP 2 (4 replicas on 8 NPUs).
    assert plan["tp"] == 2 and plan["replicas"] == 4
    assert plan["memory"]["weights_per_npu_mb"] == -(-QWEN3_30B_BYTES // (2 * 2**20))
    assert plan["memory"]["kv_bytes_per_token_per_npu"] == 98_304 // 2
    assert "--enable-expert-parallel" in plan["argv"] and plan["expert_parallel"]
    # The MoE's MLP width: 8 routed experts x 768 = 6144 per token (its dense width too).
    assert DEFAULT_MODEL.mlp_width(m) == 6144


def test_expert_parallel_only_at_tp_above_1_and_versions_that_have_it(qwen3_moe, tmp_path):
    small = write_sparse_model(str(tmp_path / "moe-small"), QWEN3_30B_A3B, 20_000_000_000)
    one = make_plan(small, hbm_total_mb=GB64, hbm_used_mb=IDLE, npus=8, vllm_ascend="v0.23.0")
    assert one["tp"] == 1 and "--enable-expert-parallel" not in one["argv"]
    old = make_plan(qwen3_moe, hbm_total_mb=GB64, hbm_used_mb=IDLE, npus=8, vllm_ascend="v0.8.5rc1")
    assert old["tp"] == 2 and "--enable-expert-parallel" not in old["argv"]


def test_llama_gqa_head_dim_from_hidden_and_llama3_rope_keeps_length(tmp_path):
    d = write_sparse_model(str(tmp_path / "Llama-3.1-8B"), LLAMA_3_1_8B, 16_060_522_496)
    plan = make_plan(d, hbm_total_mb=GB64, hbm_used_mb=IDLE, vllm_ascend="v0.23.0")
    assert plan["model"]["head_dim"] == 128
    assert plan["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2 == 131_072
    assert plan["model"]["max_model_len_limit"] == 131_072  # llama3 rope: no factor applied


@pytest.mark.parametrize(
    ("config", "names"),
    [
        (
            QWEN3_NEXT_80B_A3B,
            ["Qwen3NextForCausalLM", "'qwen3_next'", "linear-attention", "recurrent state size"],
        ),
        (
            {**DEEPSEEK_V3, "model_type": "deepseek_v32", "index_topk": 2048, "index_head_dim": 128,
             "architectures": ["DeepseekV32ForCausalLM"]},
            ["DeepseekV32ForCausalLM", "sparse attention", "index_head_dim"],
        ),
        (
            {**LLAMA_3_1_8B, "model_type": "phi3", "architectures": ["Phi3ForCausalLM"]},
            ["Phi3ForCausalLM", "model_type 'phi3' is not one the planner sizes",
             "KV-cache layout per layer"],
        ),
        (
            {**LLAMA_3_1_8B, "model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"],
             "layer_types": ["sliding_attention", "full_attention"] * 16},
            ["Gemma2ForCausalLM", "sliding_attention layers", "window length"],
        ),
        (
            {**LLAMA_3_1_8B, "model_type": "qwen2", "use_sliding_window": True,
             "sliding_window": 4096},
            ["sliding-window attention (sliding_window 4096)"],
        ),
    ],
)  # fmt: skip
def test_an_architecture_the_planner_cannot_size_is_refused_by_name(tmp_path, config, names):
    d = write_sparse_model(str(tmp_path / "m"), config, 1_000_000_000)
    with pytest.raises(CheckFailed) as err:
        make_plan(d, hbm_total_mb=GB64, hbm_used_mb=IDLE, npus=16)
    text = str(err.value)
    assert text.startswith(f"{d}/config.json: the planner cannot size ")
    for name in names:
        assert name in text, text


def test_qwen2_with_sliding_window_off_is_sized():
    cfg = {**LLAMA_3_1_8B, "model_type": "qwen2", "use_sliding_window": False}
    cfg["sliding_window"] = 131072
    assert read_architecture(cfg)["unsized"] is None


def test_cli_refuses_an_unsized_architecture_with_exit_1(tmp_path, capsys):
    d = write_sparse_model(str(tmp_path / "next"), QWEN3_NEXT_80B_A3B, 1_000_000_000)
    code = main(["plan", "--model-dir", d, "--hbm-total-mb", str(GB64), "--npus", "8"])
    err = capsys.readouterr().err
    assert code == 1
    assert "the planner cannot size Qwen3NextForCausalLM (model_type 'qwen3_next')" in err
    assert "Traceback" not in err
