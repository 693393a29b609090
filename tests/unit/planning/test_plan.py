"""The serving planner: TP, memory, context length, quantization, env rules, CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from ascend_deploy.cli import main
from ascend_deploy.errors import CheckFailed, InputError
from ascend_deploy.model.info import inspect_model
from ascend_deploy.planning import memory as memory_model
from ascend_deploy.planning.plan import make_plan, valid_tp_sizes
from ascend_deploy.planning.rules import load_rules, shipped_rules
from ascend_deploy.versioning import version_key
from ascend_sim.checkpoints import with_yarn, write_checkpoint, write_modelslim_description

GB64, GB32 = 65536, 32768
IDLE_USED = 3400  # what npu-smi shows used on an idle 910B (vllm-ascend #1363)


def flag(argv, name):
    return argv[argv.index(name) + 1] if name in argv else None


def test_qwen3_4b_fp8_on_one_64gb_910b(qwen3_checkpoints):
    plan = make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, hbm_used_mb=IDLE_USED)
    assert plan["feasible"] and plan["reasons"] == []
    assert plan["kv_bytes_per_token"] == 147_456
    assert plan["model"]["weight_bytes_served"] == 8_044_936_192
    assert plan["model"]["needs_conversion"] is True
    assert plan["tp"] == 1 and plan["replicas"] == 1
    assert plan["max_model_len"] == 40960
    assert 1 <= plan["max_num_seqs"] <= 256
    argv = plan["argv"]
    assert argv[:3] == [
        "vllm",
        "serve",
        qwen3_checkpoints["4b-fp8"] + "-bf16",
    ]  # the converted copy
    assert flag(argv, "--max-model-len") == "40960"
    assert flag(argv, "--tensor-parallel-size") == "1"
    assert "--quantization" not in argv
    assert plan["conversion"] == {
        "required": True,
        "source": qwen3_checkpoints["4b-fp8"],
        "target": qwen3_checkpoints["4b-fp8"] + "-bf16",
    }
    mem = plan["memory"]
    assert mem["weights_per_npu_mb"] == -(-8_044_936_192 // 2**20)
    assert mem["kv_budget_mb"] == (
        int(GB64 * 0.9)
        - IDLE_USED
        - mem["weights_per_npu_mb"]
        - mem["activation_mb"]
        - mem["graph_capture_mb"]
        - mem["runtime_reserve_mb"]
        - mem["hccl_mb"]
    )
    assert plan["kv_capacity_tokens"] % 128 == 0
    assert plan["kv_capacity_tokens"] == (mem["kv_budget_mb"] * 2**20 // (147_456 * 128)) * 128


def test_one_replica_per_npu_when_the_model_fits_one_card(qwen3_checkpoints):
    plan = make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, hbm_used_mb=IDLE_USED, npus=8)
    assert plan["tp"] == 1 and plan["replicas"] == 8
    assert plan["devices_per_replica"] == [[i] for i in range(8)]
    launches = plan["replica_launch"]
    assert [launch["port"] for launch in launches] == list(range(8000, 8008))
    # Each container mounts its own /dev/davinci<i> and names it in its own numbering: 0.
    assert [launch["env"]["ASCEND_RT_VISIBLE_DEVICES"] for launch in launches] == ["0"] * 8
    assert [launch["devices"][0] for launch in launches] == [f"/dev/davinci{i}" for i in range(8)]
    assert all("HCCL_OP_EXPANSION_MODE" not in launch["env"] for launch in launches)


CONTROL_DEVICES = ["/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]


def test_replicas_get_the_real_npu_ids_devices_and_container_names(qwen3_checkpoints):
    """NPUs [2, 5] at TP 2: one replica that mounts /dev/davinci2 and 5 and sees them as 0,1."""
    plan = make_plan(
        qwen3_checkpoints["4b-bf16"],
        hbm_total_mb=GB64,
        npus=[2, 5],
        tp=2,
        service="qwen3",
        port=9000,
    )
    assert plan["feasible"] and plan["replicas"] == 1
    assert plan["npus"] == [2, 5] and plan["devices_per_replica"] == [[2, 5]]
    (spec,) = plan["replica_launch"]
    assert spec["name"] == "qwen3-0" and spec["index"] == 0 and spec["port"] == 9000
    assert spec["npus"] == [2, 5]
    assert spec["devices"] == ["/dev/davinci2", "/dev/davinci5", *CONTROL_DEVICES]
    assert spec["env"]["ASCEND_RT_VISIBLE_DEVICES"] == "0,1"
    assert spec["env"] == plan["env"] and spec["argv"] == plan["argv"]
    assert flag(spec["argv"], "--port") == "9000"
    assert flag(spec["argv"], "--tensor-parallel-size") == "2"


def test_one_replica_per_listed_npu_in_the_order_given(qwen3_checkpoints):
    plan = make_plan(
        qwen3_checkpoints["4b-bf16"], hbm_total_mb=GB64, hbm_used_mb=IDLE_USED, npus=[7, 3, 4]
    )
    assert plan["tp"] == 1 and plan["replicas"] == 3
    specs = plan["replica_launch"]
    assert [s["name"] for s in specs] == ["vllm-0", "vllm-1", "vllm-2"]
    assert [s["npus"] for s in specs] == [[7], [3], [4]]
    assert [s["devices"][0] for s in specs] == ["/dev/davinci7", "/dev/davinci3", "/dev/davinci4"]
    assert all(s["devices"][1:] == CONTROL_DEVICES for s in specs)
    assert [s["env"]["ASCEND_RT_VISIBLE_DEVICES"] for s in specs] == ["0", "0", "0"]
    assert [s["port"] for s in specs] == [8000, 8001, 8002]
    # A count is NPUs 0..n-1: the same layout as the CLI's --npus
    assert make_plan(qwen3_checkpoints["4b-bf16"], hbm_total_mb=GB64, npus=3)[
        "devices_per_replica"
    ] == [
        [0],
        [1],
        [2],
    ]


@pytest.mark.parametrize(
    ("npus", "expect"),
    [
        ([], "empty list"),
        ([1, 1], "names an NPU twice"),
        ([0, -1], "NPU id must be an integer >= 0"),
        (["2"], "NPU id must be an integer >= 0"),
        (0, "npus must be an integer >= 1"),
        ("2", "npus must be a count or a list of NPU ids"),
    ],
)
def test_bad_npu_lists_are_refused_by_value(qwen3_checkpoints, npus, expect):
    with pytest.raises(InputError, match=expect):
        make_plan(qwen3_checkpoints["4b-bf16"], hbm_total_mb=GB64, npus=npus)


def test_rules_are_an_argument(qwen3_checkpoints):
    """A caller's rules dict is used as given; the shipped rules stay untouched."""
    rules = load_rules()
    rules["env"].append({"name": "ASCEND_DEPLOY_PROBE", "value": 7, "when": {"tp_min": 2}})
    rules["hardware"]["a2"]["supported_since"] = "v0.20.0"
    two = make_plan(qwen3_checkpoints["4b-bf16"], hbm_total_mb=GB64, npus=[2, 5], tp=2, rules=rules)
    assert two["env"]["ASCEND_DEPLOY_PROBE"] == "7"
    one = make_plan(qwen3_checkpoints["4b-bf16"], hbm_total_mb=GB64, rules=rules)
    assert "ASCEND_DEPLOY_PROBE" not in one["env"]
    with pytest.raises(CheckFailed, match=r"support starts with v0\.20\.0"):
        make_plan(
            qwen3_checkpoints["4b-bf16"], hbm_total_mb=GB64, vllm_ascend="v0.13.0", rules=rules
        )
    shipped = make_plan(
        qwen3_checkpoints["4b-bf16"], hbm_total_mb=GB64, npus=2, tp=2, vllm_ascend="v0.13.0"
    )
    assert "ASCEND_DEPLOY_PROBE" not in shipped["env"]
    assert load_rules()["hardware"]["a2"]["supported_since"] == "v0.7.1rc1"
    assert shipped_rules() is shipped_rules()  # read from disk once per process
    with pytest.raises(InputError, match="need 'hardware', 'env' and 'flags'"):
        make_plan(qwen3_checkpoints["4b-bf16"], hbm_total_mb=GB64, rules={"hardware": {}})


