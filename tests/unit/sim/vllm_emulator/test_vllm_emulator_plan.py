"""A serving plan from ``ascend_deploy.planning.plan`` starts on the emulated vLLM with the same
numbers.

The emulator sizes its cache with its own code (``vllm_emulator.memory``); here the plan's
exact argv and environment are run, and the emulator's "GPU KV cache size" must hold the plan's
``kv_capacity_tokens``, exceeding it by no more than the planner's whole-MB rounding.
"""

from __future__ import annotations

import re
import socket

import pytest

from ascend_deploy.planning.plan import make_plan
from ascend_sim.vllm_emulator.sandbox import (
    Emulator,
    emulator_env,
    make_root,
    preset_state,
    write_row,
)


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


@pytest.mark.parametrize(
    ("preset", "row", "tp"),
    [
        ("a2-910b3-8x64g", "v0.23.0", 1),
        ("a2-910b4-8x32g", "v0.11.0", 2),
        # TP 16 over Qwen3-4B's 8 KV heads: vLLM replicates each KV head on 2 ranks; the plan
        # and the emulator both size one head per rank (weights and KV cache).
        ("a3-ascend910-16chip", "v0.23.0", 16),
    ],
)
def test_plan_argv_starts_with_the_planned_kv_capacity(tmp_path, qwen3_4b, preset, row, tp):
    state = preset_state(preset)
    card = state["card"]
    plan = make_plan(
        qwen3_4b,
        hbm_total_mb=card["hbm_total_mb"],
        hbm_used_mb=card["idle_hbm_used_mb"],
        npus=card["count"] * card.get("chips_per_card", 1),  # A3: every die is a device
        vllm_ascend=row,
        tp=tp,
        hardware=preset.split("-", 1)[0],
    )
    assert plan["feasible"], plan["reasons"]
    argv = list(plan["argv"])
    assert argv[:2] == ["vllm", "serve"]
    args = argv[2:]
    args[args.index("--host") + 1] = "127.0.0.1"
    args[args.index("--port") + 1] = "0"
    env = {**plan["env"], "HCCL_IF_BASE_PORT": _free_port()}
    devices = card["count"] * card.get("chips_per_card", 1)
    root = make_root(str(tmp_path / "root"), state=state, devices=devices)
    with Emulator(
        args, emulator_env(root, write_row(str(tmp_path / "row.json"), row), **env)
    ).start() as emu:
        assert emu.ready, emu.output()
        found = re.findall(r"GPU KV cache size: ([\d,]+) tokens", emu.output())
        logged = int(found[-1].replace(",", ""))
        per_block = plan["memory"]["kv_bytes_per_token_per_npu"] * 128
        assert logged >= plan["kv_capacity_tokens"]
        assert (logged - plan["kv_capacity_tokens"]) // 128 * per_block <= 3 * 2**20 + per_block
        assert f"Using max model len {plan['max_model_len']}" in emu.output()


def test_vllm_api_key_from_environment_is_enforced(tmp_path, qwen3_4b):
    import http.client

    plan = make_plan(qwen3_4b, hbm_total_mb=65536, hbm_used_mb=3300, api_key_env=True)
    args = plan["argv"][2:]
    assert "--api-key" not in args
    args[args.index("--host") + 1] = "127.0.0.1"
    args[args.index("--port") + 1] = "0"
    root = make_root(str(tmp_path / "root"))
    env = emulator_env(
        root, write_row(str(tmp_path / "row.json"), "v0.23.0"), VLLM_API_KEY="s3cret"
    )
    with Emulator(args, env).start() as emu:
        assert emu.ready, emu.output()
        assert "s3cret" not in emu.output()
        for key, status in ((None, 401), ("s3cret", 200)):
            conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=30)
            conn.request(
                "GET", "/v1/models", headers={"Authorization": f"Bearer {key}"} if key else {}
            )
            assert conn.getresponse().status == status
            conn.close()
