"""Simulated host state files and presets."""

from __future__ import annotations

import json

import pytest

from ascend_deploy.errors import InputError
from ascend_sim.state import chips, device_count, load_preset, load_state, normalise, preset_names

REQUIRED = {
    "a2-910b3-8x64g",
    "a2-910b4-8x32g",
    "a2-old-driver",
    "a2-card3-alarm",
    "a2-graph-broken",
}


def test_required_presets_exist_and_load():
    assert set(preset_names()) >= REQUIRED
    for name in preset_names():
        state = load_preset(name)
        assert state["preset"] == name
        assert state["description"]


def test_healthy_910b3_preset():
    state = load_preset("a2-910b3-8x64g")
    card = state["card"]
    assert (card["model"], card["hardware"], card["count"], card["hbm_total_mb"]) == (
        "910B3", "a2", 8, 65536)  # fmt: skip
    assert 3000 <= card["idle_hbm_used_mb"] <= 3500  # ~3.3 GB idle on real 910B
    assert all(c["health"] == "OK" for c in chips(state))
    assert device_count(state) == 8
    assert state["faults"] == {"graph_capture_broken": False, "driver_not_loaded": False}


def test_910b4_32g_preset():
    state = load_preset("a2-910b4-8x32g")
    assert {c["hbm_total_mb"] for c in chips(state)} == {32768}
    assert {c["name"] for c in chips(state)} == {"910B4"}


def test_fault_presets():
    assert load_preset("a2-card3-alarm")["health"] == {"3": "Alarm"}
    assert [c["health"] for c in chips(load_preset("a2-card3-alarm"))][3] == "Alarm"
    assert load_preset("a2-graph-broken")["faults"]["graph_capture_broken"] is True
    old = load_preset("a2-old-driver")["versions"]
    assert old["driver"] == "24.1.rc3" and old["cann_layout"] == "toolkit"
    assert load_preset("a2-910b3-8x64g")["versions"]["cann_layout"] == "cann"


def test_defaults_from_model():
    state = normalise({"card": {"model": "310P3", "count": 2}})
    assert state["card"]["hardware"] == "310p" and state["card"]["memory_kind"] == "ddr"
    assert [c["power_w"] for c in chips(state)] == [None, None]  # NA on 310P
    a3 = normalise({"card": {"model": "Ascend910", "count": 2}})
    assert device_count(a3) == 4
    assert [(c["npu"], c["chip"], c["phy_id"], c["logic_id"]) for c in chips(a3)] == [
        (0, 0, 0, 0), (0, 1, 1, 1), (1, 0, 2, 2), (1, 1, 3, 3)]  # fmt: skip
    assert normalise({"versions": {"npu_smi": "24.1.1"}})["npu_smi_style"] == "24.1"
    assert normalise({"versions": {"npu_smi": "25.2.0"}})["npu_smi_style"] == "25.x"
    assert normalise({"versions": {"npu_smi": "26.1.0"}})["npu_smi_style"] == "26.x"
    assert normalise({"versions": {"cann": "8.3.RC2"}})["versions"]["cann_layout"] == "toolkit"
    assert normalise({"versions": {"cann": "8.5.1"}})["versions"]["cann_layout"] == "cann"


def test_default_bus_ids_follow_real_hosts():
    a2 = [c["bus_id"] for c in chips(normalise({}))]
    assert a2[:4] == ["0000:C1:00.0", "0000:C2:00.0", "0000:81:00.0", "0000:82:00.0"]


def test_holders_add_memory():
    class Holder:
        npu, chip, memory_mb = 2, 0, 1000

    got = chips(normalise({}), [Holder(), Holder()])
    assert got[2]["hbm_used_mb"] == 3300 + 2000 and got[1]["hbm_used_mb"] == 3300


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "state file is empty"),
        (b"{", "not valid JSON"),
        (b"\x00\xff\xfe", "not UTF-8"),
        (b"[]", "the state must be dict"),
        (b'{"card": {"count": "eight"}}', "card.count must be int"),
        (b'{"card": {"count": 0}}', "card.count must be positive"),
        (b'{"card": {"hardware": "gpu"}}', "card.hardware must be one of"),
        (b'{"health": {"3": "Broken"}}', "health['3'] must be one of"),
        (b'{"chips": [{"npu": 0, "power_w": "hot"}]}', "chips[0].power_w must be"),
        (b'{"card": {"count": 2, "npu_ids": [0]}}', "card.npu_ids must list 2"),
        (b'{"npu_smi_style": "27"}', "npu_smi_style must be one of"),
    ],
)
def test_bad_state_files(tmp_path, content, message):
    path = tmp_path / "state.json"
    path.write_bytes(content)
    with pytest.raises(InputError) as exc:
        load_state(str(path))
    assert str(exc.value).startswith(f"{path}: ") and message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_missing_state_and_unknown_preset(tmp_path, monkeypatch):
    monkeypatch.setenv("ASCEND_SIM_STATE", str(tmp_path / "none.json"))
    with pytest.raises(InputError, match=r"none\.json: state file not found"):
        load_state()
    with pytest.raises(InputError, match=r"unknown preset 'nope'; known: .*a2-910b3-8x64g"):
        load_preset("nope")


def test_state_round_trips_through_json(tmp_path):
    state = load_preset("a2-card3-alarm")
    path = tmp_path / "s.json"
    path.write_text(json.dumps(state))
    assert load_state(str(path)) == state
