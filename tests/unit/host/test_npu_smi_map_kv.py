"""`npu-smi info -m` and Key : Value outputs: one test per sample, exact values."""

from __future__ import annotations

import pytest
from conftest import DATA, sample

from ascend_deploy.errors import InputError
from ascend_deploy.host.npu_smi import detect_kind, parse


def rows(name: str) -> list[dict]:
    result = parse(sample(name), source=name)
    assert result["kind"] == "map" and list(result) == ["kind", "rows"]
    for row in result["rows"]:
        assert list(row) == ["npu", "chip", "logic_id", "chip_name"]
    return result["rows"]


def records(name: str) -> list[dict]:
    result = parse(sample(name), source=name)
    assert result["kind"] == "kv" and list(result) == ["kind", "records"]
    for record in result["records"]:
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in record.items())
    return result["records"]


# --------------------------------------------------------------------------- info -m


def test_map_910b_keeps_mcu_rows():
    got = rows("npu-smi-info-m_910B_4.txt")
    assert len(got) == 16
    assert got[0] == {"npu": 0, "chip": 0, "logic_id": 0, "chip_name": "Ascend xxx"}
    assert got[1] == {"npu": 0, "chip": 1, "logic_id": None, "chip_name": "Mcu"}
    assert got[14] == {"npu": 7, "chip": 0, "logic_id": 7, "chip_name": "Ascend xxx"}
    assert [r["chip_name"] for r in got].count("Mcu") == 8


def test_map_910b4_indented_with_trailing_spaces():
    got = rows("npu-smi-info-m_910B4_7.txt")
    assert len(got) == 16
    chips = [r for r in got if r["chip_name"] != "Mcu"]
    assert [(r["npu"], r["logic_id"]) for r in chips] == [(i, i) for i in range(8)]
    assert {r["chip_name"] for r in chips} == {"Ascend 910B4"}
    assert got[-1] == {"npu": 7, "chip": 1, "logic_id": None, "chip_name": "Mcu"}


def test_map_910a():
    got = rows("npu-smi-info-m_910A_3.txt")
    assert got == [
        {"npu": i, "chip": 0, "logic_id": i, "chip_name": "Ascend 910A"} for i in range(8)
    ]


def test_map_910a_tab_indented():
    got = rows("npu-smi-info-m_910A_tab_8.txt")
    assert got == [
        {"npu": i, "chip": 0, "logic_id": i, "chip_name": "Ascend 910A"} for i in range(8)
    ]


def test_map_310p_duo_logic_ids_differ_from_npu_ids():
    got = rows("npu-smi-info-m_310P_duo_5.txt")
    assert len(got) == 12
    chips = [(r["npu"], r["chip"], r["logic_id"]) for r in got if r["chip_name"] != "Mcu"]
    assert chips == [(1, 0, 0), (1, 1, 1), (2, 0, 2), (2, 1, 3),
                     (4, 0, 4), (4, 1, 5), (5, 0, 6), (5, 1, 7)]  # fmt: skip
    assert got[2] == {"npu": 1, "chip": 2, "logic_id": None, "chip_name": "Mcu"}


def test_map_310_minid():
    got = rows("npu-smi-info-m_310_1.txt")
    assert got == [{"npu": 215, "chip": i, "logic_id": i, "chip_name": "MiniD"} for i in range(4)]


def test_map_310_with_mcu():
    got = rows("npu-smi-info-m_310_with_mcu_2.txt")
    assert len(got) == 5
    assert got[3] == {"npu": 6, "chip": 3, "logic_id": 3, "chip_name": "MiniD"}
    assert got[4] == {"npu": 6, "chip": 4, "logic_id": None, "chip_name": "Mcu"}


def test_map_950_slot_and_phy_columns():
    # 950 prints NPU ID, Slot ID, Chip ID, Chip Phy-ID, Chip Name and no logic id.
    assert rows("npu-smi-info-m_950_doc_6.txt") == [
        {"npu": 0, "chip": 0, "logic_id": None, "chip_name": "xxx"}
    ]


# --------------------------------------------------------------------------- info -l


def test_list_910b_total_count_is_its_own_record():
    got = records("npu-smi-info-l_910B_2.txt")
    assert got[0] == {"Total Count": "8"}
    assert got[1:] == [{"NPU ID": str(i), "Chip Count": "1"} for i in range(8)]


def test_list_950_product_and_serial():
    assert records("npu-smi-info-l_950_doc_1.txt") == [
        {"Total Count": "1"},
        {"NPU ID": "0", "Product Name": "A5 PCIe Card", "Serial Number": "IT23HMDA0502FAA"},
    ]


# --------------------------------------------------------------------------- -t board


def test_board_chip_a2_soc_excerpt():
    assert records("npu-smi-info-t-board-chip_A2_soc_8.txt") == [
        {"NPU ID": "0", "Chip ID": "0", "Chip Type": "Ascend", "Chip Name": "910B4"}
    ]