def test_an_empty_service_name_is_refused(qwen3_checkpoints):
    with pytest.raises(InputError, match="service must be a non-empty name"):
        make_plan(qwen3_checkpoints["4b-bf16"], hbm_total_mb=GB64, service="")


def test_an_unparsable_vllm_ascend_version_is_an_input_error(qwen3_checkpoints):
    with pytest.raises(InputError, match=r"'latest' is not a version like v0\.13\.0"):
        make_plan(qwen3_checkpoints["4b-bf16"], hbm_total_mb=GB64, vllm_ascend="latest")


def test_tp_not_dividing_heads_names_numbers_and_valid_sizes(qwen3_checkpoints):
    with pytest.raises(CheckFailed) as err:
        make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, npus=4, tp=3)
    msg = str(err.value)
    assert "tensor parallel size 3" in msg
    assert "num_attention_heads 32" in msg and "num_key_value_heads 8" in msg
    # pitfall 8's real failure, in vLLM's own words (verify_with_parallel_config)
    assert (
        'vLLM fails with "ValueError: Total number of attention heads (32) must be divisible '
        'by tensor parallel size (3)."' in msg
    )
    # multiples of the 8 KV heads are valid too: vLLM replicates KV heads (QKVParallelLinear)
    assert msg.endswith("valid sizes: 1, 2, 4, 8, 16, 32")
    assert valid_tp_sizes(40, 8) == [1, 2, 4, 8, 40]  # 5, 10, 20: neither divisor nor multiple
    assert valid_tp_sizes(16, 8) == [1, 2, 4, 8, 16]
    assert valid_tp_sizes(28, 4) == [1, 2, 4, 28]  # 7, 14: not multiples of 4
    assert valid_tp_sizes(64, 4) == [1, 2, 4, 8, 16, 32, 64]  # Qwen3-235B-A22B
    assert valid_tp_sizes(128, 128, mla=True) == [1, 2, 4, 8, 16, 32, 64, 128]


def test_tp_larger_than_npus(qwen3_checkpoints):
    with pytest.raises(CheckFailed, match="tensor parallel size 4 needs 4 NPUs but --npus is 2"):
        make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, npus=2, tp=4)


def test_pinned_max_model_len_above_the_model_limit(qwen3_checkpoints):
    with pytest.raises(CheckFailed) as err:
        make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, max_model_len=65536)
    assert "--max-model-len 65536" in str(err.value)
    assert "max_position_embeddings 40960" in str(err.value)


