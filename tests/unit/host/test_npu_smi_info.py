"""`npu-smi info` tables: one test per sample, values read by a person from the sample."""

from __future__ import annotations

import pytest
from conftest import DATA, SAMPLES, sample

from ascend_deploy.errors import InputError
from ascend_deploy.host.npu_smi import detect_kind, parse

CHIP_KEYS = [
    "npu", "chip", "phy_id", "logic_id", "name", "health", "power_w", "temp_c", "aicore_pct",
    "bus_id",
    "hbm_used_mb", "hbm_total_mb", "memory_used_mb", "memory_total_mb", "hugepages_used",
    "hugepages_total",
]  # fmt: skip


def info(name: str) -> dict:
    result = parse(sample(name), source=name)
    assert result["kind"] == "info"
    assert list(result) == ["kind", "version", "chips", "processes"]
    for chip in result["chips"]:
        assert list(chip) == CHIP_KEYS
    for proc in result["processes"]:
        assert list(proc) == ["npu", "chip", "pid", "name", "memory_mb"]
    return result


def test_every_info_sample_is_detected_as_info():
    names = sorted(p.name for p in SAMPLES.glob("npu-smi-info_*.txt"))
    assert len(names) == 23
    for name in names:
        assert detect_kind(sample(name)) == "info", name


def test_910b4_32gb_24_1_1_partial():
    r = info("npu-smi-info_910B4_32GB_24.1.1_partial_7.txt")
    assert r["version"] == "24.1.1"
    assert r["processes"] == []
    assert r["chips"] == [
        {"npu": 0, "chip": 0, "phy_id": None, "logic_id": None, "name": "910B4", "health": "OK",
         "power_w": 88.2,
         "temp_c": 30.0, "aicore_pct": 0.0, "bus_id": "0000:C1:00.0", "hbm_used_mb": 26838,
         "hbm_total_mb": 32768, "memory_used_mb": 0, "memory_total_mb": 0,
         "hugepages_used": 0, "hugepages_total": 0},
        {"npu": 1, "chip": 0, "phy_id": None, "logic_id": None, "name": "910B4", "health": "OK",
         "power_w": 87.0,
         "temp_c": 30.0, "aicore_pct": 0.0, "bus_id": "0000:C2:00.0", "hbm_used_mb": 29356,
         "hbm_total_mb": 32768, "memory_used_mb": 0, "memory_total_mb": 0,
         "hugepages_used": 0, "hugepages_total": 0},
    ]  # fmt: skip


def test_910b4_1_25_2_0_partial_anonymised_bus():
    r = info("npu-smi-info_910B4-1_25.2.0_partial_8.txt")
    assert r["version"] == "25.2.0"
    assert [(c["npu"], c["name"], c["power_w"], c["temp_c"]) for c in r["chips"]] == [
        (0, "910B4-1", 91.3, 33.0),
        (1, "910B4-1", 88.1, 32.0),
    ]
    assert {c["bus_id"] for c in r["chips"]} == {"0000:xx:00.0"}
    assert {(c["hbm_used_mb"], c["hbm_total_mb"]) for c in r["chips"]} == {(3197, 65536)}


def test_910b2c_trimmed_25_5_2():
    r = info("npu-smi-info_910B2C_trimmed_25.5.2_3.txt")
    assert r["version"] == "25.5.2"
    assert [c["npu"] for c in r["chips"]] == [0, 1, 15]
    assert [c["bus_id"] for c in r["chips"]] == ["0000:66:00.0", "0000:19:00.0", "0000:D0:00.0"]
    assert [c["hbm_used_mb"] for c in r["chips"]] == [3412, 3404, 3404]
    assert [c["power_w"] for c in r["chips"]] == [94.4, 96.6, 96.4]
    assert all(c["name"] == "910B2C" and c["hbm_total_mb"] == 65536 for c in r["chips"])


def test_910b4_anonymised_bus_id_and_busy_aicore():
    r = info("npu-smi-info_910B4_anon_busid_10.txt")
    assert r["version"] == "25.0.rc1.1"
    (chip,) = r["chips"]
    assert chip["bus_id"] == "xxxx:xx:xx.x"
    assert chip["aicore_pct"] == 5.0
    assert chip["power_w"] == 105.5 and chip["temp_c"] == 39.0
    assert (chip["hbm_used_mb"], chip["hbm_total_mb"]) == (6154, 65536)