def test_board_chip_310p_die_id_keeps_spaces():
    (rec,) = records("npu-smi-info-t-board_310P_2.txt")
    assert rec["NPU ID"] == "1" and rec["Chip Name"] == "xxx"
    assert rec["Die ID"] == "409921D4 2140A100 E54BDDD4 07CC040A 9B00301F"
    assert rec["PCIe Bus Info"] == "0000:81:00.0"  # values keep their colons
    assert rec["Firmware Version"] == "7.1.0.4"
    assert len(rec) == 10


def test_board_card_910b2c():
    (rec,) = records("npu-smi-info-t-board_910B2C_card_4.txt")
    assert rec["Product Name"] == "IT21HMDB02-B2"
    assert rec["Model"] == "NA"  # kv values are strings as printed
    assert rec["Software Version"] == "25.5.2"
    assert rec["Firmware Version"] == "7.8.0.7.220"
    assert rec["Serial Number"] == "102415083974"
    assert rec["PCIe Bus Info"] == "0000:66:00.0" and rec["Slot ID"] == "0"
    assert len(rec) == 13


def test_board_chip_910b():
    (rec,) = records("npu-smi-info-t-board_910B_1.txt")
    assert rec["VDie ID"] == "901421D4 02103514 1711E613 6DA7040A 00102001"
    assert rec["Chip Position ID"] == "1" and rec["Firmware Version"] == "7.1.0.4.218"
    assert rec["PCB ID"] == "NA"


def test_board_card_910():
    (rec,) = records("npu-smi-info-t-board_910_card_5.txt")
    assert rec["Software Version"] == "23.0.5"
    assert rec["PCI Device ID"] == "0xD801" and rec["PCI Vendor ID"] == "0x19e5"
    assert rec["Chip Count"] == "1" and len(rec) == 15


def test_board_chip_910():
    (rec,) = records("npu-smi-info-t-board_910_chip_6.txt")
    assert rec["NDie ID"] == "27216594 20401010 4E10C8D4 14CC040A A4102003"
    assert rec["PCIe Bus Info"] == "0000:61:00.0"


def test_board_950_doc():
    (rec,) = records("npu-smi-info-t-board_950_doc_3.txt")
    assert rec["Main Board ID"] == "0x68(1P)"
    assert rec["PCI Device ID"] == "0xD806"
    assert rec["DDie ID"] == "870408E3 2120D518 77936EE6 80B40A0A D4100003"
    assert len(rec) == 25


# --------------------------------------------------------------------------- -t common


def test_common_310p_two_chips_and_mcu_are_separate_records():
    got = records("npu-smi-info-t-common_310P_2.txt")
    assert [r.get("Chip ID") for r in got] == ["0", "1", None]
    assert [r["NPU ID"] for r in got] == ["1", "1", "1"]
    assert got[0]["Chip Count"] == "2" and got[0]["Temperature(C)"] == "60"
    assert got[1]["Temperature(C)"] == "59" and got[1]["Aicore curFreq(MHZ)"] == "960"
    assert got[2] == {"NPU ID": "1", "Chip Name": "mcu", "Temperature(C)": "48",
                      "NPU Real-time Power(W)": "45.2"}  # fmt: skip


def test_common_910b_chip_then_mcu():
    got = records("npu-smi-info-t-common_910B_1.txt")
    assert len(got) == 2
    assert got[0]["Aicore Count"] == "32" and got[0]["NPU Real-time Power(W)"] == "69.0"
    assert got[0]["Temperature(C)"] == "46"
    assert got[1]["Chip Name"] == "mcu" and got[1]["Temperature(C)"] == "48"


def test_common_910b_two_pastes_with_prompts():
    got = records("npu-smi-info-t-common_910B_3.txt")
    assert [(r["NPU ID"], r.get("Chip Name")) for r in got] == [
        ("1", None), ("1", "mcu"), ("7", None), ("7", "mcu")]  # fmt: skip
    assert got[0]["HBM Usage Rate(%)"] == "91" and got[0]["Aicore Count"] == "20"
    assert got[2]["NPU Real-time Power(W)"] == "331.1" and got[2]["Aicore Usage Rate(%)"] == "70"
    assert got[3]["Temperature(C)"] == "58"


def test_common_910_no_blank_lines():
    (rec,) = records("npu-smi-info-t-common_910_5.txt")
    assert rec["Aicore Count"] == "30" and rec["Aicore Freq(MHZ)"] == "900"
    assert rec["NPU Real-time Power(W)"] == "71.7" and len(rec) == 11


def test_common_950_doc():
    (rec,) = records("npu-smi-info-t-common_950_doc_4.txt")
    assert rec["Aicore curFreq(MHZ)"] == "100" and rec["NPU Real-time Power(W)"] == "298.6"


# --------------------------------------------------------------------------- other -t types


def test_ecc_40_wide_keys():
    (rec,) = records("npu-smi-info-t-ecc_1.txt")
    assert rec["NPU ID"] == "1" and rec["Chip ID"] == "0"
    assert rec["HBM Double Bit Isolated Pages Count"] == "0"
    assert len(rec) == 15


def test_flash():
    (rec,) = records("npu-smi-info-t-flash_1.txt")
    assert rec["Flash ID"] == "1730504" and rec["Manufacturer ID"] == "0xC8"
    assert rec["Capacity(MB)"] == "64"