def test_fp8_14b_fits_a_64gb_card_but_not_a_32gb_card(qwen3_checkpoints):
    """16 GB of FP8 looks like it fits 32 GB; converted to BF16 it is 29.5 GB (pitfall 2)."""
    big = make_plan(qwen3_checkpoints["14b-fp8"], hbm_total_mb=GB64, hbm_used_mb=IDLE_USED)
    assert big["feasible"] and big["tp"] == 1 and big["max_model_len"] == 40960
    small = make_plan(qwen3_checkpoints["14b-fp8"], hbm_total_mb=GB32, hbm_used_mb=3000)
    assert not small["feasible"]
    assert (
        "weights need 28169 MB per NPU at TP 1 but only 26491 MB of HBM are free"
        in (small["reasons"][0])
    )
    assert (
        "valid larger sizes need more NPUs: 2, 4, 8, 40 (TP 2 on 2 NPUs fits: "
        in small["reasons"][1]
    )
    two = make_plan(qwen3_checkpoints["14b-fp8"], hbm_total_mb=GB32, hbm_used_mb=3000, npus=2)
    assert two["feasible"] and two["tp"] == 2 and two["replicas"] == 1
    assert two["env"]["HCCL_OP_EXPANSION_MODE"] == "AIV"
    assert two["memory"]["hccl_mb"] == 800
    assert two["devices_per_replica"] == [[0, 1]]


def test_4b_on_32gb_and_64gb_cards(qwen3_checkpoints):
    p64 = make_plan(qwen3_checkpoints["4b-bf16"], hbm_total_mb=GB64, hbm_used_mb=IDLE_USED)
    p32 = make_plan(qwen3_checkpoints["4b-bf16"], hbm_total_mb=GB32, hbm_used_mb=IDLE_USED)
    assert p64["feasible"] and p32["feasible"]
    assert p64["max_model_len"] == p32["max_model_len"] == 40960
    assert p32["kv_capacity_tokens"] < p64["kv_capacity_tokens"]
    assert p32["max_num_seqs"] < p64["max_num_seqs"]
    # the difference is exactly the HBM: 0.9 x 32768 MB of KV budget
    diff = p64["memory"]["kv_budget_mb"] - p32["memory"]["kv_budget_mb"]
    extra_activation = p32["memory"]["activation_mb"] - p64["memory"]["activation_mb"]
    assert diff == int(GB64 * 0.9) - int(GB32 * 0.9) + extra_activation


def test_unpinned_max_model_len_is_lowered_to_the_kv_capacity(qwen3_checkpoints):
    plan = make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB32, hbm_used_mb=14000)
    assert plan["feasible"]
    assert plan["max_model_len"] < 40960
    assert plan["max_model_len"] == plan["kv_capacity_tokens"]
    assert plan["max_model_len"] % 128 == 0
    assert any("max_model_len lowered from the model's 40960" in n for n in plan["notes"])
    assert flag(plan["argv"], "--max-model-len") == str(plan["max_model_len"])


def test_pinned_max_model_len_that_does_not_fit_fails_with_numbers(qwen3_checkpoints):
    plan = make_plan(
        qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB32, hbm_used_mb=14000, max_model_len=40960
    )
    assert not plan["feasible"]
    cap = make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB32, hbm_used_mb=14000)[
        "kv_capacity_tokens"
    ]
    reason = plan["reasons"][0]
    assert f"--max-model-len 40960 does not fit: the KV cache holds {cap} tokens" in reason
    assert f"lower --max-model-len to {cap} or less" in reason


@pytest.fixture(scope="module")
def qwen3_8b_yarn(tmp_path_factory):
    """Qwen3-8B BF16 with YaRN enabled as its model card says (up to 131072 tokens)."""
    d = tmp_path_factory.mktemp("models") / "Qwen3-8B-yarn"
    write_checkpoint(str(d), with_yarn("qwen3-8b"), fp8=False, data="sparse")
    return str(d)


def test_yarn_lifts_the_limit_and_a_32gb_card_lowers_to_its_kv_capacity(qwen3_8b_yarn):
    plan = make_plan(qwen3_8b_yarn, hbm_total_mb=GB32, hbm_used_mb=3200)
    assert plan["feasible"]
    assert plan["model"]["max_model_len_limit"] == 131072
    cap = plan["kv_capacity_tokens"]
    # More than Qwen3's own 40960 (YaRN), less than 131072 (the card).
    assert 40960 < cap < 131072
    assert plan["max_model_len"] == cap
    assert f"max_model_len lowered from the model's 131072 to {cap} tokens" in plan["notes"][0]
    assert flag(plan["argv"], "--max-model-len") == str(cap)
    mem = plan["memory"]
    assert cap == (mem["kv_budget_mb"] * 2**20 // (147_456 * 128)) * 128


def test_yarn_context_pinned_on_one_32gb_card_is_refused_with_numbers(qwen3_8b_yarn):
    cap = make_plan(qwen3_8b_yarn, hbm_total_mb=GB32, hbm_used_mb=3200)["kv_capacity_tokens"]
    plan = make_plan(qwen3_8b_yarn, hbm_total_mb=GB32, hbm_used_mb=3200, max_model_len=131072)
    assert not plan["feasible"]
    first, second = plan["reasons"]
    assert first.startswith(
        f"--max-model-len 131072 does not fit: the KV cache holds {cap} tokens ("
    )
    assert f"lower --max-model-len to {cap} or less, or use more NPUs" in first
    two = make_plan(
        qwen3_8b_yarn, hbm_total_mb=GB32, hbm_used_mb=3200, npus=2, max_model_len=131072
    )
    assert two["feasible"] and two["tp"] == 2 and two["max_model_len"] == 131072
    assert (
        "valid larger sizes need more NPUs: 2, 4, 8, 16, 32 (TP 2 on 2 NPUs fits: its KV cache "
        in second
    )
    assert f"holds {two['kv_capacity_tokens']} tokens, max_model_len 131072)" in second


def test_pinned_context_above_the_yarn_limit_and_the_yarn_hint(qwen3_8b_yarn, qwen3_checkpoints):
    with pytest.raises(CheckFailed) as err:
        make_plan(qwen3_8b_yarn, hbm_total_mb=GB64, npus=8, max_model_len=262144)
    msg = str(err.value)
    assert "--max-model-len 262144 is larger than the model's limit 131072" in msg
    assert "rope_scaling yarn: original_max_position_embeddings 32768 x factor 4" in msg
    assert "Use 131072 or less" in msg and "Qwen3 reaches" not in msg
    with pytest.raises(CheckFailed) as err:
        make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, max_model_len=131072)
    assert "limit 40960 (max_position_embeddings 40960;" in str(err.value)
    assert "Qwen3 reaches 131072 with YaRN (rope_scaling rope_type yarn, factor 4.0" in str(
        err.value
    )