def test_910b1_with_processes_elided():
    r = info("npu-smi-info_with_processes_910B1_elided_3.txt")
    assert r["version"] == "23.0.rc2.b090"
    got = [(c["npu"], c["name"], c["power_w"], c["temp_c"], c["aicore_pct"]) for c in r["chips"]]
    assert got == [(0, "910B1", 327.1, 54.0, 57.0), (7, "910B1", 451.6, 76.0, 68.0)]
    assert [c["hbm_used_mb"] for c in r["chips"]] == [64293, 64114]
    assert r["processes"] == [
        {"npu": 0, "chip": 0, "pid": 2441447, "name": "python", "memory_mb": 59618},
        {"npu": 1, "chip": 0, "pid": 2441448, "name": "python", "memory_mb": 59834},
        {"npu": 7, "chip": 0, "pid": 2441454, "name": "python", "memory_mb": 59802},
    ]


def test_a3_partial_two_chips_per_npu():
    r = info("npu-smi-info_A3_25.2.1_partial_4.txt")  # no top border in the excerpt
    assert r["version"] == "25.2.1"
    got = [(c["npu"], c["chip"], c["phy_id"], c["power_w"], c["bus_id"], c["hbm_used_mb"])
           for c in r["chips"]]  # fmt: skip
    assert got == [
        (0, 0, 0, 166.5, "0000:9D:00.0", 3131),
        (0, 1, 1, None, "0000:9F:00.0", 2886),  # power is per NPU: chip 1 prints '-'
        (1, 0, 2, 168.1, "0000:99:00.0", 3125),
    ]
    assert {c["name"] for c in r["chips"]} == {"Ascend910"}


def test_a3_26_wide_layout_with_container_pid_column():
    r = info("npu-smi-info_A3_26.0.rc1_wide_trimmed_2.txt")
    assert r["version"] == "26.0.rc1"
    got = [
        (c["npu"], c["chip"], c["phy_id"], c["aicore_pct"], c["hbm_used_mb"]) for c in r["chips"]
    ]
    assert got == [(0, 0, 0, 100.0, 59807), (0, 1, 1, 60.0, 59536),
                   (5, 0, 10, 0.0, 3140), (5, 1, 11, 0.0, 2882)]  # fmt: skip
    assert r["chips"][2]["power_w"] == 159.6 and r["chips"][3]["power_w"] is None
    assert r["processes"] == [
        {"npu": 0, "chip": 0, "pid": 1774110, "name": "VLLMWorker_PP", "memory_mb": 56684},
        {"npu": 0, "chip": 1, "pid": 1777209, "name": "VLLMWorker_PP", "memory_mb": 56684},
    ]


def test_910a_93_column_layout():
    r = info("npu-smi-info_910A_8card_1.txt")
    assert r["version"] == "22.0.3.1"
    assert len(r["chips"]) == 8 and r["processes"] == []
    c3 = r["chips"][3]
    assert (c3["npu"], c3["name"], c3["power_w"], c3["temp_c"], c3["bus_id"]) == (
        3, "910A", 191.7, 42.0, "0000:3E:00.0")  # fmt: skip
    assert (c3["memory_used_mb"], c3["memory_total_mb"]) == (1866, 15077)
    assert (c3["hbm_used_mb"], c3["hbm_total_mb"]) == (0, 32768)
    assert all((c["hugepages_used"], c["hugepages_total"]) == (15, 15) for c in r["chips"])
    assert [c["bus_id"] for c in r["chips"]][-1] == "0000:3D:00.0"


