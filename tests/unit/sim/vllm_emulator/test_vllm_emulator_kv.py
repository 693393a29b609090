"""The emulated vLLM judges the planner with its own code (issue 13 §3).

* KV capacity: the emulator sizes its cache from the config and shard headers in bytes
  (``vllm_emulator.memory``); a planner that drops a term of its memory model plans a context
  the emulated engine refuses at start-up.
* Driver/CANN: the emulated ``torch.npu`` reads the driver's ``version.info`` and the image's
  CANN lists, not the bundle's compatibility table.
* Context limit and the ModelSlim file name: encoded in ``vllm_emulator.model_config``.
"""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from ascend_deploy.model.files import MODELSLIM_DESCRIPTION
from ascend_deploy.model.info import kv_bytes_per_token, read_architecture
from ascend_deploy.planning.compat import driver_supports_cann
from ascend_deploy.planning.memory import DEFAULT_MODEL, MemoryModel
from ascend_deploy.planning.plan import make_plan
from ascend_sim.arch_configs import DEEPSEEK_V3, LLAMA_3_1_8B, QWEN3_30B_A3B, tiny_configs
from ascend_sim.checkpoints import QWEN3_ARCHS, with_yarn, write_checkpoint
from ascend_sim.tokenizer import tokenizer_json
from ascend_sim.vllm_emulator import memory, model_config
from ascend_sim.vllm_emulator.device import cann_runs_on_driver, probe
from ascend_sim.vllm_emulator.sandbox import (
    Emulator,
    emulator_env,
    make_root,
    preset_state,
    write_row,
)

GB32 = 32768
KV_LINE = re.compile(r"GPU KV cache size: ([\d,]+) tokens")


class NoActivation(MemoryModel):
    """A planner that forgot the profiling run's activation peak."""

    def activation_mb(self, model, tp, max_num_seqs=None):
        return 0


@pytest.fixture(scope="module")
def q8b(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("kv") / "Qwen3-8B")
    write_checkpoint(d, arch="qwen3-8b", fp8=False, data="sparse")
    with open(f"{d}/tokenizer.json", "w", encoding="utf-8") as fh:
        json.dump(tokenizer_json(), fh)
    return d


def start_plan(tmp_path, plan: dict, state: dict) -> Emulator:
    args = list(plan["argv"][2:])
    args[args.index("--host") + 1] = "127.0.0.1"
    args[args.index("--port") + 1] = "0"
    root = make_root(str(tmp_path / "root"), state=state)
    env = emulator_env(root, write_row(str(tmp_path / "row.json"), "v0.23.0"), **plan["env"])
    return Emulator(args, env)


def plan_8b(model: str, state: dict, mm: MemoryModel) -> dict:
    """Qwen3-8B on one 32 GB card at utilization 0.65 (v0.23.0: vLLM's profiling model): the
    cache holds less than the model's 40960 tokens, so the plan lowers max_model_len to
    exactly the planner's capacity."""
    card = state["card"]
    plan = make_plan(
        model,
        hbm_total_mb=card["hbm_total_mb"],
        hbm_used_mb=card["idle_hbm_used_mb"],
        gpu_memory_utilization=0.65,
        vllm_ascend="v0.23.0",
        memory_model=mm,
    )
    assert plan["feasible"], plan["reasons"]
    assert plan["max_model_len"] == plan["kv_capacity_tokens"] < 40960
    return plan


def test_the_planners_context_starts_and_fits_what_the_engine_sizes(tmp_path, q8b):
    state = preset_state("a2-910b4-8x32g")
    plan = plan_8b(q8b, state, DEFAULT_MODEL)
    with start_plan(tmp_path, plan, state).start() as emu:
        assert emu.ready, emu.output()
        logged = int(KV_LINE.findall(emu.output())[-1].replace(",", ""))
    # The planner is on the safe side of the engine, by no more than its whole-MB rounding.
    per_block = plan["memory"]["kv_bytes_per_token_per_npu"] * 128
    assert logged >= plan["kv_capacity_tokens"]
    assert (logged - plan["kv_capacity_tokens"]) // 128 * per_block <= 3 * 2**20 + per_block