def test_pinned_max_num_seqs_beyond_capacity(qwen3_checkpoints):
    plan = make_plan(
        qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB32, hbm_used_mb=IDLE_USED, max_num_seqs=256
    )
    assert not plan["feasible"]
    assert "--max-num-seqs 256 plans 256 x 4096" in plan["reasons"][0]
    ok = make_plan(
        qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB32, hbm_used_mb=IDLE_USED, max_num_seqs=8
    )
    assert ok["feasible"] and ok["max_num_seqs"] == 8


def test_no_room_at_all(qwen3_checkpoints):
    plan = make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB32, hbm_used_mb=20000)
    assert not plan["feasible"]
    assert "(TP 2 on 2 NPUs fits: its KV cache holds " in plan["reasons"][-1]
    full = make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB32, hbm_used_mb=28000)
    assert full["reasons"][-1].endswith(
        "valid larger sizes need more NPUs: 2, 4, 8, 16, 32 (none of them fits either)"
    )
    assert (
        "no HBM left for the KV cache" in plan["reasons"][0]
        or "weights need" in (plan["reasons"][0])
    )


def test_32b_picks_the_smallest_tp_that_fits_and_fills_the_host(qwen3_checkpoints):
    plan = make_plan(
        qwen3_checkpoints["32b-bf16"], hbm_total_mb=GB64, hbm_used_mb=IDLE_USED, npus=8
    )
    assert plan["feasible"] and plan["tp"] == 2 and plan["replicas"] == 4
    assert plan["devices_per_replica"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    ports = [launch["env"]["HCCL_IF_BASE_PORT"] for launch in plan["replica_launch"]]
    assert len(set(ports)) == 4
    assert [launch["env"]["ASCEND_RT_VISIBLE_DEVICES"] for launch in plan["replica_launch"]] == [
        "0,1"
    ] * 4


def test_quantization_ascend_refused_on_fp8_and_bf16(qwen3_checkpoints):
    with pytest.raises(CheckFailed) as err:
        make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, quantization="ascend")
    assert "quant_model_description.json" in str(err.value)
    assert "FP8 checkpoint" in str(err.value)
    with pytest.raises(CheckFailed, match="float \\(unquantized\\) model"):
        make_plan(qwen3_checkpoints["4b-bf16"], hbm_total_mb=GB64, quantization="ascend")
    with pytest.raises(CheckFailed, match="has no FP8 compute"):
        make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, quantization="fp8")
    with pytest.raises(CheckFailed, match="does not match"):
        make_plan(qwen3_checkpoints["4b-bf16"], hbm_total_mb=GB64, quantization="awq")


def test_quantization_ascend_accepted_with_modelslim_description(tmp_path):
    d = tmp_path / "Qwen3-4B-w8a8"
    write_checkpoint(str(d), "qwen3-4b", fp8=False, data="sparse")
    write_modelslim_description(str(d))
    for requested in ("ascend", None):  # explicit, and added automatically
        plan = make_plan(str(d), hbm_total_mb=GB64, quantization=requested)
        assert plan["quantization"] == "ascend"
        assert flag(plan["argv"], "--quantization") == "ascend"
        assert plan["argv"][2] == str(d)


@pytest.mark.parametrize(
    ("version", "tp", "expect", "absent"),
    [
        ("v0.9.1", 1, {"VLLM_USE_V1": "1", "TASK_QUEUE_ENABLE": "1"}, ["HCCL_OP_EXPANSION_MODE"]),
        ("v0.9.0rc2", 1, {"VLLM_USE_V1": "1"}, []),
        ("v0.9.2rc1", 1, {}, ["VLLM_USE_V1"]),
        ("v0.8.5rc1", 1, {}, ["VLLM_USE_V1"]),
        (
            "v0.13.0",
            2,
            {"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True", "HCCL_OP_EXPANSION_MODE": "AIV"},
            ["VLLM_USE_V1"],
        ),
        ("v0.13.0rc3", 1, {"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True"}, []),
        ("v0.14.0rc1", 1, {"TASK_QUEUE_ENABLE": "1"}, ["PYTORCH_NPU_ALLOC_CONF"]),
        ("0.23.0", 2, {"HCCL_OP_EXPANSION_MODE": "AIV"}, ["PYTORCH_NPU_ALLOC_CONF"]),
        (None, 1, {"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True"}, ["VLLM_USE_V1"]),
    ],
)
def test_environment_per_version(qwen3_checkpoints, version, tp, expect, absent):
    plan = make_plan(
        qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, npus=tp, tp=tp, vllm_ascend=version
    )
    env = plan["env"]
    for key, value in expect.items():
        assert env[key] == value
    for key in absent:
        assert key not in env
    assert env["TASK_QUEUE_ENABLE"] == "1"
    assert ("HCCL_OP_EXPANSION_MODE" in env) == (tp > 1)


