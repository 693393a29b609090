"""Multi-node plans against the documented vLLM-Ascend recipes (planning.multinode)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascend_deploy.cli import main
from ascend_deploy.errors import CheckFailed, InputError
from ascend_deploy.model.info import inspect_model
from ascend_deploy.planning.multinode import group_tp_sizes, load_members, plan_group

MODELS = Path(__file__).resolve().parents[2] / "data" / "models"


def members(n: int = 2, chips: int = 8, hbm: int = 65536, **extra) -> list[dict]:
    raw = [
        {
            "name": f"node{i}",
            "address": f"10.0.0.{10 + i}",
            "nic": "eth0",
            "npus": chips,
            "hbm_total_mb": hbm,
            "hbm_used_mb": 3300,
            "hardware": "a2",
            **extra,
        }
        for i in range(n)
    ]
    return load_members({"members": raw})[0]


@pytest.fixture(scope="module")
def r1_w8a8(tmp_path_factory) -> str:
    """DeepSeek-R1's config as the W8A8 release ships it (ModelSlim description, no
    quantization_config); its index total_size is the config's parameter count at one byte
    per weight (the FP8-native estimate: int8 weights are as large), not the release's figure."""
    d = tmp_path_factory.mktemp("DeepSeek-R1-W8A8")
    cfg = json.loads((MODELS / "DeepSeek-R1" / "config.json").read_text())
    size = inspect_model(str(MODELS / "DeepSeek-R1"), fp8_native=True, estimate=True)
    cfg.pop("quantization_config")
    (d / "config.json").write_text(json.dumps(cfg))
    (d / "quant_model_description.json").write_text("{}")
    index = {"metadata": {"total_size": size["weight_bytes_served"]}, "weight_map": {}}
    (d / "quant_model_weight_w8a8.safetensors.index.json").write_text(json.dumps(index))
    return str(d)


def test_deepseek_r1_w8a8_on_two_a2_is_the_guides_dp4_tp4(r1_w8a8):
    plan = plan_group(r1_w8a8, members())
    assert plan["feasible"], plan["reasons"]
    assert (plan["dp"], plan["tp"], plan["pp"]) == (4, 4, 1)
    assert plan["expert_parallel"] and plan["recipe"]["source"].startswith("https://docs.vllm.ai")
    lead, follow = plan["member_plans"]
    assert lead["role"] == "leader" and "--headless" not in lead["argv"]
    a = lead["argv"]
    assert a[a.index("--data-parallel-size") + 1] == "4"
    assert a[a.index("--data-parallel-size-local") + 1] == "2"
    assert a[a.index("--data-parallel-address") + 1] == "10.0.0.10"
    assert a[a.index("--data-parallel-rpc-port") + 1] == "13389"
    assert a[a.index("--tensor-parallel-size") + 1] == "4"
    assert "--enable-expert-parallel" in a and a[a.index("--quantization") + 1] == "ascend"
    f = follow["argv"]
    assert "--headless" in f and f[f.index("--data-parallel-start-rank") + 1] == "2"
    assert f[f.index("--data-parallel-address") + 1] == "10.0.0.10"
    assert follow["dp_ranks"] == [2, 3]
    for m, ip in ((lead, "10.0.0.10"), (follow, "10.0.0.11")):
        env = m["env"]
        assert env["HCCL_IF_IP"] == ip
        assert (
            env["GLOO_SOCKET_IFNAME"]
            == env["TP_SOCKET_IFNAME"]
            == env["HCCL_SOCKET_IFNAME"]
            == "eth0"
        )
        assert env["HCCL_BUFFSIZE"] == "200"


def test_deepseek_r1_fp8_is_too_big_for_two_a2(tmp_path):
    """FP8 is served as BF16 on A2: twice the bytes, no layout of 16 x 64 GB holds it."""
    plan = plan_group(str(MODELS / "DeepSeek-R1"), members())
    assert not plan["feasible"] and "weights need" in plan["reasons"][0]


def test_qwen3_235b_ray_is_tp8_pp2_and_native_dp_uses_ep():
    ray = plan_group(str(MODELS / "Qwen3-235B-A22B"), members(), backend="ray")
    assert (ray["dp"], ray["tp"], ray["pp"]) == (1, 8, 2) and ray["feasible"]
    lead, follow = ray["member_plans"]
    assert "--distributed-executor-backend" in lead["argv"] and follow["argv"] is None
    assert follow["ray_start"][2] == "--address=10.0.0.10:6379"
    mp = plan_group(str(MODELS / "Qwen3-235B-A22B"), members())
    assert mp["feasible"] and mp["dp"] * mp["tp"] == 16 and mp["expert_parallel"]


