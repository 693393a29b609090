"""The one fixed-width table renderer (fleet tables, preflight, npu-smi, procs) on real inputs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import SAMPLES, sample

from ascend_deploy.commands.npu_smi import render as render_npu_smi
from ascend_deploy.commands.procs import render as render_procs
from ascend_deploy.host.npu_smi import parse
from ascend_deploy.host.procs import find_holders
from ascend_deploy.planning.preflight import render_table
from ascend_deploy.reporting.tables import (
    Column,
    cell,
    fleet_table,
    key_values,
    render,
    write_documents,
    write_json,
)


def starts(line: str) -> list[int]:
    """Start offsets of the cells of a line whose cells are separated by two or more spaces."""
    return [m.start() for m in re.finditer(r"(?:^|(?<=  ))\S", line)]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "-"),
        ("", "-"),
        (True, "yes"),
        (False, "no"),
        (3, "3"),
        (40.0, "40"),
        (93.2, "93.2"),
        (1e20, "1e+20"),
        (["a", None, 2], "a; -; 2"),
        ([], "-"),
        ("two\nlines", "two lines"),
    ],
)
def test_cell_text(value, text):
    assert cell(value) == text


def test_columns_fit_the_widest_cell_and_the_last_is_not_padded():
    lines = render(["NPU", "NAME", "HEALTH"], [[0, "910B3", "OK"], [12, "Ascend910", None]])
    assert lines == [
        "NPU  NAME       HEALTH",
        "0    910B3      OK",
        "12   Ascend910  -",
    ]


def test_rule_and_separator():
    lines = render(["A", "BB"], [["xyz", 1]], sep=" | ", rule="-+-")
    assert lines == ["A   | BB", "----+---", "xyz | 1"]
    assert render(["A", "B"], [["x", "y"]], rule="  ")[1] == "-  -"


def test_fixed_width_columns_wrap_and_continue_on_the_next_lines():
    cols = [Column("ID"), Column("N", align=">"), Column("TEXT", 10), Column("FIX", 8)]
    lines = render(cols, [["a", 7, "one two three four", "do this now"]], sep=" | ", blank="")
    assert lines == [
        "ID | N | TEXT       | FIX",
        "a  | 7 | one two    | do this",
        "   |   | three four | now",
    ]


def test_a_row_with_the_wrong_number_of_cells_is_refused():
    with pytest.raises(ValueError, match="has 1 cells for 2 columns"):
        render(["A", "B"], [["x"]])


def test_fleet_table_from_records():
    rows = [
        {"host": "sim-0", "cards": "8 x 910B3", "problems": []},
        {"host": "sim-1", "cards": "8 x 910B3", "problems": ["npu.health: NPU 3 Alarm", "x"]},
    ]
    lines = fleet_table(rows, ["host", "cards", "problems"], "Fleet")
    assert lines == [
        "Fleet",
        "HOST   CARDS      PROBLEMS",
        "-----  ---------  --------------------------",
        "sim-0  8 x 910B3  -",
        "sim-1  8 x 910B3  npu.health: NPU 3 Alarm; x",
    ]
    assert fleet_table([], ["host"]) == ["HOST", "----"]


def test_npu_smi_table_cells_line_up_under_their_headers():
    """A real A3 `npu-smi info`: every chip row's cells start where the header's columns do."""
    lines = render_npu_smi(
        parse(sample("npu-smi-info_A3_26.0.rc1_wide_trimmed_2.txt"))
    ).splitlines()
    header = lines.index(next(line for line in lines if line.startswith("NPU  CHIP  PHY")))
    cols = starts(lines[header])
    assert len(cols) == 12
    rows = lines[header + 1 : lines.index("", header)]
    assert rows[2].split("  ")[0] == "5" and "159.6" in rows[2] and "3140 / 65536" in rows[2]
    for row in rows:
        assert row[0] != " " and all(row[i - 1] == " " != row[i] for i in cols[1:]), row
    assert rows[1][cols[5] : cols[6]].strip() == "-"  # no power reading on the second chip


def test_npu_smi_key_values_are_padded_to_the_longest_key():
    result = parse(sample("npu-smi-info-t-health_1.txt"), kind="kv")
    text = render_npu_smi(result)
    assert "Health Status     : OK" in text
    assert key_values({"a": 1, "long key": "x"}) == ["a        : 1", "long key : x"]


def test_preflight_table_from_real_checks_wraps_within_the_width():
    checks = [
        {
            "id": "port.free",
            "pitfall": 3,
            "status": "fail",
            "evidence": "port 8000 is held by pid 4242 (python3 -m vllm.entrypoints.openai)",
            "fix": "stop it or pick another port; ascend-deploy procs lists the holders",
        },
        {"id": "npu.health.0.0", "pitfall": None, "status": "ok", "evidence": "OK", "fix": ""},
    ]
    lines = render_table(checks, width=80).splitlines()
    assert lines[0].startswith("CHECK          | PIT | STATUS | EVIDENCE")
    # evidence 24 and fix 17 characters wide: 80 - CHECK (14) - PIT - STATUS - separators
    assert re.fullmatch(r"-{15}\+-{5}\+-{8}\+-{26}\+-{18}", lines[1])
    assert lines[2].startswith("port.free      |   3 | FAIL   | port 8000 is held by pid")
    assert lines[3].startswith("               |     |        | ")
    assert lines[-1] == f"npu.health.0.0 |   - | OK     | {'OK':<24} |"  # an empty fix
    assert max(len(line) for line in lines) <= 80
    joined = " ".join(line.split(" | ")[-1].strip() for line in lines[2:-1])
    assert joined == checks[0]["fix"]


def test_documents_are_written_one_file_each_and_a_path_as_name_writes_nothing(tmp_path):
    out = tmp_path / "run" / "host-a"
    written = write_documents(str(out), {"status": {"a": 1}, "plan": {"tp": 2}})
    assert written == [str(out / "plan.json"), str(out / "status.json")]
    assert json.loads((out / "plan.json").read_text()) == {"tp": 2}
    with pytest.raises(ValueError, match=r"'\.\./x' is not a plain file name"):
        write_documents(str(tmp_path / "other"), {"ok": {}, "../x": {}})
    assert not (tmp_path / "other").exists() and not (tmp_path / "x.json").exists()
    dest = write_json(str(tmp_path / "a" / "b.json"), [{"host": "h"}])
    assert json.loads(Path(dest).read_text()) == [{"host": "h"}]


def test_every_npu_smi_sample_renders(tmp_path):
    """Every saved `npu-smi info` table renders with one header line per table."""
    names = sorted(p.name for p in SAMPLES.glob("npu-smi-info_*.txt"))
    assert len(names) >= 10
    for name in names:
        text = render_npu_smi(parse(sample(name)))
        assert text.count("NPU  CHIP  PHY") == 1, name
        assert all(line == line.rstrip() for line in text.splitlines()), name


def test_procs_table_a_real_listener_and_npu_holders_with_notes(http_listener):
    """`ascend-deploy procs`: a real listening process and npu-smi holders that are not running
    here; the notes sit under the OWNER? column."""
    proc, port = http_listener
    info = parse(sample("npu-smi-info_with_processes_910B1_elided_3.txt"))
    lines = render_procs(find_holders(port, "vllm", info)).splitlines()
    assert lines[0].split() == ["ROLE", "PID", "OWNER?", "WHERE", "UNIT/CONTAINER", "COMMAND"]
    owner_at = lines[0].index("OWNER?")
    pid_end = lines[0].index("PID") + len("PID")
    listener = lines[1]
    assert listener.startswith("listener") and listener[owner_at:].startswith("FOREIGN ")
    assert listener[:pid_end].endswith(str(proc.pid))  # right-aligned under PID
    assert f"127.0.0.1:{port}" in listener and "http.server" in listener
    holders = [line for line in lines if line.startswith("npu ")]
    assert [line[owner_at:].split()[0] for line in holders] == ["gone"] * 3
    notes = [line for line in lines if line.lstrip().startswith("note: ")]
    assert len(notes) == 3 and all(n.index("note:") == owner_at for n in notes)
    assert lines.index(notes[0]) == lines.index(holders[0]) + 1