def test_rules_live_in_data():
    rules = load_rules()
    names = {r["name"] for r in rules["env"]}
    assert names == {
        "TASK_QUEUE_ENABLE",
        "HCCL_OP_EXPANSION_MODE",
        "PYTORCH_NPU_ALLOC_CONF",
        "VLLM_USE_V1",
        "VLLM_ASCEND_ENABLE_FLASHCOMM1",
    }
    assert rules["hardware"]["a2"]["fp8_native"] is False
    assert rules["hardware"]["a3"]["fp8_native"] is False
    assert rules["hardware"]["a5"]["fp8_native"] is True


def test_version_order():
    order = ["v0.7.3rc1", "v0.7.3", "v0.7.3.post1", "v0.9.1rc3", "v0.9.1", "0.10.0rc1", "v0.14.0"]
    assert sorted(order, key=version_key) == order
    assert version_key("0.21.0rc2.dev0+g80610e443") > version_key("v0.21.0rc1")
    with pytest.raises(ValueError, match="not a version"):
        version_key("latest")


A5_FP8 = {  # release -> what upstream does with Qwen3-FP8 (serve_rules block_fp8)
    "v0.17.0rc1": "fp8 quantization is currently not supported in npu",
    "v0.20.2rc1": "fp8 quantization is currently not supported in npu",
    "v0.21.0rc1": "o_groups",
    "v0.23.0": "o_groups",
    "v0.25.1rc1": "o_groups",
    "v0.27.1rc1": "no block_fp8 rule covers vllm-ascend v0.27.1rc1",
    None: "vllm-ascend release unknown",
}


@pytest.mark.parametrize("release", list(A5_FP8))
def test_a5_converts_block_fp8_for_every_release_that_cannot_serve_it(qwen3_checkpoints, release):
    """Ascend 950 computes FP8, but no tagged release serves Qwen3-FP8 as it is: v0.17.0rc1-
    v0.20.2rc1 refuse fp8, v0.21.0rc1-v0.25.1rc1 fail on o_groups (issue #14467)."""
    fp8 = qwen3_checkpoints["4b-fp8"]
    plan = make_plan(fp8, hbm_total_mb=GB64, hardware="a5", vllm_ascend=release)
    assert plan["model"]["needs_conversion"] is True
    assert plan["argv"][2] == fp8 + "-bf16" and plan["quantization"] is None
    assert plan["memory"]["weights_per_npu_mb"] > 2 * 4_412_063_872 // 2**20 * 0.9
    note = next(n for n in plan["notes"] if n.startswith("FP8 weights are converted"))
    assert A5_FP8[release] in note
    with pytest.raises(CheckFailed, match=re.escape(A5_FP8[release])):
        make_plan(fp8, hbm_total_mb=GB64, hardware="a5", vllm_ascend=release, quantization="fp8")


def test_a5_serves_fp8_natively_only_where_a_release_rule_says_native(qwen3_checkpoints):
    rules = load_rules()
    rules["block_fp8"]["releases"].append(
        {"from": "v0.27.1rc1", "to": "v0.27.1", "outcome": "native", "error": "", "source": "site"}
    )
    fp8 = qwen3_checkpoints["4b-fp8"]
    a5 = make_plan(fp8, hbm_total_mb=GB64, hardware="a5", vllm_ascend="v0.27.1", rules=rules)
    assert a5["model"]["needs_conversion"] is False and a5["argv"][2] == fp8
    assert a5["quantization"] == "fp8"
    assert a5["memory"]["weights_per_npu_mb"] == -(-4_412_063_872 // 2**20)
    # the same release on hardware without FP8 compute still converts
    a3 = make_plan(fp8, hbm_total_mb=GB64, hardware="a3", vllm_ascend="v0.27.1", rules=rules)
    assert a3["model"]["needs_conversion"] is True
    assert any("Atlas A3 (910C) has no FP8 compute" in n for n in a3["notes"])
    rules["block_fp8"]["releases"].append({"from": "v0.28.0", "to": "v0.29.0", "outcome": "ok"})
    with pytest.raises(InputError, match="needs an outcome in refused, load_error, native"):
        make_plan(fp8, hbm_total_mb=GB64, hardware="a5", vllm_ascend="v0.28.0", rules=rules)


def test_310p_runs_eager_in_fp16_and_unknown_hardware_is_refused(qwen3_checkpoints):
    p310 = make_plan(qwen3_checkpoints["4b-bf16"], hbm_total_mb=24576, hardware="310p")
    assert "--enforce-eager" in p310["argv"] and flag(p310["argv"], "--dtype") == "float16"
    assert p310["memory"]["graph_capture_mb"] == 0
    with pytest.raises(CheckFailed, match="unknown hardware 'h100'"):
        make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, hardware="h100")
    with pytest.raises(CheckFailed, match=r"support starts with v0\.10\.0rc1"):
        make_plan(
            qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, hardware="a3", vllm_ascend="v0.9.1"
        )