def test_dense_qwen3_32b_under_dp_across_two_hosts():
    plan = plan_group(str(MODELS / "Qwen3-32B"), members())
    assert plan["feasible"] and (plan["dp"], plan["tp"]) == (8, 2)
    assert not plan["expert_parallel"]
    assert [m["data_parallel_start_rank"] for m in plan["member_plans"]] == [0, 4]


def test_named_leader_goes_first():
    plan = plan_group(str(MODELS / "Qwen3-32B"), members(), leader="node1")
    assert plan["leader"] == "node1" and plan["leader_address"] == "10.0.0.11"
    follower = plan["member_plans"][1]
    a = follower["argv"]
    assert follower["name"] == "node0" and a[a.index("--data-parallel-address") + 1] == "10.0.0.11"


def test_tp_sizes_allow_kv_replication_and_refuse_bad_shapes():
    facts = inspect_model(str(MODELS / "Qwen3-235B-A22B"), estimate=True)
    assert group_tp_sizes(facts)[:5] == [1, 2, 4, 8, 16]
    with pytest.raises(InputError, match="valid: DP16 x TP1, DP8 x TP2, DP4 x TP4, DP2 x TP8"):
        plan_group(str(MODELS / "Qwen3-32B"), members(), tp=3)
    with pytest.raises(InputError, match="valid:"):
        plan_group(str(MODELS / "Qwen3-32B"), members(), tp=2, dp=4)
    uneven = members()
    uneven[1]["chips"] = uneven[1]["chips"][:4]
    with pytest.raises(InputError, match=r"unequal chip counts.*node0: 8, node1: 4"):
        plan_group(str(MODELS / "Qwen3-32B"), uneven)
    with pytest.raises(CheckFailed, match="1 member"):
        plan_group(str(MODELS / "Qwen3-32B"), members(1))


@pytest.mark.parametrize(
    "bad, match",
    [
        (
            {"name": "a", "address": "10.0.0.300", "nic": "eth0", "npus": 8, "hbm_total_mb": 1},
            "address",
        ),
        (
            {"name": "a", "address": "10.0.0.1", "nic": "bad nic!", "npus": 8, "hbm_total_mb": 1},
            "nic",
        ),
        ({"name": "a", "address": "10.0.0.1", "nic": "eth0", "npus": 0, "hbm_total_mb": 1}, "npus"),
        ({"name": "a", "address": "10.0.0.1", "nic": "eth0", "npus": 8}, "hbm_total_mb"),
    ],
)
def test_members_file_values_are_named(bad, match):
    with pytest.raises(InputError, match=match):
        load_members({"members": [bad]})


def test_cli_plan_group(tmp_path, capsys):
    f = tmp_path / "group.json"
    raw = [
        {
            "name": m["name"],
            "address": m["address"],
            "nic": "eth0",
            "npus": 8,
            "hbm_total_mb": 65536,
        }
        for m in members()
    ]
    f.write_text(json.dumps({"members": raw}))
    assert (
        main(
            ["plan-group", "--model-dir", str(MODELS / "Qwen3-32B"), "--members", str(f), "--json"]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["member_plans"][1]["argv"].count("--headless") == 1
    assert (
        main(
            [
                "plan-group",
                "--model-dir",
                str(MODELS / "Qwen3-32B"),
                "--members",
                str(f),
                "--tp",
                "3",
            ]
        )
        == 2
    )
    assert "TP3 is not a valid layout" in capsys.readouterr().err
    f.write_text(json.dumps({"members": [{**raw[0], "address": "nope"}]}))
    assert main(["plan-group", "--model-dir", str(MODELS / "Qwen3-32B"), "--members", str(f)]) == 2
    assert "members[0].address" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("release", "model"), [("v0.23.0", "profiling"), ("v0.13.0", "pre-v0.15"), (None, "pre-v0.15")]
)
def test_the_group_is_sized_with_its_releases_memory_model(r1_w8a8, release, model):
    """v0.15.0rc1+ size memory with vLLM's profiling (issue 23 item 4), in groups as alone."""
    plan = plan_group(r1_w8a8, members(), vllm_ascend=release)
    assert plan["memory"]["memory_model"] == model