def test_health_leading_space_no_npu_id():
    assert records("npu-smi-info-t-health_1.txt") == [
        {"Health Status": "OK", "Error Code": "NA", "Error Information": "NA"}
    ]


def test_health_950_doc():
    assert records("npu-smi-info-t-health_950_doc_1.txt") == [
        {"NPU ID": "0", "Health": "OK", "Error Code": "NA", "Error Information": "NA"}
    ]


def test_memory():
    (rec,) = records("npu-smi-info-t-memory_1.txt")
    assert rec["HBM Capacity(MB)"] == "32768" and rec["HBM Clock Speed(MHz)"] == "1600"
    assert rec["HBM Manufacturer ID"] == "0x57"


def test_memory_950_doc():
    (rec,) = records("npu-smi-info-t-memory_950_doc_2.txt")
    assert rec["HBM Capacity(MB)"] == "131072" and rec["HBM Temperature(C)"] == "63"


def test_power():
    assert records("npu-smi-info-t-power_910B_1.txt") == [
        {"NPU ID": "0", "Chip Count": "1", "NPU Real-time Power(W)": "103.5", "Chip ID": "0"}
    ]


def test_proc_mem_inline_pairs():
    assert records("npu-smi-info-t-proc-mem_950_doc_1.txt") == [
        {"NPU ID": "0", "Process id": "395864", "Process name": "power_test",
         "Process memory(MB)": "5118"}
    ]  # fmt: skip


def test_temp_with_board_sensors():
    (rec,) = records("npu-smi-info-t-temp_910B_1.txt")
    assert rec["NPU Temperature (C)"] == "39" and rec["Chip ID"] == "0"
    assert rec["LM75A_TE (C)"] == "36" and rec["Chip Name"] == "MCU"


def test_usages_310b_chip_scoped_tab_indented():
    (rec,) = records("npu-smi-info-t-usages-c_310B_doc_7.txt")
    assert rec["Memory Capacity(MB)"] == "10810" and rec["Ctrlcpu Usage Rate(%)"] == "86"
    assert rec["Memory Bandwidth Usage Rate(%)"] == "1" and len(rec) == 8


def test_usages_310p_duo_one_record_per_chip():
    got = records("npu-smi-info-t-usages_310P_2.txt")
    assert [(r["NPU ID"], r["Chip ID"], r["DDR Capacity(MB)"]) for r in got] == [
        ("1", "0", "44280"), ("1", "1", "43693")]  # fmt: skip
    assert got[1]["Ctrlcpu Usage Rate(%)"] == "3" and got[0]["Ctrlcpu Usage Rate(%)"] == "2"


def test_usages_910b():
    (rec,) = records("npu-smi-info-t-usages_910B_1.txt")
    assert rec["HBM Capacity(MB)"] == "32768" and rec["DDR Capacity(MB)"] == "15171"
    assert rec["Ctrlcpu Usage Rate(%)"] == "9"


def test_usages_910():
    (rec,) = records("npu-smi-info-t-usages_910_3.txt")
    assert rec["NPU ID"] == "1" and rec["DDR Usage Rate(%)"] == "14"


def test_usages_910_doc():
    (rec,) = records("npu-smi-info-t-usages_910_5.txt")
    assert rec["DDR Capacity(MB)"] == "13553" and rec["HBM Usage Rate(%)"] == "0"


def test_usages_950_doc():
    (rec,) = records("npu-smi-info-t-usages_950_doc_4.txt")
    assert rec["HBM Capacity(MB)"] == "131072" and rec["NPU Utilization(%)"] == "0"
    assert rec["Aicube Usage Rate(%)"] == "0" and len(rec) == 15


def test_upgrade_mcu_two_invocations():
    assert records("npu-smi-upgrade-b-mcu_1.txt") == [
        {"Version": "23.3.13"},
        {"Version": "25.50.10"},
    ]


def test_npu_smi_v():
    assert records("npu-smi-v_950_doc_1.txt") == [{"npu-smi version": "x.x.x"}]


@pytest.mark.parametrize(
    "name",
    ["npu-smi-help_950_doc_1.txt", "npu-smi-info-help_950_doc_1.txt",
     "npu-smi-info-t-topo_910B_1.txt"],
)  # fmt: skip
def test_help_and_topo_are_not_guessed(name):
    # Help texts and the topology matrix are not info/map/kv output: refuse clearly.
    with pytest.raises(InputError, match=name.replace(".", r"\.") + ": is not recognised"):
        detect_kind(sample(name), source=name)


def test_map_a3_with_phy_id_column():
    # Not in shared samples: an A3 `-m` capture kept in tests/data/npu_smi/.
    text = (DATA / "npu_smi" / "npu-smi-info-m_A3_fixture.txt").read_text()
    assert parse(text)["rows"] == [
        {"npu": 0, "chip": 0, "logic_id": 0, "chip_name": "Ascend910"},
        {"npu": 0, "chip": 1, "logic_id": 1, "chip_name": "Ascend910"},
        {"npu": 0, "chip": 2, "logic_id": None, "chip_name": "Mcu"},
    ]
