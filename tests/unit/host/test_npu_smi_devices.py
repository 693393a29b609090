"""The device id of every chip (issue 21 §1): the N of /dev/davinciN that replicas are placed on.

Real samples for the layouts whose tables carry a per-chip id (A2 with ``info -m``, A3 dies by
Phy-ID, 300I Duo chips by their Device column) and the emulator's own ``info`` / ``info -m`` for
every preset: every chip gets one id, no id twice, and on the simulated hosts the id is the
chip's logic id, the /dev/davinciN the host exposes for it.
"""

from __future__ import annotations

import pytest
from conftest import SAMPLES

from ascend_deploy.errors import InputError
from ascend_deploy.host.npu_smi import assign_devices, parse
from ascend_sim import npu_smi_emulator, state


def sample(name: str, kind: str) -> dict:
    return parse((SAMPLES / name).read_text(encoding="utf-8"), kind=kind, source=name)


def ids(chips: list[dict]) -> list[tuple[int, int, int]]:
    return [(c["npu"], c["chip"], c["device"]) for c in chips]


def test_a2_devices_are_the_logic_ids_of_info_m():
    info = sample("npu-smi-info_910B4_32GB_24.1.1_partial_7.txt", "info")
    found = ids(assign_devices(info, sample("npu-smi-info-m_910B4_7.txt", "map")))
    assert found == [(n, 0, n) for n in range(len(found))] and found


def test_a2_without_info_m_uses_the_npu_id_one_chip_per_card():
    info = sample("npu-smi-info_910B4_32GB_24.1.1_partial_7.txt", "info")
    assert all(npu == device for npu, _chip, device in ids(assign_devices(info)))


def test_a3_dies_are_devices_by_phy_id():
    info = sample("npu-smi-info_A3_26.0.rc1_wide_trimmed_2.txt", "info")
    # NPU 0 and NPU 5 of a 16-die host: dies 0, 1 and 10, 11 (not NPU ids 0 and 5)
    assert ids(assign_devices(info)) == [(0, 0, 0), (0, 1, 1), (5, 0, 10), (5, 1, 11)]


def test_300i_duo_chips_are_devices_by_their_device_column():
    info = sample("npu-smi-info_310P3_duo_25.2.0_partial_4.txt", "info")
    found = ids(assign_devices(info))
    assert len({d for _n, _c, d in found}) == len(found)
    # two chips per card, each its own device; the NPU id alone would mount one of them twice
    assert len({n for n, _c, _d in found}) < len(found)
    assert [d for _n, _c, d in found] == [c["logic_id"] for c in info["chips"]]


@pytest.mark.parametrize("preset", state.preset_names())
def test_every_simulated_chip_gets_its_logic_id(preset):
    st = state.load_preset(preset)
    info = parse(npu_smi_emulator.render_info(st), kind="info", source=preset)
    mapped = parse(npu_smi_emulator.render_map(st), kind="map", source=preset)
    chips = assign_devices(info, mapped)
    expected = [(c["npu"], c["chip"], c["logic_id"]) for c in state.chips(st)]
    assert ids(chips) == expected
    assert sorted(d for _n, _c, d in expected) == list(range(state.device_count(st)))


def test_a_chip_without_any_id_is_refused_not_placed_by_position():
    info = {"chips": [{"npu": 3, "chip": 0}, {"npu": 3, "chip": 1}]}
    with pytest.raises(InputError, match="NPU 3 chip 0 has no device id"):
        assign_devices(info)


def test_an_id_printed_twice_is_damaged_output():
    info = {"chips": [{"npu": 0, "chip": 0, "phy_id": 4}, {"npu": 1, "chip": 0, "phy_id": 4}]}
    with pytest.raises(
        InputError, match="device id 4 is given to NPU 0 chip 0 and to NPU 1 chip 0"
    ):
        assign_devices(info)
