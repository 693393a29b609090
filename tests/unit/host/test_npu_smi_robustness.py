"""Mangled copies, CRLF, wrong kinds and bad files, through the library and the CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SAMPLES, sample

from ascend_deploy.errors import InputError
from ascend_deploy.host.npu_smi import parse

PARSED = sorted(
    p.name for p in SAMPLES.glob("npu-smi*.txt") if "help" not in p.name and "topo" not in p.name
)
CLI = [str(REPO / ".venv" / "bin" / "ascend-deploy")]
if not Path(CLI[0]).exists():  # pragma: no cover - another venv layout
    CLI = [sys.executable, "-m", "ascend_deploy.cli"]


def collapse_spaces(text: str) -> str:
    return re.sub(r"[ ]+", " ", text)


def strip_trailing(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.split("\n"))


def spaces_to_tabs(text: str) -> str:
    return re.sub(r"[ ]{2,}", "\t", text)


def indent_block(text: str) -> str:
    return "\n".join("    " + line for line in text.split("\n"))


def crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def without_comment(text: str) -> str:
    return "\n".join(line for line in text.split("\n") if not line.startswith("# "))


MANGLERS = [collapse_spaces, strip_trailing, spaces_to_tabs, indent_block, crlf, without_comment]


def test_every_npu_smi_sample_parses():
    assert len(PARSED) == 62
    for name in PARSED:
        assert parse(sample(name), source=name)["kind"] in ("info", "map", "kv")


@pytest.mark.parametrize("mangle", MANGLERS, ids=lambda f: f.__name__)
def test_mangled_copies_parse_to_the_same_result(mangle):
    for name in PARSED:
        original = parse(sample(name), source=name)
        assert parse(mangle(sample(name)), source=name) == original, name


def test_all_manglers_at_once_on_a_table():
    name = "npu-smi-info_A3_26.0.rc1_wide_trimmed_2.txt"
    text = crlf(indent_block(spaces_to_tabs(strip_trailing(sample(name)))))
    assert parse(text) == parse(sample(name))
    assert parse(text.encode("utf-8")) == parse(sample(name))  # bytes are accepted too


def test_blank_process_names_are_null():
    # vllm-ascend issue #3865: processes in containers can show an empty name cell.
    text = sample("npu-smi-info_A3_26.0.rc1_wide_trimmed_2.txt").replace(
        "| VLLMWorker_PP      |", "|                    |"
    )
    procs = parse(text)["processes"]
    assert [(p["pid"], p["name"], p["memory_mb"]) for p in procs] == [
        (1774110, None, 56684),
        (1777209, None, 56684),
    ]


def test_rule_lines_with_column_bars_and_warning_line():
    # A published 310P copy draws a rule with '|' junctions; the source prints a
    # '[WARNING]' line after the table when the driver install is incomplete.
    text = sample("npu-smi-info_310P3_narrow_legacy_6.txt").replace(
        "+-------------------+-----------------+", "+-------------------|-----------------|", 1
    )
    text += "[WARNING]The driver package may not be completely installed\n"
    assert parse(text) == parse(sample("npu-smi-info_310P3_narrow_legacy_6.txt"))


@pytest.mark.parametrize(
    ("name", "kind", "message"),
    [
        ("npu-smi-info_910B4_32GB_24.1.1_partial_7.txt", "map", "no `NPU ID ... Chip Name` header"),
        ("npu-smi-info_910B4_32GB_24.1.1_partial_7.txt", "kv", "no `Key : Value` lines"),
        ("npu-smi-info-m_910B_4.txt", "info", "holds no NPU chip rows"),
        ("npu-smi-info-t-board_910B_1.txt", "info", "holds no NPU chip rows"),
    ],
)
def test_wrong_kind_is_refused(name, kind, message):
    with pytest.raises(InputError, match=re.escape(f"{name}: ") + ".*" + re.escape(message)):
        parse(sample(name), kind=kind, source=name)


def test_unknown_kind_and_wrong_type():
    with pytest.raises(InputError, match="unknown npu-smi output kind 'table'"):
        parse(sample("npu-smi-info-m_910B_4.txt"), kind="table")
    with pytest.raises(InputError, match=r"x\.json: expected npu-smi output as text, got dict"):
        parse({"chips": []}, source="x.json")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- CLI


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, "npu-smi", *args], input=stdin, capture_output=True, timeout=60, check=False
    )


def test_cli_parse_json_matches_library():
    path = SAMPLES / "npu-smi-info_with_processes_910B1_elided_3.txt"
    done = cli("parse", str(path), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == parse(path.read_text())


def test_cli_parse_human_tables():
    done = cli("parse", str(SAMPLES / "npu-smi-info_A3_26.0.rc1_wide_trimmed_2.txt"))
    assert done.returncode == 0
    out = done.stdout.decode()
    assert out.startswith("npu-smi info: driver 26.0.rc1, 2 NPU(s), 4 chip(s)")
    assert re.search(
        r"^5\s+1\s+11\s+Ascend910\s+OK\s+-\s+40\s+0\s+0000:8B:00.0\s+2882 / 65536", out, re.M
    )
    assert re.search(r"^0\s+1\s+1777209\s+VLLMWorker_PP\s+56684$", out, re.M)
    done = cli("parse", str(SAMPLES / "npu-smi-info-m_910B4_7.txt"))
    assert re.search(r"^7\s+1\s+-\s+Mcu$", done.stdout.decode(), re.M)
    done = cli("parse", "--kind", "kv", "-", stdin=sample("npu-smi-info-t-health_1.txt").encode())
    assert "Health Status     : OK" in done.stdout.decode()


def test_cli_parse_no_processes_message():
    done = cli("parse", str(SAMPLES / "npu-smi-info_310P_1.txt"))
    assert done.returncode == 0
    assert done.stdout.decode().rstrip().endswith("No processes hold NPU memory.")


def _truncated(name: str, keep_lines: int | None = None, fraction: float | None = None) -> bytes:
    data = (SAMPLES / name).read_bytes()
    if fraction is not None:
        return data[: int(len(data) * fraction)]
    return b"".join(data.splitlines(keepends=True)[:keep_lines])


BAD_INPUTS = {
    "empty": (b"", "is empty"),
    "blank": (b"  \n\n\t\n", "is empty"),
    "comment_only": (b"# source: nothing else\n", "is empty"),
    "binary": (bytes(range(256)) * 4, "binary"),
    "elf": (b"\x7fELF\x02\x01\x01" + b"\x00" * 64, "binary"),
    "latin1": ("NPU ID : 0\nName : caf\xe9\n".encode("latin-1"), "not UTF-8"),
    "garbage": (b"hello world\nthis is not npu-smi\n", "not recognised"),
    "json": (b'{"chips": [1, 2]}\n', "not recognised"),
    "half_table": (
        _truncated("npu-smi-info_910B4_32GB_24.1.1_partial_7.txt", fraction=0.55),
        "truncated",
    ),
    "cut_after_summary_row": (
        _truncated("npu-smi-info_910A_8card_1.txt", keep_lines=8),
        "without its partner row",
    ),
    "header_only": (_truncated("npu-smi-info_910A_8card_1.txt", keep_lines=7), "no NPU chip rows"),
    "map_cut": (_truncated("npu-smi-info-m_910A_3.txt", fraction=0.85), "expected 4 columns"),
    "bad_npu_id": (
        sample("npu-smi-info_910B4_anon_busid_10.txt")
        .replace("| 0     910B4", "| x     910B4")
        .encode(),
        "expected an NPU id",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_cli_bad_input_exit_2_one_line(case, tmp_path):
    data, message = BAD_INPUTS[case]
    path = tmp_path / f"{case}.txt"
    path.write_bytes(data)
    done = cli("parse", str(path))
    err = done.stderr.decode()
    assert done.returncode == 2, (case, err, done.stdout)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert str(path) in err and message in err, err


def test_cli_missing_file_and_directory(tmp_path):
    for path, message in [(tmp_path / "nope.txt", "no such file"), (tmp_path, "is a directory")]:
        done = cli("parse", str(path))
        err = done.stderr.decode()
        assert done.returncode == 2 and err.count("\n") == 1, err
        assert f"{path}: {message}" in err


def test_cli_endless_input_is_refused():
    done = cli("parse", "/dev/zero")
    assert done.returncode == 2
    assert done.stderr.startswith(b"ascend-deploy npu-smi: error: /dev/zero: larger than 8 MiB")


def test_cli_stdin_is_named_standard_input():
    done = cli("parse", stdin=b"")
    assert done.returncode == 2
    assert done.stderr.decode() == "ascend-deploy npu-smi: error: standard input: is empty " \
        "(no npu-smi output); run npu-smi again and capture stdout\n"  # fmt: skip


def test_cli_wrong_kind_exit_2(tmp_path):
    done = cli("parse", "--kind", "map", str(SAMPLES / "npu-smi-info_310P_1.txt"))
    assert done.returncode == 2 and "npu-smi-info_310P_1.txt" in done.stderr.decode()


def test_stray_replacement_character_is_tolerated_but_garbage_bytes_are_not():
    name = "npu-smi-info_310P_1.txt"
    warning = "[WARNING] \ufffd\ufffd driver log level\n"  # a GBK line decoded with 'replace'
    assert parse(warning + sample(name)) == parse(sample(name))
    noise = bytes(range(128, 256)).decode("latin-1").encode("utf-8", "replace")
    blob = (b"\xff\xfe" * 400).decode("utf-8", "replace") + noise.decode()
    with pytest.raises(InputError, match="binary data"):
        parse(blob, source="blob.bin")