def test_enforce_eager_drops_graph_memory(qwen3_checkpoints):
    graph = make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64)
    eager = make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, enforce_eager=True)
    assert "--enforce-eager" in eager["argv"] and "--enforce-eager" not in graph["argv"]
    assert eager["kv_capacity_tokens"] > graph["kv_capacity_tokens"]
    assert eager["memory"]["graph_capture_mb"] == 0


def test_swap_space_only_when_host_ram_allows(qwen3_checkpoints):
    base = {"hbm_total_mb": GB64, "vllm_ascend": "v0.13.0"}
    assert "--swap-space" not in make_plan(qwen3_checkpoints["4b-fp8"], **base)["argv"]
    plan = make_plan(qwen3_checkpoints["4b-fp8"], host_ram_mb=512 * 1024, npus=8, **base)
    assert all(flag(lc["argv"], "--swap-space") == "4" for lc in plan["replica_launch"])
    tight = make_plan(qwen3_checkpoints["4b-fp8"], host_ram_mb=16 * 1024, npus=8, **base)
    assert "--swap-space" not in tight["argv"]
    assert any("--swap-space omitted" in n for n in tight["notes"])
    small = make_plan(qwen3_checkpoints["4b-fp8"], host_ram_mb=40 * 1024, npus=8, **base)
    assert flag(small["argv"], "--swap-space") == "2"  # 40 GiB x 0.4 / 8 workers
    new = make_plan(
        qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, vllm_ascend="v0.18.0", host_ram_mb=2**20
    )
    assert "--swap-space" not in new["argv"]


def test_unknown_used_hbm_and_npus_default(qwen3_checkpoints):
    plan = make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, hbm_used_mb=None, npus=None)
    assert plan["memory"]["used_by_others_mb"] == 0 and plan["replicas"] == 1
    assert any("HBM in use unknown" in n for n in plan["notes"])


def test_api_key_is_never_in_argv(qwen3_checkpoints):
    plan = make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, api_key_env=True)
    assert plan["secret_env"] == ["VLLM_API_KEY"]
    assert "--api-key" not in plan["argv"] and "VLLM_API_KEY" not in plan["env"]
    with pytest.raises(InputError, match="must not carry --api-key"):
        make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, extra_args=["--api-key=secret"])


def test_extra_args_and_names(qwen3_checkpoints):
    plan = make_plan(
        qwen3_checkpoints["4b-fp8"],
        hbm_total_mb=GB64,
        extra_args=["--enable-prefix-caching"],
        served_model_name="qwen3",
        served_model_dir="/models/qwen3-bf16",
        port=9000,
        host="127.0.0.1",
    )
    argv = plan["argv"]
    assert argv[2] == "/models/qwen3-bf16" and argv[-1] == "--enable-prefix-caching"
    assert flag(argv, "--served-model-name") == "qwen3"
    assert flag(argv, "--port") == "9000" and flag(argv, "--host") == "127.0.0.1"
    with pytest.raises(InputError, match="conflicts with the value the plan sets"):
        make_plan(
            qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, extra_args=["--max-model-len", "8"]
        )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hbm_total_mb": 0}, "hbm_total_mb must be an integer >= 1"),
        ({"hbm_total_mb": "65536"}, "hbm_total_mb must be an integer"),
        ({"hbm_total_mb": GB64, "hbm_used_mb": GB64}, "is not below hbm_total_mb"),
        ({"hbm_total_mb": GB64, "gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
        ({"hbm_total_mb": GB64, "npus": 0}, "npus must be"),
        ({"hbm_total_mb": GB64, "max_model_len": True}, "max_model_len must be"),
        ({"hbm_total_mb": GB64, "port": 70000}, "port must be 1-65535"),
        ({"hbm_total_mb": GB64, "vllm_ascend": "banana"}, "not a version"),
    ],
)
def test_bad_arguments(qwen3_checkpoints, kwargs, message):
    with pytest.raises(InputError, match=message):
        make_plan(qwen3_checkpoints["4b-fp8"], **kwargs)


def test_emulator_formula_accepts_the_plan(qwen3_checkpoints):
    """The emulated vLLM computes capacity with the same function from the planned argv."""
    for key, hbm, used, npus in [
        ("4b-fp8", GB64, IDLE_USED, 1),
        ("4b-fp8", GB32, 14000, 1),
        ("14b-fp8", GB32, 3000, 2),
        ("32b-bf16", GB64, IDLE_USED, 8),
    ]:
        plan = make_plan(qwen3_checkpoints[key], hbm_total_mb=hbm, hbm_used_mb=used, npus=npus)
        assert plan["feasible"], plan["reasons"]
        argv = plan["argv"]
        facts = inspect_model(qwen3_checkpoints[key])  # what the engine loads (served bytes)
        cap = memory_model.kv_capacity_tokens(
            facts,
            hbm_total_mb=hbm,
            hbm_used_mb=used,
            gpu_memory_utilization=float(flag(argv, "--gpu-memory-utilization")),
            tp=int(flag(argv, "--tensor-parallel-size")),
            enforce_eager="--enforce-eager" in argv,
            max_num_seqs=int(flag(argv, "--max-num-seqs")),
        )
        assert cap == plan["kv_capacity_tokens"]
        assert int(flag(argv, "--max-model-len")) <= cap
        assert int(flag(argv, "--max-num-seqs")) * min(plan["max_model_len"], 4096) <= cap
        # memory taken by another process after planning shrinks what the engine gets
        tighter = memory_model.kv_capacity_tokens(
            facts, hbm, used + 2048, 0.9, tp=plan["tp"], max_num_seqs=plan["max_num_seqs"]
        )
        assert tighter < cap