def test_910_warning_health_and_many_processes():
    r = info("npu-smi-info_with_processes_910_warning_1.txt")
    assert r["version"] == "24.1.RC2"
    assert [c["health"] for c in r["chips"]] == ["OK", "OK", "OK", "Warning",
                                                 "OK", "OK", "OK", "Warning"]  # fmt: skip
    assert r["chips"][3]["power_w"] == 206.9 and r["chips"][7]["power_w"] == 203.2
    assert r["chips"][0]["hugepages_used"] == 1232
    assert len(r["processes"]) == 32
    assert {p["name"] for p in r["processes"]} == {"hlt_host_devmm_"}
    assert {p["memory_mb"] for p in r["processes"]} == {686}
    assert r["processes"][0] == {"npu": 0, "chip": 0, "pid": 37656,
                                 "name": "hlt_host_devmm_", "memory_mb": 686}  # fmt: skip
    assert r["processes"][-1]["pid"] == 37663 and r["processes"][-1]["npu"] == 7


def test_910_hugepages_and_banner_versions_differ():
    r = info("npu-smi-info_with_processes_910_8card_hugepages_6.txt")
    assert r["version"] == "23.0.rc2.3"  # the tool says 23.0.rc3; Version: is the driver
    assert len(r["chips"]) == 8
    assert all((c["hugepages_used"], c["hugepages_total"]) == (1123, 1123) for c in r["chips"])
    assert [c["hbm_used_mb"] for c in r["chips"]] == [30710, 30710, 30710, 30709,
                                                      30709, 30709, 30710, 30710]  # fmt: skip
    assert r["chips"][3]["memory_total_mb"] == 15039
    assert [p["pid"] for p in r["processes"]] == [139667, 139577, 139446, 139372,
                                                  139258, 139163, 139126, 139090]  # fmt: skip
    assert r["processes"][1]["memory_mb"] == 30782


def test_910probe_single_card_blank_line_before_process_table():
    r = info("npu-smi-info_with_processes_910ProB_2.txt")
    assert r["version"] == "23.0.rc1"
    (chip,) = r["chips"]
    assert chip["name"] == "910ProB" and chip["power_w"] == 78.4
    assert (chip["memory_used_mb"], chip["memory_total_mb"]) == (1198, 15137)
    assert (chip["hbm_used_mb"], chip["hbm_total_mb"]) == (30711, 32768)
    assert r["processes"] == [
        {"npu": 0, "chip": 0, "pid": 55115, "name": "python", "memory_mb": 30784}
    ]


def test_910_elided_doc():
    r = info("npu-smi-info_910_elided_7.txt")
    assert r["version"] == "24.1.rc1"
    (chip,) = r["chips"]
    assert (chip["npu"], chip["name"], chip["bus_id"]) == (7, "xxx", "0000:3D:00.0")
    assert (chip["memory_used_mb"], chip["memory_total_mb"]) == (2505, 15567)
    assert r["processes"] == []


def test_warning_doc_with_hand_widened_cell():
    r = info("npu-smi-info_with_warning_910_doc_2.txt")
    assert r["version"] == "23.0.5"
    assert [(c["npu"], c["health"], c["power_w"]) for c in r["chips"]] == [
        (0, "Warning", 73.1),
        (7, "OK", 67.0),
    ]
    assert r["chips"][0]["memory_used_mb"] == 920 and r["chips"][0]["memory_total_mb"] == 13553


def test_310p3_duo_partial_two_chips_same_bus():
    r = info("npu-smi-info_310P3_duo_25.2.0_partial_4.txt")
    assert r["version"] == "25.2.0"
    got = [(c["npu"], c["chip"], c["temp_c"], c["memory_used_mb"], c["memory_total_mb"])
           for c in r["chips"]]  # fmt: skip
    assert got == [(2, 0, 45.0, 1529, 44280), (2, 1, 43.0, 1412, 43693)]
    for c in r["chips"]:
        assert c["power_w"] is None  # NA on 310P
        assert c["hbm_used_mb"] is None and c["hbm_total_mb"] is None  # DDR layout
        assert c["bus_id"] == "0000:01:00.0"
        assert c["phy_id"] is None  # the DDR layout's second number is the logic Device id
    assert [c["logic_id"] for c in r["chips"]] == [0, 1]  # one /dev/davinciN per chip


