"""Serving options the Qwen3-Dense tutorial of each release passes, the one --additional-config
object, warnings on environment variables a release removed, and CPU binding's CPU need.

Models are the real Hugging Face config.json files under tests/data/models (Qwen3-32B dense,
Qwen3-235B-A22B MoE), sized from the config (estimate_weights) on 64 GB A2 cards; releases as
the tutorials at those tags (serving rules ``serve_options``)."""

from __future__ import annotations

import json
import os
import shlex

import pytest

from ascend_deploy.errors import InputError
from ascend_deploy.planning.plan import make_plan
from ascend_sim.vllm_emulator.args import parse_serve_args

MODELS = os.path.join(os.path.dirname(__file__), "..", "..", "data", "models")
DENSE = os.path.join(MODELS, "Qwen3-32B")
MOE = os.path.join(MODELS, "Qwen3-235B-A22B")
FULL_DECODE = ["--compilation-config", '{"cudagraph_mode": "FULL_DECODE_ONLY"}']


def plan_for(release: str | None, model: str = DENSE, **kw) -> dict:
    kw.setdefault("npus", 4)
    kw.setdefault("tp", 4)
    return make_plan(model, 65536, 3412, vllm_ascend=release, estimate_weights=True, **kw)


def after_model(plan: dict) -> list[str]:
    return plan["argv"][3:]


def has(argv: list[str], seq: list[str]) -> bool:
    return any(argv[i : i + len(seq)] == seq for i in range(len(argv)))


def test_v0_13_0_env_flashcomm1_async_scheduling_full_decode():
    plan = plan_for("v0.13.0")
    argv = after_model(plan)
    assert plan["env"]["VLLM_ASCEND_ENABLE_FLASHCOMM1"] == "1"
    assert "--async-scheduling" in argv
    assert has(argv, FULL_DECODE)
    assert "--additional-config" not in argv
    assert plan["additional_config"] == {}
    assert any(n.startswith("--async-scheduling added:") and "v0.13.0" in n for n in plan["notes"])
    assert any(n.startswith("VLLM_ASCEND_ENABLE_FLASHCOMM1=1 set:") for n in plan["notes"])


def test_v0_18_0_still_the_env_variable():
    plan = plan_for("v0.18.0")
    argv = after_model(plan)
    assert plan["env"]["VLLM_ASCEND_ENABLE_FLASHCOMM1"] == "1"
    assert "--async-scheduling" in argv and has(argv, FULL_DECODE)
    assert "--additional-config" not in argv


def test_v0_21_0rc1_tutorial_drops_async_scheduling():
    argv = after_model(plan_for("v0.21.0rc1"))
    assert "--async-scheduling" not in argv
    assert has(argv, FULL_DECODE)


def test_v0_23_0_flashcomm1_in_additional_config():
    plan = plan_for("v0.23.0")
    argv = after_model(plan)
    assert "VLLM_ASCEND_ENABLE_FLASHCOMM1" not in plan["env"]
    assert "--async-scheduling" in argv and has(argv, FULL_DECODE)
    assert argv.count("--additional-config") == 1
    value = argv[argv.index("--additional-config") + 1]
    assert json.loads(value) == {"enable_flashcomm1": True}
    assert plan["additional_config"] == {"enable_flashcomm1": True}
    assert "--additional-config '{\"enable_flashcomm1\": true}'" in plan["command"]
    assert any("enable_flashcomm1=true added" in n for n in plan["notes"])


@pytest.mark.parametrize("release", ["v0.13.0", "v0.18.0", "v0.23.0"])
def test_the_emulator_parses_the_planned_argv(release):
    argv = shlex.split(plan_for(release)["command"])
    args = parse_serve_args(argv[2:])
    assert args.compilation_config == {"cudagraph_mode": "FULL_DECODE_ONLY"}
    assert args.async_scheduling is True


def test_tp1_gets_no_flashcomm1():
    plan = plan_for("v0.23.0", npus=1, tp=1, max_model_len=4096)
    assert "--additional-config" not in plan["argv"]
    plan = plan_for("v0.13.0", npus=1, tp=1, max_model_len=4096)
    assert "VLLM_ASCEND_ENABLE_FLASHCOMM1" not in plan["env"]


def test_only_for_qwen3_dense_and_known_releases():
    moe = plan_for("v0.23.0", MOE, npus=8, tp=8, max_model_len=4096)
    assert "--async-scheduling" not in moe["argv"] and "--compilation-config" not in moe["argv"]
    assert "--additional-config" not in moe["argv"]
    for release in (None, "v0.11.0"):
        plan = plan_for(release)
        assert "--async-scheduling" not in plan["argv"]
        assert "VLLM_ASCEND_ENABLE_FLASHCOMM1" not in plan["env"]


def test_eager_gets_no_compilation_config():
    argv = after_model(plan_for("v0.23.0", enforce_eager=True))
    assert "--compilation-config" not in argv and "--async-scheduling" in argv


def test_operator_flags_win_over_planned_ones():
    extra = ["--compilation-config", '{"cudagraph_mode": "PIECEWISE"}', "--no-async-scheduling"]
    plan = plan_for("v0.23.0", extra_args=extra)
    argv = after_model(plan)
    assert argv.count("--compilation-config") == 1 and "PIECEWISE" in plan["command"]
    assert "--async-scheduling" not in argv
    assert any(n.startswith("--compilation-config not planned") for n in plan["notes"])