def test_engine_refuses_planned_context_when_hbm_was_taken_meanwhile(qwen3_checkpoints):
    plan = make_plan(qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB32, hbm_used_mb=14000)
    facts = inspect_model(qwen3_checkpoints["4b-fp8"])
    cap = memory_model.kv_capacity_tokens(
        facts, GB32, 14000 + 1024, 0.9, max_num_seqs=plan["max_num_seqs"]
    )
    assert cap < plan["max_model_len"]  # the emulated engine would fail its KV check


# ---- CLI ----


def run_cli(capsys, *args):
    code = main(["plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_feasible_exit_0(qwen3_checkpoints, capsys):
    code, out, err = run_cli(
        capsys, "--model-dir", qwen3_checkpoints["4b-fp8"], "--hbm-total-mb", "65536", "--json"
    )
    assert code == 0 and err == ""
    plan = json.loads(out)
    assert plan["kv_bytes_per_token"] == 147456
    assert plan["model"]["weight_bytes_served"] == 8044936192
    assert plan["feasible"] is True


def test_cli_human_output(qwen3_checkpoints, capsys):
    code, out, _ = run_cli(
        capsys,
        "--model-dir",
        qwen3_checkpoints["4b-fp8"],
        "--hbm-total-mb",
        "65536",
        "--hbm-used-mb",
        "3400",
        "--npus",
        "2",
        "--vllm-ascend",
        "v0.13.0",
    )
    assert code == 0
    assert "8,044,936,192 bytes served (398 tensors)" in out
    assert "147,456 bytes per token" in out
    assert "TP 1, 2 replica(s) on NPUs 0, 1" in out
    assert "replica    vllm-1: NPUs 1, port 8001, ASCEND_RT_VISIBLE_DEVICES=0" in out
    assert "rules      vllm-ascend v0.13.0, hardware a2" in out
    assert "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True" in out
    assert "vllm serve " in out and "--max-model-len 40960" in out


def test_cli_infeasible_exit_1(qwen3_checkpoints, capsys):
    code, out, _ = run_cli(
        capsys, "--model-dir", qwen3_checkpoints["14b-fp8"], "--hbm-total-mb", "32768", "--json"
    )
    assert code == 1
    assert json.loads(out)["feasible"] is False


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--tp", "3", "--npus", "4"], 1, "valid sizes: 1, 2, 4, 8, 16, 32\n"),
        (["--max-model-len", "50000"], 1, "max_position_embeddings 40960"),
        (["--quantization", "ascend"], 1, "quant_model_description.json"),
        (["--vllm-ascend", "nightly"], 2, "not a version"),
    ],
)
def test_cli_refusals(qwen3_checkpoints, capsys, args, code, message):
    rc, out, err = run_cli(
        capsys, "--model-dir", qwen3_checkpoints["4b-fp8"], "--hbm-total-mb", "65536", *args
    )
    assert rc == code
    assert out == ""
    assert err.startswith("ascend-deploy plan: error: ") and message in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "args",
    [
        ["--hbm-total-mb", "lots"],
        ["--hbm-total-mb", "-5"],
        ["--hbm-total-mb", "65536", "--gpu-memory-utilization", "2"],
        ["--hbm-total-mb", "65536", "--npus", "0"],
        ["--hbm-total-mb", "65536", "--hardware", "910b"],  # a chip, not a hardware family
    ],
)
def test_cli_bad_numbers_exit_2(qwen3_checkpoints, capsys, args):
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--model-dir", qwen3_checkpoints["4b-fp8"], *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1


def test_cli_without_memory_figures_names_both_ways(qwen3_checkpoints, capsys):
    rc, out, err = run_cli(capsys, "--model-dir", qwen3_checkpoints["4b-fp8"])
    assert rc == 2 and out == ""
    assert "give --hbm-total-mb N" in err and "or --npu-smi-file FILE" in err


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: None, "model directory not found"),
        (lambda d: d.mkdir(), "config.json not found"),
        (lambda d: (d.mkdir(), (d / "config.json").write_bytes(os.urandom(64))), "config.json"),
        (
            lambda d: (d.mkdir(), (d / "config.json").write_text('{"num_hidden_layers": 2}')),
            "required field 'num_attention_heads' is missing",
        ),
    ],
)
def test_cli_bad_model_dir_exit_2(tmp_path, capsys, setup, message):
    d = tmp_path / "m"
    setup(d)
    rc, out, err = run_cli(capsys, "--model-dir", str(d), "--hbm-total-mb", "65536")
    assert rc == 2 and out == ""
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_cli_truncated_shard_exit_2_in_a_real_process(tmp_path):
    d = tmp_path / "m"
    write_checkpoint(str(d), "qwen3-0.6b", layers=1, data="sparse")
    shard = d / "model-00001-of-00001.safetensors"
    shard.write_bytes(shard.read_bytes()[:200])
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ascend_deploy.cli",
            "plan",
            "--model-dir",
            str(d),
            "--hbm-total-mb",
            "65536",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "model-00001-of-00001.safetensors" in proc.stderr and "truncated" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_yarn_context_on_a_32gb_card(qwen3_8b_yarn, capsys):
    common = ["--model-dir", qwen3_8b_yarn, "--hbm-total-mb", "32768", "--hardware", "a2"]
    common += ["--vllm-ascend", "v0.23.0"]
    code, out, _ = run_cli(capsys, *common, "--max-model-len", "131072")
    assert code == 1
    assert "context    limit 131072 tokens (rope_scaling yarn" in out
    cap = int(out.split("the KV cache holds ")[1].split()[0])
    assert f"lower --max-model-len to {cap} or less, or use more NPUs" in out
    code, out, _ = run_cli(capsys, *common, "--json")
    assert code == 0
    plan = json.loads(out)
    assert plan["max_model_len"] == plan["kv_capacity_tokens"] == cap