def test_310p3_no_processes():
    r = info("npu-smi-info_310P3_no_processes_3.txt")
    assert r["version"] == "23.0.rc2"
    (chip,) = r["chips"]
    assert (chip["npu"], chip["name"], chip["temp_c"], chip["power_w"]) == (8, "310P3", 37.0, None)
    assert (chip["memory_used_mb"], chip["memory_total_mb"]) == (1700, 21527)
    assert r["processes"] == []


def test_310p_25_3():
    r = info("npu-smi-info_310P_1.txt")
    assert r["version"] == "25.3.rc1"
    (chip,) = r["chips"]
    assert (chip["npu"], chip["bus_id"], chip["memory_used_mb"], chip["memory_total_mb"]) == (
        6, "0000:84:00.0", 1839, 21525)  # fmt: skip


def test_310p3_narrow_legacy_without_banner():
    r = info("npu-smi-info_310P3_narrow_legacy_6.txt")
    assert r["version"] is None
    (chip,) = r["chips"]
    assert (chip["power_w"], chip["temp_c"], chip["bus_id"]) == (17.6, 57.0, "0000:3B:00.0")
    assert (chip["memory_used_mb"], chip["memory_total_mb"]) == (936, 21534)


def test_310b_soc_hugepages_and_na_bus():
    r = info("npu-smi-info_310B_hugepages_doc_7.txt")
    assert r["version"] == "24.1.rc3"
    (chip,) = r["chips"]
    assert chip["name"] == "310B" and chip["bus_id"] is None
    assert (chip["hugepages_used"], chip["hugepages_total"]) == (15, 1304)
    assert (chip["memory_used_mb"], chip["memory_total_mb"]) == (1003, 10810)
    assert chip["power_w"] == 7.6


def test_soc_doc_na_bus():
    r = info("npu-smi-info_soc_busid_NA_doc_1.txt")
    assert r["version"] == "xxx"
    (chip,) = r["chips"]
    assert chip["bus_id"] is None and chip["power_w"] == 10.4 and chip["temp_c"] == 66.0
    assert (chip["memory_used_mb"], chip["memory_total_mb"]) == (957, 10810)


def test_310_v20_80_columns_without_hugepages():
    r = info("npu-smi-info_310_atlas800-3000_v20.2.0_1.txt")
    assert r["version"] == "20.2.0"
    assert [(c["npu"], c["chip"]) for c in r["chips"]] == [(215, i) for i in range(4)]
    assert [c["bus_id"] for c in r["chips"]] == [
        "0000:DA:00.0", "0000:DC:00.0", "0000:DD:00.0", "0000:DB:00.0"]  # fmt: skip
    assert [c["temp_c"] for c in r["chips"]] == [56.0, 57.0, 57.0, 55.0]
    for c in r["chips"]:
        assert c["hugepages_used"] is None and c["hugepages_total"] is None
        assert (c["memory_used_mb"], c["memory_total_mb"]) == (2703, 8192)


def test_310_v21_102_columns():
    r = info("npu-smi-info_310_atlas800-3000_v21.0.4_1.txt")
    assert r["version"] == "21.0.4.B030"
    assert [c["temp_c"] for c in r["chips"]] == [73.0, 74.0, 70.0, 65.0]
    assert [c["memory_used_mb"] for c in r["chips"]] == [2703, 2867, 2867, 2867]
    assert all((c["hugepages_used"], c["hugepages_total"]) == (0, 970) for c in r["chips"])
    assert [c["bus_id"] for c in r["chips"]][-1] == "0000:8C:00.0"


def test_310_single_chip_no_processes():
    r = info("npu-smi-info_310_no_processes_4.txt")
    assert r["version"] == "23.0.0"
    (chip,) = r["chips"]
    assert (chip["name"], chip["power_w"], chip["temp_c"]) == ("310", 12.8, 61.0)
    assert (chip["memory_used_mb"], chip["memory_total_mb"]) == (577, 7759)
    assert (chip["hugepages_used"], chip["hugepages_total"]) == (0, 969)
    assert r["processes"] == []


