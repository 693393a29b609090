"""A graph-capture OOM at high utilization (issue 23 item 4): from v0.15.0rc1 capture allocates
from the HBM left after total x util, so the planner warns and the emulator fails the start
with torch_npu's out-of-memory text; eager serving, or the pre-v0.15 release, does not capture
in that headroom."""

from __future__ import annotations

import pytest

from ascend_deploy.planning.plan import make_plan
from ascend_sim.vllm_emulator.sandbox import (
    Emulator,
    emulator_env,
    make_root,
    preset_state,
    write_row,
    write_tiny_random_model,
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_random_model(str(tmp_path_factory.mktemp("capture") / "tiny"))


def plan_at(model: str, state: dict, util: float, eager: bool, release: str) -> dict:
    card = state["card"]
    return make_plan(
        model,
        hbm_total_mb=card["hbm_total_mb"],
        hbm_used_mb=card["idle_hbm_used_mb"],
        gpu_memory_utilization=util,
        enforce_eager=eager,
        vllm_ascend=release,
    )


def start(tmp_path, plan: dict, state: dict, release: str) -> Emulator:
    args = list(plan["argv"][2:])
    args[args.index("--host") + 1] = "127.0.0.1"
    args[args.index("--port") + 1] = "0"
    root = make_root(str(tmp_path / "root"), state=state)
    env = emulator_env(root, write_row(str(tmp_path / "row.json"), release), **plan["env"])
    return Emulator(args, env)


def capture_notes(plan: dict) -> list[str]:
    return [n for n in plan["notes"] if "graph capture may run out of HBM" in n]


def test_capture_in_too_little_headroom_fails_as_the_planner_predicts(tmp_path, tiny):
    state = preset_state("a2-910b4-8x32g")
    plan = plan_at(tiny, state, 0.97, False, "v0.23.0")
    assert capture_notes(plan), plan["notes"]
    emu = start(tmp_path, plan, state, "v0.23.0").start()
    try:
        rc = emu.wait(60)
    finally:
        emu.stop()
    out = emu.output()
    assert rc != 0 and not emu.ready, out[-3000:]
    assert "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB" in out, out[-3000:]
    assert "Graph capturing finished" not in out


@pytest.mark.parametrize(
    ("util", "eager", "release"),
    [(0.97, True, "v0.23.0"), (0.9, False, "v0.23.0"), (0.97, False, "v0.11.0")],
    ids=["eager", "default-util", "pre-v0.15"],
)
def test_no_capture_oom_without_the_shortfall(tmp_path, tiny, util, eager, release):
    state = preset_state("a2-910b4-8x32g")
    plan = plan_at(tiny, state, util, eager, release)
    assert not capture_notes(plan), plan["notes"]
    with start(tmp_path, plan, state, release).start() as emu:
        assert emu.ready, emu.output()[-3000:]
        assert "NPU out of memory" not in emu.output()