def test_hccl_ports_follow_the_host_npus_so_services_on_disjoint_npus_never_collide(
    qwen3_checkpoints,
):
    """Two TP 2 services on one host both planned HCCL_IF_BASE_PORT 60000 (issue 22): the range
    follows the replica's first host NPU, one service or several."""
    model = qwen3_checkpoints["32b-bf16"]

    def ports(npus, **kw):
        plan = make_plan(model, hbm_total_mb=GB64, hbm_used_mb=IDLE_USED, npus=npus, tp=2, **kw)
        return [int(r["env"]["HCCL_IF_BASE_PORT"]) for r in plan["replica_launch"]]

    first, second = ports([0, 1, 2, 3]), ports([4, 5, 6, 7])
    assert first == [60000, 60512] and second == [61024, 61536]
    assert ports([6, 7]) == [61536]  # one replica still gets its own range
    ranges = [range(p, p + 256) for p in first + second]
    assert all(set(a).isdisjoint(b) for i, a in enumerate(ranges) for b in ranges[i + 1 :])
    assert ports([0, 1], hccl_base_port=50000) == [50000]
    with pytest.raises(InputError, match="HCCL base port 80 is outside 1024-65535"):
        ports([0, 1], hccl_base_port=80)
    with pytest.raises(InputError, match="pass 65535"):
        ports([6, 7], hccl_base_port=65000)
    one = make_plan(model, hbm_total_mb=GB64, hbm_used_mb=IDLE_USED, npus=[3, 4], tp=2)
    assert one["replica_launch"][0]["env"]["HCCL_IF_BASE_PORT"] == str(60000 + 3 * 256)


def test_an_a3_plan_places_one_replica_per_die_and_says_why(qwen3_checkpoints):
    # 8 cards x 2 dies: 16 devices of 64 GB; Qwen3-4B fits one die (issue 21 §3)
    plan = make_plan(
        qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, hbm_used_mb=IDLE_USED,
        npus=list(range(16)), hardware="a3", vllm_ascend="v0.23.0",
    )  # fmt: skip
    assert plan["feasible"] and plan["tp"] == 1 and len(plan["replica_launch"]) == 16
    assert [r["npus"] for r in plan["replica_launch"]] == [[d] for d in range(16)]
    note = next(n for n in plan["notes"] if n.startswith("Atlas A3: each die is a device"))
    assert note.endswith("16 replica(s) x TP 1 on 16 devices")
    two = make_plan(
        qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, hbm_used_mb=IDLE_USED,
        npus=list(range(16)), hardware="a3", vllm_ascend="v0.23.0", tp=2,
    )  # fmt: skip
    # a TP 2 replica spans the two dies of one card (devices 2k, 2k+1)
    assert [r["npus"] for r in two["replica_launch"]][:2] == [[0, 1], [2, 3]]
    assert not any("die" in n for n in make_plan(
        qwen3_checkpoints["4b-fp8"], hbm_total_mb=GB64, hbm_used_mb=IDLE_USED, npus=8,
    )["notes"])  # fmt: skip


@pytest.mark.parametrize(
    ("release", "detected"),
    [("v0.14.0rc1", False), ("v0.15.0rc1", True), ("v0.16.0rc1", False), ("v0.17.0rc1", True)],
)
def test_modelslim_flag_note_says_whether_the_release_detects_it(tmp_path, release, detected):
    d = tmp_path / "Qwen3-4B-w8a8"
    write_checkpoint(str(d), "qwen3-4b", fp8=False, data="sparse")
    write_modelslim_description(str(d))
    plan = make_plan(str(d), hbm_total_mb=GB64, vllm_ascend=release)
    assert flag(plan["argv"], "--quantization") == "ascend"
    (note,) = [n for n in plan["notes"] if n.startswith("--quantization ascend added")]
    if detected:
        assert f"vllm-ascend {release} would also detect it" in note
    else:
        assert f"vllm-ascend {release} does not detect it" in note
        assert "(releases that do: v0.15.0rc1, v0.17.0rc1 on)" in note


def test_planner_and_emulator_agree_on_modelslim_detection_for_every_release():
    """One fact, two copies (the planner's data, the emulator's behaviour table)."""
    from ascend_deploy.planning.compat import load_matrix
    from ascend_deploy.planning.rules import modelslim_autodetected, shipped_rules
    from ascend_sim.vllm_emulator.versions import behaviour_for

    releases = sorted({r["vllm_ascend"] for r in load_matrix()})
    assert "v0.15.0rc1" in releases and "v0.16.0rc1" in releases
    for release in releases:
        planner = modelslim_autodetected(shipped_rules(), release)
        assert planner == behaviour_for(release).quant_autodetect, release