def test_950_doc_npu_id_name_layout():
    r = info("npu-smi-info_950_doc_1.txt")
    assert r["version"] == "x.x.x"
    assert r["chips"] == [
        {"npu": 0, "chip": 0, "phy_id": None, "logic_id": None, "name": "xxx", "health": "OK",
         "power_w": 204.4,
         "temp_c": 56.0, "aicore_pct": 0.0, "bus_id": "0000:91:00.0", "hbm_used_mb": 4439,
         "hbm_total_mb": 86016, "memory_used_mb": 0, "memory_total_mb": 0,
         "hugepages_used": 0, "hugepages_total": 0}
    ]  # fmt: skip
    assert r["processes"] == []


def test_310b4_88_column_table_not_in_shared_samples():
    text = (DATA / "npu_smi" / "npu-smi-info_310B4_88col.txt").read_text()
    r = parse(text)
    assert r["version"] == "23.0.rc3" and r["processes"] == []
    assert r["chips"] == [
        {"npu": 0, "chip": 0, "phy_id": None, "logic_id": 0, "name": "310B4", "health": "OK",
         "power_w": 7.7,
         "temp_c": 54.0, "aicore_pct": 0.0, "bus_id": None, "hbm_used_mb": None,
         "hbm_total_mb": None, "memory_used_mb": 2166, "memory_total_mb": 3513,
         "hugepages_used": 15, "hugepages_total": 15}
    ]  # fmt: skip


# -- several chips per card: the Device / Phy-ID column of each chip row ------------------------
@pytest.mark.parametrize(
    "name, want",
    [
        # Atlas 300I Duo: two 310P3 chips on one card (one Bus-Id), Device ids 0 and 1
        ("npu-smi-info_310P3_duo_25.2.0_partial_4.txt", [(2, 0, None, 0), (2, 1, None, 1)]),
        # Atlas 300 (310) in an Atlas 800 3000: four chips per NPU id; Device ids are host-wide
        ("npu-smi-info_310_atlas800-3000_v21.0.4_1.txt",
         [(6, 0, None, 3), (6, 1, None, 4), (6, 2, None, 5), (6, 3, None, 6)]),
        ("npu-smi-info_310_atlas800-3000_v20.2.0_1.txt",
         [(215, 0, None, 0), (215, 1, None, 1), (215, 2, None, 2), (215, 3, None, 3)]),
        # A3: two chips per NPU, the Phy-ID is global (0-15), no logic id in this table
        ("npu-smi-info_A3_25.2.1_partial_4.txt",
         [(0, 0, 0, None), (0, 1, 1, None), (1, 0, 2, None)]),
        ("npu-smi-info_A3_26.0.rc1_wide_trimmed_2.txt",
         [(0, 0, 0, None), (0, 1, 1, None), (5, 0, 10, None), (5, 1, 11, None)]),
        # one chip per card for comparison: 910B has neither column
        ("npu-smi-info_910B4_32GB_24.1.1_partial_7.txt", [(0, 0, None, None), (1, 0, None, None)]),
    ],
)  # fmt: skip
def test_chip_ids_of_multi_chip_cards_match_the_samples(name, want):
    got = [(c["npu"], c["chip"], c["phy_id"], c["logic_id"]) for c in info(name)["chips"]]
    assert got == want


def duplicate_last_chip(text: str) -> str:
    """The output with its last chip block printed twice (two captures merged)."""
    lines = text.splitlines()
    data = [i for i, line in enumerate(lines) if line.startswith("| ") and "/" in line]
    last = data[-1]
    return "\n".join(lines[: last + 1] + lines[last - 1 : last + 1] + lines[last + 1 :]) + "\n"


@pytest.mark.parametrize(
    "name, needle",
    [
        ("npu-smi-info_310P3_duo_25.2.0_partial_4.txt", "Device id 1 is printed for NPU 2 chip 1"),
        ("npu-smi-info_A3_25.2.1_partial_4.txt", "Phy-ID 2 is printed for NPU 1 chip 0"),
        ("npu-smi-info_910B4_32GB_24.1.1_partial_7.txt", "NPU 1 chip 0 is printed twice"),
    ],
)
def test_a_chip_printed_twice_is_damaged_output(name, needle):
    text = duplicate_last_chip(sample(name))
    with pytest.raises(InputError, match=needle):
        parse(text, source=name)
