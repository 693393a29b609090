"""The engine image's ``vllm``: emulated Ascend start-up, then exec of the real vLLM server.

The launcher runs as a real child process against an emulator sandbox root (devices, driver
mounts, host state) and a real tiny checkpoint. The exec target is a stand-in module named
``vllm.entrypoints.openai.api_server`` that records what it was started with, so these tests
see exactly the argv and environment the real engine would get.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from ascend_deploy.planning.plan import make_plan
from ascend_sim.vllm_emulator import messages as M
from ascend_sim.vllm_emulator.device import REGISTRY_REL
from ascend_sim.vllm_emulator.sandbox import (
    emulator_env,
    make_root,
    write_row,
)
from ascend_sim.vllm_engine.launch import (
    ENGINE_MODULE,
    TranslationError,
    omp_threads_bind,
    translate,
)

STAND_IN = """
import json, os, sys
with open(os.environ["ENGINE_RECORD"], "w") as fh:
    json.dump({"argv": sys.argv[1:], "env": dict(os.environ), "pid": os.getpid()}, fh)
"""


@pytest.fixture
def engine_env(tmp_path):
    """Sandbox root + row + the stand-in engine module first on PYTHONPATH."""
    fake = tmp_path / "fake"
    mod = fake / "vllm" / "entrypoints" / "openai"
    mod.mkdir(parents=True)
    for d in (fake / "vllm", fake / "vllm" / "entrypoints", mod):
        (d / "__init__.py").write_text("")
    (mod / "api_server.py").write_text(textwrap.dedent(STAND_IN))

    def make(devices: int | None = None, **extra: str) -> dict:
        root = make_root(str(tmp_path / "root"), devices=devices)
        env = emulator_env(root, write_row(str(tmp_path / "row.json"), "v0.23.0"), **extra)
        env["PYTHONPATH"] = f"{fake}{os.pathsep}{env['PYTHONPATH']}"
        env["ENGINE_RECORD"] = str(tmp_path / "record.json")
        return env

    return make


def launch(argv: list[str], env: dict) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ascend_sim.vllm_engine", *argv]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def planned(model: str, **kw) -> dict:
    return make_plan(model, hbm_total_mb=65536, npus=1, vllm_ascend="v0.23.0", **kw)


def test_translate_changes_only_the_model_position_and_the_cpu_kv_size(tiny_random_model):
    plan = planned(tiny_random_model, max_num_seqs=8, enforce_eager=True, served_model_name="m")
    serve = plan["argv"][2:]  # without "vllm serve"
    argv, env = translate(serve, plan["env"])
    assert argv == ["--model", serve[0], *serve[1:]]
    assert env == {**plan["env"], "VLLM_CPU_KVCACHE_SPACE": "1", "TORCH_COMPILE_DISABLE": "1"}


def test_translate_hides_the_emulated_npu_packages_from_the_engine():
    env = translate(["/m"], {"PYTHONPATH": "/opt/ascend-sim/site:/opt/ascend-sim/src"})[1]
    assert env["PYTHONPATH"] == "/opt/ascend-sim/src"


def test_translate_keeps_an_operator_kv_size_and_takes_the_override():
    assert translate(["/m"], {"VLLM_CPU_KVCACHE_SPACE": "3"})[1]["VLLM_CPU_KVCACHE_SPACE"] == "3"
    env = translate(["/m"], {"ASCEND_SIM_ENGINE_KVCACHE_GIB": "2"})[1]
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"


@pytest.mark.parametrize(
    "argv",
    [["/m", "--quantization", "ascend"], ["/m", "-q", "ascend"], ["/m", "--quantization=ascend"]],
)
def test_translate_refuses_modelslim(argv):
    with pytest.raises(TranslationError, match="--quantization ascend"):
        translate(argv, {})


def test_planned_launch_reaches_the_engine_unchanged(engine_env, tiny_random_model, tmp_path):
    plan = planned(tiny_random_model, max_num_seqs=8)
    env = {**engine_env(), **plan["env"]}
    res = launch(plan["argv"][1:], env)
    assert res.returncode == 0, res.stderr
    assert "emulated Ascend start-up passed (vllm-ascend 0.23.0, CANN 9.1.0" in res.stdout
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["argv"] == translate(plan["argv"][2:], {})[0]
    for key, value in plan["env"].items():
        assert record["env"][key] == value
    assert record["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert f"exec {sys.executable} -m {ENGINE_MODULE} --model {tiny_random_model}" in res.stdout
    # exec kept the PID: the NPU memory the replica holds is registered under the engine's PID.
    registry = os.path.join(env["ASCEND_SIM_ROOT"], REGISTRY_REL)
    with open(os.path.join(registry, os.listdir(registry)[0]), encoding="utf-8") as fh:
        entry = json.load(fh)
    assert entry["ns_pid"] == record["pid"] and entry["npu"] == 0 and entry["memory_mb"] > 1000


def test_ascend_failure_stops_before_the_engine(engine_env, tiny_random_model, tmp_path):
    res = launch(["serve", tiny_random_model, "--port", "0"], engine_env(devices=0))
    assert res.returncode == 1
    assert res.stderr.strip() == M.FAILED_INFER_DEVICE
    assert not (tmp_path / "record.json").exists()


def test_tp_not_dividing_heads_is_the_emulators_refusal(engine_env, tiny_random_model, tmp_path):
    res = launch(
        ["serve", tiny_random_model, "--port", "0", "--tensor-parallel-size", "3"], engine_env()
    )
    assert res.returncode == 1
    assert res.stderr.strip() == M.HEADS_NOT_DIVISIBLE.format(heads=4, tp=3)
    assert not (tmp_path / "record.json").exists()


def test_unknown_flag_and_modelslim_are_usage_errors(engine_env, tiny_random_model):
    res = launch(["serve", tiny_random_model, "--max-model-lenght", "8"], engine_env())
    assert res.returncode == 2 and "unrecognized arguments: --max-model-lenght" in res.stderr
    res = launch(["serve", tiny_random_model, "--quantization", "ascend"], engine_env())
    assert res.returncode == 2 and "needs vllm-ascend's NPU kernels" in res.stderr


def test_omp_threads_bind_gives_each_rank_its_own_cpus():
    assert omp_threads_bind(2, [1, 0]) == "0|1"
    assert omp_threads_bind(2, [0, 1, 2, 3, 4]) == "0,1|2,3"
    assert omp_threads_bind(1, [3, 5]) == "3,5"
    assert omp_threads_bind(4, [0, 1]) is None  # vLLM's own NUMA message then stands


def test_translate_binds_one_cpu_group_per_rank_only_at_tp_above_1():
    # vLLM's CPU backend otherwise wants one NUMA node per rank ("Not enough allowed NUMA
    # nodes to bind threads of 2 local CPUWorkers"); tests/integration/test_vllm_cpu_reference
    # serves TP 2 with this environment.
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        assert "VLLM_CPU_OMP_THREADS_BIND" not in translate(["/m", "-tp", "2"], {})[1]
        return
    env = translate(["/m", "--tensor-parallel-size", "2"], {})[1]
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == omp_threads_bind(2)
    assert "VLLM_CPU_OMP_THREADS_BIND" not in translate(["/m", "-tp", "1"], {})[1]
    assert "VLLM_CPU_OMP_THREADS_BIND" not in translate(["/m"], {})[1]
    kept = translate(["/m", "--tensor-parallel-size=2"], {"VLLM_CPU_OMP_THREADS_BIND": "0-1|2-3"})
    assert kept[1]["VLLM_CPU_OMP_THREADS_BIND"] == "0-1|2-3"