@pytest.mark.parametrize(
    "mm",
    [dataclasses.replace(DEFAULT_MODEL, driver_reserve_mb=0), NoActivation()],
    ids=["no-driver-reserve", "no-activation"],
)
def test_a_planner_missing_a_term_is_refused_by_the_engine(tmp_path, q8b, mm):
    state = preset_state("a2-910b4-8x32g")
    plan = plan_8b(q8b, state, mm)
    right = plan_8b(q8b, state, DEFAULT_MODEL)
    assert plan["kv_capacity_tokens"] > right["kv_capacity_tokens"]
    with start_plan(tmp_path, plan, state).start() as emu:
        assert not emu.ready
        out = emu.output()
    length = plan["max_model_len"]
    assert f"To serve at least one request with the models's max seq len ({length})" in out
    estimate = int(re.findall(r"the estimated maximum model length is (\d+)", out)[-1])
    assert estimate < length


@pytest.mark.parametrize(
    ("config", "tp", "per_token"),
    [
        (DEEPSEEK_V3, 16, 61 * 576 * 2),  # MLA: the same on every rank
        (QWEN3_30B_A3B, 2, 48 * 2 * 2 * 128 * 2),
        (QWEN3_30B_A3B, 8, 48 * 2 * 1 * 128 * 2),  # 4 KV heads: one (replicated) per rank
        (LLAMA_3_1_8B, 1, 32 * 2 * 8 * 128 * 2),
        (QWEN3_ARCHS["qwen3-4b"], 1, 147_456),
    ],
)
def test_engine_and_planner_agree_on_the_cache_per_token(config, tp, per_token):
    assert memory.cache_bytes_per_token(config, tp) == per_token
    arch = {**read_architecture(config), "kv_dtype_bytes": 2}
    assert DEFAULT_MODEL.kv_bytes_per_token_per_npu(arch, tp) == per_token
    if tp == 1:
        assert kv_bytes_per_token(arch) == per_token


@pytest.mark.parametrize(
    "config",
    [
        QWEN3_ARCHS["qwen3-8b"],
        with_yarn("qwen3-8b"),
        DEEPSEEK_V3,
        LLAMA_3_1_8B,
        *tiny_configs().values(),
        {**QWEN3_ARCHS["qwen3-4b"], "rope_parameters": {"rope_type": "linear", "factor": 2.0}},
    ],
)
def test_engine_context_limit_matches_the_planners(config):
    assert (
        model_config.derived_max_model_len(config)
        == read_architecture(config)["max_model_len_limit"]
    )


def test_engine_takes_the_smallest_length_key_like_vllm():
    cfg = {**QWEN3_ARCHS["qwen3-4b"], "seq_length": 8192}
    assert model_config.derived_max_model_len(cfg) == 8192


def test_modelslim_file_name_is_the_engines_own():
    assert model_config.MODELSLIM_FILE == "quant_model_description.json" == MODELSLIM_DESCRIPTION


def _env(tmp_path, monkeypatch, versions: dict) -> object:
    state = preset_state("a2-910b3-8x64g")
    state["versions"].update(versions)
    monkeypatch.setenv("ASCEND_SIM_ROOT", make_root(str(tmp_path / "root"), state=state))
    return probe()


def test_compat_follows_the_version_files_not_the_bundles_table(tmp_path, monkeypatch):
    # The bundle's table publishes HDK 26.1.0 for CANN 9.1.0 ...
    assert driver_supports_cann("26.1.0", "9.1.0") is True
    env = _env(tmp_path / "a", monkeypatch, {})
    assert env.driver_inner == "V100R001C31SPC001B101"
    assert cann_runs_on_driver(env, "9.1.0") is True
    # ... but a driver whose version.info names neither train does not run it.
    env = _env(
        tmp_path / "b",
        monkeypatch,
        {
            "driver_inner": "V100R001C21SPC001B101",
            "driver_compatible": "[V100R001C19],[V100R001C21]",
        },
    )
    assert cann_runs_on_driver(env, "9.1.0") is False


def test_a_matrix_row_the_version_files_refuse_fails_pitfall_1(tmp_path):
    """A wrong matrix row (v0.23.0's CANN 9.1.0 for driver 24.1.rc3) starts the image on a
    host whose driver the CANN does not name: torch_npu's set_device fails (pitfall 1)."""
    tiny = str(tmp_path / "tiny")
    write_checkpoint(tiny, arch="qwen3-0.6b", fp8=False, data="sparse", layers=1)
    with open(f"{tiny}/tokenizer.json", "w", encoding="utf-8") as fh:
        json.dump(tokenizer_json(), fh)
    root = make_root(str(tmp_path / "root"), state=preset_state("a2-old-driver"))
    env = emulator_env(root, write_row(str(tmp_path / "row.json"), "v0.23.0"))
    with Emulator([tiny, "--host", "127.0.0.1", "--port", "0"], env).start() as emu:
        assert not emu.ready
        out = emu.output()
    assert "NPU function error: at_npu::native::AclSetCompileopt" in out