def test_operator_additional_config_is_merged_and_wins():
    mine = {"enable_flashcomm1": False, "weight_prefetch_config": {"enabled": True}}
    plan = plan_for("v0.23.0", additional_config=mine)
    argv = after_model(plan)
    assert argv.count("--additional-config") == 1
    assert json.loads(argv[argv.index("--additional-config") + 1]) == mine
    assert any("the operator's false replaces the planned true" in n for n in plan["notes"])
    older = plan_for("v0.13.0", additional_config={"pa_shape_list": [48, 64, 72, 80]})
    value = older["argv"][older["argv"].index("--additional-config") + 1]
    assert json.loads(value) == {"pa_shape_list": [48, 64, 72, 80]}


def test_additional_config_in_extra_args_is_refused():
    with pytest.raises(InputError, match="vllm_service_additional_config"):
        plan_for("v0.23.0", extra_args=['--additional-config={"enable_flashcomm1": true}'])
    with pytest.raises(InputError, match="must not carry --additional-config"):
        plan_for("v0.13.0", extra_args=["--additional-config", "{}"])


def warnings(plan: dict) -> list[str]:
    return [n for n in plan["notes"] if n.startswith("WARNING: extra env")]


def test_removed_env_warned_with_release_and_replacement():
    env = {"ASCEND_BUFFER_POOL": "4:8", "VLLM_ASCEND_ENABLE_FLASHCOMM1": "1"}
    (pool, fc1) = sorted(warnings(plan_for("v0.23.0", extra_env=env)))
    assert "ASCEND_BUFFER_POOL, which vllm-ascend v0.23.0 no longer reads" in pool
    assert "(removed in v0.23.0; docs/source/user_guide/release_notes.md (v0.23.0, #13834)" in pool
    assert "ASCEND_ENABLE_USE_FABRIC_MEM=1" in pool and "HCCL_INTRA_ROCE_ENABLE=1" in pool
    assert "VLLM_ASCEND_ENABLE_FLASHCOMM1" in fc1 and "deprecated in v0.20.2rc1" in fc1
    assert "enable_flashcomm1: true (in vllm_service_additional_config" in fc1
    assert warnings(plan_for("v0.18.0", extra_env=env)) == []


def test_prefetch_mlp_removed_in_v0_18_0rc1():
    env = {"VLLM_ASCEND_ENABLE_PREFETCH_MLP": "1"}
    assert warnings(plan_for("v0.17.0rc1", extra_env=env)) == []
    (warning,) = warnings(plan_for("v0.18.0", extra_env=env))
    assert "removed in v0.18.0rc1" in warning and "weight_prefetch_config" in warning


def cpu(plan: dict) -> list[str]:
    return [n for n in plan["notes"] if n.startswith("WARNING: CPU binding")]


def test_cpu_binding_needs_cpus_per_npu_from_v0_15_0rc1():
    # an A3 host: 16 logical NPUs (dies), a 64-CPU container
    (warning,) = cpu(plan_for("v0.23.0", host_cpus=64, host_npus=16, host_arch="aarch64"))
    assert "needs 5 CPUs per NPU at vllm-ascend v0.23.0" in warning
    assert "64 CPUs for 16 NPUs give 4" in warning and "at least 80 CPUs" in warning
    assert cpu(plan_for("v0.14.0rc1", host_cpus=64, host_npus=16)) == []
    assert cpu(plan_for("v0.15.0rc1", host_cpus=64, host_npus=16)) == []  # 3 per NPU then
    assert cpu(plan_for("v0.23.0", host_cpus=64, host_npus=16, host_arch="x86_64")) == []
    assert cpu(plan_for("v0.23.0", host_cpus=192, host_npus=16)) == []
    assert cpu(plan_for("v0.23.0")) == []  # CPU count unknown: not checked
    off = plan_for(
        "v0.23.0", host_cpus=64, host_npus=16, additional_config={"enable_cpu_binding": False}
    )
    assert cpu(off) == []


def cli(capsys, *extra: str) -> tuple[int, str]:
    from ascend_deploy.cli import main

    base = ["plan", "--model-dir", DENSE, "--hbm-total-mb", "65536", "--hbm-used-mb", "3412"]
    rc = main([*base, "--npus", "16", "--tp", "4", "--vllm-ascend", "v0.23.0", *extra])
    captured = capsys.readouterr()
    return rc, captured.out + captured.err


def test_cli_additional_config_extra_env_and_host_cpus(capsys):
    rc, out = cli(
        capsys,
        "--additional-config",
        '{"enable_cpu_binding": true}',
        "--extra-env",
        "ASCEND_BUFFER_POOL=4:8",
        "--host-cpus",
        "64",
        "--json",
    )
    assert rc == 0
    plan = json.loads(out)
    assert plan["additional_config"] == {"enable_flashcomm1": True, "enable_cpu_binding": True}
    notes = " ".join(plan["notes"])
    assert "ASCEND_BUFFER_POOL, which vllm-ascend v0.23.0 no longer reads" in notes
    assert "64 CPUs for 16 NPUs give 4" in notes


def test_cli_refuses_additional_config_in_extra_arg(capsys):
    rc, out = cli(capsys, "--extra-arg=--additional-config={}")
    assert rc == 2
    assert "must not carry --additional-config" in out and "--additional-config JSON" in out
