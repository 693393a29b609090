"""The emulator's test-only switches (src/ascend_sim/vllm_emulator/test_switches.py)."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

from ascend_sim.vllm_emulator.sandbox import (
    Emulator,
    emulator_env,
    make_root,
    write_row,
    write_tiny_random_model,
)


def test_hang_at_load_keeps_running_and_never_answers_health(tmp_path):
    model = write_tiny_random_model(str(tmp_path / "rand"))
    root = make_root(str(tmp_path / "root"))
    env = emulator_env(
        root, write_row(str(tmp_path / "row.json"), "v0.23.0"), ASCEND_SIM_TEST_HANG_AT_LOAD="1"
    )
    args = [model, "--host", "127.0.0.1", "--port", "0", "--enforce-eager"]
    emu = Emulator(args, env).start(timeout=6)
    try:
        deadline = time.monotonic() + 20
        while "hangs before loading weights" not in emu.output():
            assert time.monotonic() < deadline, emu.output()
            time.sleep(0.2)
        time.sleep(2)
        assert emu.proc is not None and emu.proc.poll() is None, emu.output()
        assert not emu.ready
        assert "Loading weights took" not in emu.output()
    finally:
        emu.stop()
    # without the switch the same sandbox starts and answers /health
    del env["ASCEND_SIM_TEST_HANG_AT_LOAD"]
    emu = Emulator(args, env).start(timeout=60)
    try:
        assert emu.ready, emu.output()
        with urllib.request.urlopen(f"{emu.url}/health", timeout=10) as reply:
            assert reply.status == 200
    except urllib.error.URLError as exc:
        raise AssertionError(f"{exc}\n{emu.output()}") from exc
    finally:
        emu.stop()
