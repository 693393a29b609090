"""The npu-smi emulator: real layouts byte for byte, parseable output, live processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import DATA, SAMPLES

from ascend_deploy.host.npu_smi import parse
from ascend_sim import npu_smi_emulator as emu
from ascend_sim.state import chips, load_preset, load_state, preset_names

STATES = DATA / "npu_smi" / "states"


def body(sample_name: str) -> str:
    """A sample without its '# source:' line."""
    return (SAMPLES / f"{sample_name}.txt").read_text().split("\n", 1)[1]


def emulate(name: str, args: list[str]) -> str:
    return emu.run(args, load_state(str(STATES / f"{name}.json")))


@pytest.fixture(autouse=True)
def empty_registry(tmp_path, monkeypatch):
    monkeypatch.setenv("ASCEND_SIM_PROCS", str(tmp_path / "procs"))


# --------------------------------------------------------------------------- byte for byte

COMPLETE = [
    "npu-smi-info_310P3_no_processes_3",
    "npu-smi-info_310P_1",
    "npu-smi-info_A3_26.0.rc1_wide_trimmed_2",
]
# Captures cut short by their authors: the emulator's output starts with them exactly.
PARTIAL = [
    "npu-smi-info_910B4_32GB_24.1.1_partial_7",
    "npu-smi-info_910B4-1_25.2.0_partial_8",
    "npu-smi-info_910B2C_trimmed_25.5.2_3",
    "npu-smi-info_910B4_anon_busid_10",
    "npu-smi-info_310P3_duo_25.2.0_partial_4",
]


@pytest.mark.parametrize("name", COMPLETE)
def test_info_equals_complete_sample(name):
    assert emulate(name, ["info"]) == body(name)


@pytest.mark.parametrize("name", PARTIAL)
def test_info_starts_with_partial_sample(name):
    out, ref = emulate(name, ["info"]), body(name)
    assert out.startswith(ref)
    assert len(out) > len(ref)  # the rest of the table (process table) follows


def test_a3_excerpt_without_top_border():
    name = "npu-smi-info_A3_25.2.1_partial_4"
    out = emulate(name, ["info"])
    assert out.split("\n", 1)[1].startswith(body(name))


def test_map_910b4_equals_sample_after_tab_expansion():
    # The blog copy shows npu-smi's leading TAB as 8 spaces, trailing pads kept.
    out = emulate("npu-smi-info-m_910B4_7", ["info", "-m"])
    assert out.startswith("\tNPU ID ")
    assert out.expandtabs(8) == body("npu-smi-info-m_910B4_7")


def test_map_gpustack_docstring_copy():
    # gpustack's docstring copy lost the leading TAB and trailing pads.
    out = emulate("npu-smi-info-m_910B_4", ["info", "-m"])
    lines = [line.lstrip("\t").rstrip() for line in out.split("\n")]
    assert "\n".join(lines) == body("npu-smi-info-m_910B_4")


def test_list_equals_sample_after_tab_expansion():
    out = emulate("npu-smi-info-l_910B_2", ["info", "-l"])
    assert out.expandtabs(8) == body("npu-smi-info-l_910B_2")


def test_board_card_starts_with_trimmed_sample():
    out = emulate("npu-smi-info-t-board_910B2C_card_4", ["info", "-t", "board", "-i", "0"])
    assert out.expandtabs(8).startswith(body("npu-smi-info-t-board_910B2C_card_4"))
    assert out.endswith("\tChip Count                     : 1\n")


def test_board_chip_equals_docstring_sample():
    out = emulate("npu-smi-info-t-board_910B_1", ["info", "-t", "board", "-i", "0", "-c", "0"])
    lines = [line.lstrip("\t") for line in out.split("\n")]
    assert "\n".join(lines) == body("npu-smi-info-t-board_910B_1")


def test_usages_equals_docstring_sample():
    out = emulate("npu-smi-info-t-usages_910B_1", ["info", "-t", "usages", "-i", "0"])
    lines = [line.lstrip("\t") for line in out.split("\n")]
    assert "\n".join(lines) == body("npu-smi-info-t-usages_910B_1")


def test_version():
    state = load_preset("a2-old-driver")
    assert emu.run(["-v"], state) == "npu-smi version: 24.1.rc3\n"


# --------------------------------------------------------------------------- parseable


COMMANDS = [["info"], ["info", "-m"], ["info", "-l"]]


@pytest.mark.parametrize("preset", preset_names())
def test_every_preset_output_parses_to_its_state(preset):
    state = load_preset(preset)
    expected = chips(state)
    info = parse(emu.run(["info"], state), kind="info")
    # the DDR layout (310P) prints each chip's logic id in its Device column
    ddr = state["card"]["memory_kind"] == "ddr"
    want = [{**c, "logic_id": c["logic_id"] if ddr else None} for c in expected]
    for got, exp in zip(info["chips"], want, strict=True):
        assert got == {
            **exp,
            "temp_c": float(exp["temp_c"]),
            "aicore_pct": float(exp["aicore_pct"]),
        }
    assert info["version"] == state["versions"]["driver"]
    rows = parse(emu.run(["info", "-m"], state), kind="map")["rows"]
    assert [(r["npu"], r["chip"], r["logic_id"]) for r in rows if r["chip_name"] != "Mcu"] == [
        (c["npu"], c["chip"], c["logic_id"]) for c in expected
    ]
    records = parse(emu.run(["info", "-l"], state), kind="kv")["records"]
    assert records[0] == {"Total Count": str(state["card"]["count"])}
    first = state["card"]["npu_ids"][0]
    for args in (["board", "-i", str(first)], ["board", "-i", str(first), "-c", "0"],
                 ["usages", "-i", str(first)]):  # fmt: skip
        recs = parse(emu.run(["info", "-t", *args], state), kind="kv")["records"]
        assert recs[0]["NPU ID"] == str(first)
    health = parse(emu.run(["info", "-t", "health", "-i", str(first)], state))["records"]
    assert health[0]["Health Status"] == expected[0]["health"]


def test_alarm_preset_shows_alarm_on_npu_3_only():
    state = load_preset("a2-card3-alarm")
    info = parse(emu.run(["info"], state))
    assert [c["health"] for c in info["chips"]] == ["OK"] * 3 + ["Alarm"] + ["OK"] * 4
    health = parse(emu.run(["info", "-t", "health", "-i", "3"], state))["records"]
    assert health == [{"Health Status": "Alarm", "Error Code": "NA", "Error Information": "NA"}]


def test_910b4_preset_hbm_and_usages_style():
    state = load_preset("a2-910b4-8x32g")
    info = parse(emu.run(["info"], state))
    assert {(c["name"], c["hbm_total_mb"]) for c in info["chips"]} == {("910B4", 32768)}
    usages = parse(emu.run(["info", "-t", "usages", "-i", "2"], state))["records"][0]
    assert usages["HBM Capacity(MB)"] == "32768"
    assert usages["HBM Usage Rate(%)"] == str(round(100 * 3200 / 32768))
    assert "NPU Utilization(%)" in usages  # 25.x+ keys
    old = parse(emu.run(["info", "-t", "usages", "-i", "0"], load_preset("a2-old-driver")))
    assert "Aivector Usage Rate(%)" not in old["records"][0]


def test_a3_preset_has_16_chips_with_phy_ids():
    state = load_preset("a3-ascend910-16chip")
    info = parse(emu.run(["info"], state))
    assert [(c["npu"], c["chip"], c["phy_id"]) for c in info["chips"]][-2:] == [
        (7, 0, 14),
        (7, 1, 15),
    ]
    assert info["chips"][-1]["bus_id"] == "0000:83:00.0"  # as in vllm-ascend issue #12980
    assert [c["power_w"] is None for c in info["chips"][:2]] == [False, True]


def test_unknown_npu_and_command():
    state = load_preset("a2-910b3-8x64g")
    with pytest.raises(emu._Usage, match="NPU ID 9 does not exist"):
        emu.run(["info", "-t", "board", "-i", "9"], state)
    with pytest.raises(emu._Usage, match="-t topo is not simulated"):
        emu.run(["info", "-t", "topo", "-i", "0"], state)


# --------------------------------------------------------------------------- as a program


def npu_smi(state_file: Path, *args: str, procs: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ASCEND_SIM_STATE": str(state_file), "ASCEND_SIM_PROCS": str(procs)}
    return subprocess.run(
        [sys.executable, "-m", "ascend_sim.npu_smi_emulator", *args],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_driver_not_loaded_fault(tmp_path):
    state = load_preset("a2-910b3-8x64g")
    state["faults"]["driver_not_loaded"] = True
    path = tmp_path / "state.json"
    path.write_text(json.dumps(state))
    done = npu_smi(path, "info", procs=tmp_path / "procs")
    assert done.returncode != 0
    assert done.stdout == "dcmi module initialize failed. ret is -8005\n"


def test_bad_state_file_is_one_line_exit_2(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("{not json")
    done = npu_smi(path, "info", procs=tmp_path / "procs")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"{path}: state file is not valid JSON" in done.stderr


def test_live_process_table(tmp_path):
    procs = tmp_path / "procs"
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps(load_preset("a2-910b3-8x64g")))
    idle = parse(npu_smi(state_file, "info", procs=procs).stdout)
    assert idle["processes"] == [] and idle["chips"][1]["hbm_used_mb"] == 3300

    ready = tmp_path / "ready"
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time, pathlib\n"
         "from ascend_sim.npu_registry import register\n"
         f"register({str(procs)!r}, 1, 0, 'python', 52000)\n"
         f"pathlib.Path({str(ready)!r}).touch()\n"
         "time.sleep(120)\n"],
    )  # fmt: skip
    try:
        for _ in range(200):
            if ready.exists():
                break
            time.sleep(0.05)
        assert ready.exists(), "the child did not register"
        busy = parse(npu_smi(state_file, "info", procs=procs).stdout)
        assert busy["processes"] == [
            {"npu": 1, "chip": 0, "pid": child.pid, "name": "python", "memory_mb": 52000}
        ]
        assert busy["chips"][1]["hbm_used_mb"] == 3300 + 52000
        assert busy["chips"][0]["hbm_used_mb"] == 3300
        usages = parse(npu_smi(state_file, "info", "-t", "usages", "-i", "1", procs=procs).stdout)
        assert usages["records"][0]["HBM Usage Rate(%)"] == str(round(100 * 55300 / 65536))
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    freed = parse(npu_smi(state_file, "info", procs=procs).stdout)
    assert freed["processes"] == [] and freed["chips"][1]["hbm_used_mb"] == 3300
    assert list(procs.iterdir()) == []  # the stale entry was removed
