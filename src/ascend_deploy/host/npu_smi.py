"""Parse ``npu-smi`` output: the ``info`` table, ``info -m`` and ``Key : Value`` outputs.

Standard library only (shipped to bare targets as Ansible module_utils). The parser reads
by structure, never by column position: table rows are split on ``|``, ``used / total``
pairs are found with a tolerant regex, and section boundaries are recognised by their
header words. Layout facts (HBM vs DDR tables, A3 ``Chip Phy-ID``, 950 ``NPU ID | Name``,
20.x tables without hugepages, the 26.x ``Process id in container`` column) come from
the npu-smi sources in docs/sources.md and the samples in tests/data/samples.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import signal
import subprocess
import time
from typing import Any

from ..errors import CheckFailed, InputError, describe_path, shown

KINDS = ("info", "map", "kv")
MAX_OUTPUT = 8 << 20  # npu-smi prints a few KiB; more is a broken binary or a wrong file

# Where driver packages install npu-smi (docs/sources.md); Ansible and cron
# often run with a PATH that lacks /usr/local/sbin.
FALLBACK_DIRS = ("/usr/local/bin", "/usr/local/sbin")

_NULLS = {"", "NA", "N/A", "-", "--"}
_PAIR = re.compile(r"(\S+?)\s*/\s*(\S+)")
_RULE = re.compile(r"^[+|][-=+|\s]*$")
# Keys are words with units in brackets ("NPU Real-time Power(W)", "LM75A_TE (C)"); keys
# never contain ':', values may ("0000:C1:00.0"); see docs/sources.md (npu-smi).
_KEY = r"[A-Za-z][A-Za-z0-9 ()%_.\-]*?"
_KV = re.compile(rf"^\s*({_KEY})\s*:\s?(.*)$")
_KV_INLINE_PAIR = re.compile(rf"({_KEY}):(\S+)")
_KV_INLINE_LINE = re.compile(rf"(?:{_KEY}:\S+\s*){{2,}}")
_MAP_COLUMNS = ("NPU ID", "Slot ID", "Chip ID", "Chip Logic ID", "Chip Phy-ID", "Chip Name")
_MAP_HEADER = re.compile(r"^\s*NPU\s+ID\s+.*Chip\s+ID\s+.*Chip\s+Name\s*$")
_NO_PROCS = re.compile(r"No running processes found in NPU\s+(\d+)", re.I)


# --------------------------------------------------------------------------- product


def hardware_of(chips: list[dict]) -> str | None:
    """a2 / a3 / a5 / 310p from the chip names of ``npu-smi info`` (None = unknown).

    910B* is Atlas A2; "910" with a Chip Phy-ID column, or 910_93*, is Atlas A3 (its two dies
    per card); 310P* is the 300I Duo / 300I Pro family; 950* is Ascend 950 (A5).
    """
    for chip in chips:
        name = str(chip.get("name") or "").replace("Ascend", "").strip()
        if name.upper().startswith("910B"):
            return "a2"
        if (name == "910" and chip.get("phy_id") is not None) or name.startswith("910_93"):
            return "a3"
        if name.upper().startswith("310P"):
            return "310p"
        if name.startswith("950"):
            return "a5"
    return None


def hardware_mismatch(declared: str | None, chips: list[dict]) -> tuple[str, str] | None:
    """(problem, fix) when a declared family contradicts the chip names; None when they agree.

    Nothing to contradict when nothing is declared (``None`` or ``auto``) or no chip name says.
    """
    detected = hardware_of(chips)
    if declared in (None, "", "auto") or detected is None or declared == detected:
        return None
    names = sorted({str(c.get("name")) for c in chips})
    return (
        f"declared hardware {declared}, but npu-smi shows {detected} chips ({', '.join(names)}): "
        "the image, the pins and the plan would be for another product",
        f"set ascend_runtime_hardware: {detected} for this host (CLI: --hardware {detected})",
    )


def assign_devices(info: dict, map_doc: dict | None = None) -> list[dict]:
    """Give every chip of a parsed ``info`` its device id (``chip["device"]``); return the chips.

    The device id is the N of ``/dev/davinciN`` and the id the runtime numbers from: the
    ``Chip Logic ID`` of ``npu-smi info -m`` for that (NPU, chip), else the id the ``info`` table
    prints per chip (the Device column of 310P cards, the Chip Phy-ID of A3 dies), else, with one
    chip per NPU (Atlas A2), the NPU id. A chip none of these name raises ``InputError``: placing
    it by position could mount another chip than the one whose health and memory were read.
    """
    logic: dict[tuple[int, int], int] = {}
    for row in (map_doc or {}).get("rows") or []:
        if row.get("logic_id") is not None:
            logic[(int(row["npu"]), int(row["chip"]))] = int(row["logic_id"])
    chips = info.get("chips") or []
    per_npu: dict[int, int] = {}
    for chip in chips:
        per_npu[chip["npu"]] = per_npu.get(chip["npu"], 0) + 1
    seen: dict[int, tuple[int, int]] = {}
    for chip in chips:
        key = (int(chip["npu"]), int(chip.get("chip") or 0))
        device = logic.get(key)
        if device is None:
            device = chip.get("logic_id")
        if device is None:
            device = chip.get("phy_id")
        if device is None and per_npu[chip["npu"]] == 1:
            device = chip["npu"]
        if device is None:
            raise InputError(
                f"npu-smi: NPU {key[0]} chip {key[1]} has no device id (no Chip Logic ID in "
                "`npu-smi info -m`, no per-chip id in `npu-smi info`); fix: check that "
                "`npu-smi info -m` runs on this host"
            )
        if int(device) in seen:
            raise InputError(
                f"npu-smi: device id {device} is given to NPU {seen[int(device)][0]} chip "
                f"{seen[int(device)][1]} and to NPU {key[0]} chip {key[1]}; the output is damaged"
            )
        seen[int(device)] = key
        chip["device"] = int(device)
    return chips


# --------------------------------------------------------------------------- helpers


def _err(source: str, what: str, fix: str = "") -> InputError:
    msg = f"{describe_path(source)}: {what}"
    return InputError(f"{msg}; {fix}" if fix else msg)


def _lines(text: Any, source: str) -> list[tuple[int, str]]:
    """Validate and normalise ``text``; return (line number, line) without comments."""
    if isinstance(text, (bytes, bytearray)):
        if b"\x00" in text:
            raise _err(source, "is binary data, not npu-smi text output")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _err(
                source, f"is not UTF-8 text (byte {exc.start}), not npu-smi output"
            ) from None
    if not isinstance(text, str):
        raise _err(source, f"expected npu-smi output as text, got {type(text).__name__}")
    if "\x00" in text:
        raise _err(source, "is binary data, not npu-smi text output")
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    # Control characters and U+FFFD (undecodable bytes replaced) in bulk mean binary data;
    # a stray one (a localised warning line) is tolerated.
    controls = sum(1 for ch in text if (ord(ch) < 32 and ch not in "\n\t\f\v") or ch == "\ufffd")
    if controls > max(2, len(text) // 100):
        raise _err(source, "contains control characters: binary data, not npu-smi output")
    out = []
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        # '# source:' headers of saved samples and '# ---' separators a person added.
        if stripped.startswith("#"):
            continue
        out.append((number, line.rstrip()))
    if not any(line.strip() for _, line in out):
        raise _err(source, "is empty (no npu-smi output)", "run npu-smi again and capture stdout")
    return out


def _null(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return None if value in _NULLS else value


def _int(value: str | None) -> int | None:
    value = _null(value)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        try:
            number = float(value)
        except ValueError:
            return None
        return int(number) if number.is_integer() else None


def _float(value: str | None) -> float | None:
    value = _null(value)
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _is_rule(stripped: str) -> bool:
    return bool(_RULE.match(stripped)) and (stripped.count("-") + stripped.count("=")) >= 3


def _cells(stripped: str) -> list[str]:
    """Cells of a ``| a | b |`` row, stripped (leading/trailing bars removed)."""
    inner = stripped[1:]
    if inner.endswith("|"):
        inner = inner[:-1]
    return [cell.strip() for cell in inner.split("|")]


def _pairs(cell: str) -> tuple[list[tuple[str, str]], list[str]]:
    """Split a cell into its ``a / b`` pairs and the remaining single tokens."""
    pairs = [(m.group(1), m.group(2)) for m in _PAIR.finditer(cell)]
    rest = _PAIR.sub(" ", cell).split()
    return pairs, rest


# --------------------------------------------------------------------------- detect


def detect_kind(text: str, source: str = "-") -> str:
    """``info``, ``map`` or ``kv`` for this npu-smi output; ``InputError`` if none fits."""
    lines = [line.strip() for _, line in _lines(text, source) if line.strip()]
    return _detect(lines, source)


def _detect(lines: list[str], source: str) -> str:
    table_rows = [s for s in lines if s.startswith("|") or _is_rule(s)]
    if table_rows:
        joined = "\n".join(table_rows)
        if any(word in joined for word in ("Health", "Bus-Id", "Version:", "Process id")):
            return "info"
        if _NO_PROCS.search(joined):
            return "info"
    if any(_MAP_HEADER.match(s) and ":" not in s for s in lines):
        return "map"
    kv_lines = [s for s in lines if _KV.match(s) and "|" not in s]
    if kv_lines and len(kv_lines) * 2 >= len(lines) and not _looks_like_help(lines):
        return "kv"
    raise _err(
        source,
        "is not recognised npu-smi output (expected the `npu-smi info` table, "
        "`npu-smi info -m` or `Key : Value` lines from `npu-smi info -l`/`-t TYPE`)",
        "check that the file holds npu-smi stdout",
    )


def _looks_like_help(lines: list[str]) -> bool:
    return bool(lines) and lines[0].startswith("Usage:")


# --------------------------------------------------------------------------- info table


class _Layout:
    """What the header rows said about the table (absent headers leave defaults)."""

    def __init__(self) -> None:
        self.has_hbm: bool | None = None  # HBM-Usage(MB) column present
        self.ddr_device = False  # 'Chip Device' header: second number is the logic id


def lists_processes(text: str | bytes) -> bool:
    """Whether saved ``npu-smi info`` output holds its process table (the ``Process id``
    header or npu-smi's "No running processes found" lines). Output cut off before it says
    nothing about who holds NPU memory: an empty ``processes`` list is then unknown, not none."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return bool(_NO_PROCS.search(text)) or any(
        cell.strip().startswith("Process id")
        for line in text.splitlines()
        if line.strip().startswith("|")
        for cell in line.strip().strip("|").split("|")[1:]
    )


def _parse_info(lines: list[tuple[int, str]], source: str) -> dict:
    version: str | None = None
    layout = _Layout()
    rows: list[tuple[int, list[str]]] = []  # chip section data rows, in order
    proc_header: list[str] | None = None
    processes: list[dict] = []
    last_number = max((n for n, line in lines if line.strip()), default=0)

    for number, raw in lines:
        stripped = raw.strip()
        if not stripped or _is_rule(stripped) or not stripped.startswith("|"):
            continue  # rules, '...' elisions, prompts, [WARNING] lines
        if not stripped.endswith("|") or len(stripped) < 2:
            where = "is cut off inside" if number == last_number else "has"
            raise _err(
                source,
                f"line {number} {where} a table row without its closing '|': "
                "truncated or damaged output",
                "capture the complete `npu-smi info` output again",
            )
        cells = _cells(stripped)
        joined = " ".join(cells)
        if len(cells) == 1 and "Version:" in joined:
            after = joined.split("Version:", 1)[1].split()
            version = _null(after[0]) if after else None
            continue
        if any(cell.startswith("Process id") for cell in cells[1:]):
            proc_header = cells
            continue
        if "Health" in cells or "Bus-Id" in cells:
            if "Bus-Id" in cells:
                layout.has_hbm = "HBM-Usage" in joined
                layout.ddr_device = "Device" in cells[0].split()
            continue
        if len(cells) == 1 and _NO_PROCS.search(joined):
            continue
        if proc_header is not None:
            processes.append(_process_row(number, cells, proc_header, source))
        else:
            rows.append((number, cells))

    chips = _chips(rows, layout, source)
    if not chips:
        raise _err(
            source,
            "holds no NPU chip rows (a table header without devices: truncated output, "
            "or npu-smi found no NPU)",
            "check the driver with `npu-smi info` and capture the complete output",
        )
    return {"kind": "info", "version": version, "chips": chips, "processes": processes}


def _chips(rows: list[tuple[int, list[str]]], layout: _Layout, source: str) -> list[dict]:
    if len(rows) % 2:
        raise _err(
            source,
            f"line {rows[-1][0]}: an NPU row without its partner row (each chip prints a "
            "summary row and a detail row): truncated or damaged output",
            "capture the complete `npu-smi info` output again",
        )
    chips = [
        _chip(rows[i][0], rows[i][1], rows[i + 1][0], rows[i + 1][1], layout, source)
        for i in range(0, len(rows), 2)
    ]
    # Several chips per card (A3, 310P Duo, 310): each chip has its own chip id under the
    # NPU id, and its own Phy-ID (A3) or Device id (DDR layout) across the host.
    for key, what in (("phy_id", "Phy-ID"), ("logic_id", "Device id")):
        seen: dict[int, dict] = {}
        for c in chips:
            other = seen.setdefault(c[key], c) if c[key] is not None else c
            if other is not c:
                raise _err(
                    source,
                    f"{what} {c[key]} is printed for NPU {other['npu']} chip {other['chip']} "
                    f"and NPU {c['npu']} chip {c['chip']}: damaged or merged output",
                    "capture `npu-smi info` of one host again",
                )
    pairs: set[tuple[int, int]] = set()
    for c in chips:
        if (c["npu"], c["chip"]) in pairs:
            raise _err(
                source,
                f"NPU {c['npu']} chip {c['chip']} is printed twice: damaged or merged output",
                "capture `npu-smi info` of one host again",
            )
        pairs.add((c["npu"], c["chip"]))
    return chips


def _chip(
    n1: int, summary: list[str], n2: int, detail: list[str], layout: _Layout, source: str
) -> dict:
    if len(summary) >= 4 and len(detail) >= 4:
        # Ascend 950: | NPU ID | Name | Health | Power Temp Hugepages |
        #             |        |      | Bus-Id | NPU-Util Memory HBM  |
        npu_text, name = summary[0], summary[1]
        health, values = summary[2], summary[3]
        chip_tokens = (detail[0] + " " + detail[1]).split()
        bus, usage = detail[2], detail[3]
    elif len(summary) == 3 and len(detail) == 3:
        tokens = summary[0].split()
        npu_text, name = (tokens[0] if tokens else ""), " ".join(tokens[1:])
        health, values = summary[1], summary[2]
        chip_tokens = detail[0].split()
        bus, usage = detail[1], detail[2]
    else:
        raise _err(
            source,
            f"lines {n1}-{n2}: expected a chip's summary and detail rows with 3 cells each "
            f"(4 on Ascend 950), got {len(summary)} and {len(detail)}: damaged table",
            "capture `npu-smi info` again",
        )
    npu = _int(npu_text)
    if npu is None:
        raise _err(source, f"line {n1}: expected an NPU id, got {shown(summary[0])}")
    chip = 0  # 950 prints one chip per NPU and no chip id
    if chip_tokens:
        chip = _int(chip_tokens[0])  # type: ignore[assignment]
        if chip is None:
            raise _err(source, f"line {n2}: expected a chip id, got {shown(detail[0])}")
    # A3 prints the chip's global Phy-ID after the chip id; the DDR layout (310, 310P, 310B)
    # prints the chip's logic "Device" id there instead (/dev/davinciN, ASCEND_RT_VISIBLE_DEVICES).
    second = _int(chip_tokens[1]) if len(chip_tokens) > 1 else None
    phy_id = None if layout.ddr_device else second
    logic_id = second if layout.ddr_device else None

    pairs, rest = _pairs(values)
    hugepages: tuple[str | None, str | None] = pairs[0] if pairs else (None, None)
    upairs, urest = _pairs(usage)
    mem: tuple[str | None, str | None] = upairs[0] if upairs else (None, None)
    hbm: tuple[str | None, str | None] = upairs[1] if len(upairs) > 1 else (None, None)
    return {
        "npu": npu,
        "chip": chip,
        "phy_id": phy_id,
        "logic_id": logic_id,
        "name": _null(name),
        "health": _null(health),
        "power_w": _float(rest[0]) if rest else None,
        "temp_c": _float(rest[1]) if len(rest) > 1 else None,
        "aicore_pct": _float(urest[0]) if urest else None,
        "bus_id": _null(bus),
        "hbm_used_mb": _int(hbm[0]),
        "hbm_total_mb": _int(hbm[1]),
        "memory_used_mb": _int(mem[0]),
        "memory_total_mb": _int(mem[1]),
        "hugepages_used": _int(hugepages[0]),
        "hugepages_total": _int(hugepages[1]),
    }


def _process_row(number: int, cells: list[str], header: list[str], source: str) -> dict:
    def column(prefix: str) -> int | None:
        for i, title in enumerate(header):
            if title == prefix or (prefix != "Process id" and title.startswith(prefix)):
                return i
        return None

    ids = cells[0].split()
    npu = _int(ids[0]) if ids else None
    if npu is None:
        raise _err(
            source, f"line {number}: expected an NPU id in the process table, got {shown(cells[0])}"
        )
    chip = _int(ids[1]) if len(ids) > 1 else 0
    i_pid, i_name, i_mem = column("Process id"), column("Process name"), column("Process memory")
    pid = _int(cells[i_pid]) if i_pid is not None and i_pid < len(cells) else None
    if pid is None:
        raise _err(source, f"line {number}: expected a process id in the process table row")
    name = cells[i_name] if i_name is not None and i_name < len(cells) else None
    memory = cells[i_mem] if i_mem is not None and i_mem < len(cells) else None
    return {
        "npu": npu,
        "chip": chip if chip is not None else 0,
        "pid": pid,
        "name": _null(name),
        "memory_mb": _int(memory),
    }


# --------------------------------------------------------------------------- info -m


def _parse_map(lines: list[tuple[int, str]], source: str) -> dict:
    columns: list[str] | None = None
    rows = []
    for number, raw in lines:
        stripped = raw.strip()
        if not stripped:
            continue
        if columns is None:
            if _MAP_HEADER.match(stripped):
                columns = _map_columns(stripped)
            continue
        tokens = stripped.split()
        if len(tokens) < len(columns):
            raise _err(
                source,
                f"line {number}: expected {len(columns)} columns "
                f"({', '.join(columns)}), got {shown(stripped)}: truncated or damaged output",
                "capture `npu-smi info -m` again",
            )
        n_ids = len(columns) - 1  # every column but the last (Chip Name) is one token
        values = dict(zip(columns[:-1], tokens[:n_ids], strict=True))
        npu, chip = _int(values.get("NPU ID")), _int(values.get("Chip ID"))
        if npu is None or chip is None:
            raise _err(
                source, f"line {number}: expected numeric NPU ID and Chip ID, got {shown(stripped)}"
            )
        rows.append(
            {
                "npu": npu,
                "chip": chip,
                "logic_id": _int(values.get("Chip Logic ID")),
                "chip_name": " ".join(tokens[n_ids:]),
            }
        )
    if columns is None:
        raise _err(source, "has no `NPU ID ... Chip Name` header of `npu-smi info -m`")
    if not rows:
        raise _err(source, "lists no chips under the `npu-smi info -m` header (truncated?)")
    return {"kind": "map", "rows": rows}


def _map_columns(header: str) -> list[str]:
    """Column titles in order, matched against the known ones (whitespace-tolerant)."""
    normal = " ".join(header.split())
    found = []
    position = 0
    while position < len(normal):
        for title in sorted(_MAP_COLUMNS, key=len, reverse=True):
            if normal.startswith(title, position):
                found.append(title)
                position += len(title)
                break
        else:
            next_space = normal.find(" ", position)
            if next_space < 0:
                break
            position = next_space
        while position < len(normal) and normal[position] == " ":
            position += 1
    if not found or found[-1] != "Chip Name":
        found.append("Chip Name")
    return found


# --------------------------------------------------------------------------- Key : Value


def _kv_pairs(stripped: str) -> list[tuple[str, str]]:
    """``Key : Value`` (one per line) or ``K1:v1  K2:v2`` (``-t proc-mem``)."""
    if " : " not in stripped and _KV_INLINE_LINE.fullmatch(stripped):
        return [(k.strip(), v) for k, v in _KV_INLINE_PAIR.findall(stripped)]
    match = _KV.match(stripped)
    if not match:
        return []
    return [(match.group(1).strip(), match.group(2).strip())]


def _parse_kv(lines: list[tuple[int, str]], source: str) -> dict:
    """One record per ``NPU ID``; a leading ``Total Count`` line is a record of its own.

    Multi-chip outputs repeat keys under one NPU ID (``-t common``/``-t usages`` on a
    310P Duo, the MCU block of ``-t common``). A blank-line separated block whose keys
    are already in the current record therefore starts a new record that repeats the
    ``NPU ID``, so nothing is overwritten.
    """
    blocks: list[list[tuple[str, str]]] = [[]]
    for _number, raw in lines:
        stripped = raw.strip()
        if stripped[:1] in ("|", "+"):
            continue  # a table line is never Key : Value output
        if stripped:
            blocks[-1].extend(_kv_pairs(stripped))  # other lines: pasted prompts, comments
        elif blocks[-1]:
            blocks.append([])

    records: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    npu_id: str | None = None

    def start() -> dict[str, str]:
        record = {} if npu_id is None else {"NPU ID": npu_id}
        records.append(record)
        return record

    for block in blocks:
        head = []
        for key, _value in block:
            if key == "NPU ID":
                break
            head.append(key)
        if current is not None and any(key in current for key in head):
            current = start()
        for key, value in block:
            if key == "NPU ID":
                npu_id = value
                current = {}
                records.append(current)
            elif key in ("Total Count", "Card Count") and not records:
                records.append({key: value})
                continue
            elif current is None or key in current:
                current = start()
            current[key] = value
    if not records:
        raise _err(source, "holds no `Key : Value` lines of npu-smi output")
    return {"kind": "kv", "records": records}


# --------------------------------------------------------------------------- public API


def parse(text: str, kind: str | None = None, source: str = "-") -> dict:
    """Parse npu-smi output; ``kind`` is ``info``, ``map`` or ``kv`` (detected when None).

    Raises ``InputError`` naming ``source`` for empty, binary, truncated or unrecognised
    input.
    """
    lines = _lines(text, source)
    if kind is None:
        kind = _detect([line.strip() for _, line in lines if line.strip()], source)
    if kind == "info":
        return _parse_info(lines, source)
    if kind == "map":
        return _parse_map(lines, source)
    if kind == "kv":
        return _parse_kv(lines, source)
    raise InputError(f"unknown npu-smi output kind {shown(kind)}; use one of: {', '.join(KINDS)}")


def _resolve(binary: str) -> str:
    if os.sep in binary:
        if not os.path.exists(binary):
            raise InputError(
                f"{binary}: npu-smi not found at this path; the Ascend driver is not "
                "installed here or the path is wrong (in a container, mount "
                "/usr/local/bin/npu-smi from the host)"
            )
        if os.path.isdir(binary):
            raise InputError(
                f"{binary}: is a directory, not the npu-smi binary; pass the binary itself "
                f"(for example {os.path.join(binary, 'npu-smi')})"
            )
        if not os.access(binary, os.X_OK):
            raise InputError(
                f"{binary}: npu-smi is not an executable file; fix its mode "
                "(chmod 0755) or point at the real binary"
            )
        return binary
    found = shutil.which(binary)
    if found:
        return found
    for directory in FALLBACK_DIRS:
        candidate = os.path.join(directory, binary)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise CheckFailed(
        f"{binary}: not found on PATH or in {' or '.join(FALLBACK_DIRS)}; the Ascend NPU "
        "driver is not installed on this host, or (in a container) npu-smi is not mounted "
        "from the host (-v /usr/local/bin/npu-smi:/usr/local/bin/npu-smi)"
    )


def run_capped(
    argv: list[str],
    timeout: float,
    max_bytes: int = MAX_OUTPUT,
    max_err: int = 64 << 10,
    cwd: str | None = None,
) -> tuple[int, bytes, bytes]:
    """Run ``argv``: (exit status, stdout, the first ``max_err`` bytes of stderr).

    Both pipes are read as they fill, within one deadline on the monotonic clock. Raises
    ``subprocess.TimeoutExpired`` when it passes and ``OutputTooLarge`` beyond ``max_bytes``
    of stdout; either way the process and everything it started are killed. OSError when
    it cannot start.
    """
    deadline = time.monotonic() + timeout
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        cwd=cwd,
    )
    assert proc.stdout is not None and proc.stderr is not None
    out, err = bytearray(), bytearray()
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(argv, timeout)
            for key, _events in sel.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fileobj)
                elif key.data is out:
                    out += chunk
                    if len(out) > max_bytes:
                        raise OutputTooLarge(max_bytes)
                elif len(err) < max_err:
                    err += chunk[: max_err - len(err)]
        status = proc.wait(max(deadline - time.monotonic(), 0.01))
    except BaseException:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    finally:
        sel.close()
        proc.stdout.close()
        proc.stderr.close()
    return status, bytes(out), bytes(err)


class OutputTooLarge(Exception):
    """A command wrote more than the accepted number of bytes to stdout."""

    def __init__(self, limit: int):
        super().__init__(f"more than {limit >> 20} MiB of output")
        self.limit = limit


def run_npu_smi(args: list[str], binary: str = "npu-smi", timeout: float = 30) -> str:
    """Run ``npu-smi ARGS`` and return its stdout; ``CheckFailed``/``InputError`` otherwise.

    At most ``MAX_OUTPUT`` bytes are read (as ``parse`` accepts) within ``timeout``.
    """
    path = _resolve(binary)
    command = " ".join([os.path.basename(binary), *args])
    try:
        status, out, err = run_capped([path, *args], timeout)
    except subprocess.TimeoutExpired:
        raise CheckFailed(
            f"`{command}` did not finish within {timeout:g} s; the NPU driver or a device "
            "is hung (check `dmesg` and the driver logs in /var/log/npu)"
        ) from None
    except OutputTooLarge as exc:
        raise CheckFailed(
            f"`{command}` wrote {exc}, npu-smi prints a few KiB: {path} is not a working "
            "npu-smi (stopped it); check the binary and the driver installation"
        ) from None
    except OSError as exc:
        raise CheckFailed(f"`{command}` could not be started: {exc.strerror or exc}") from None
    stdout = out.decode("utf-8", errors="replace")
    if status != 0:
        detail = err.decode("utf-8", errors="replace").strip() or stdout.strip()
        detail = " ".join(detail.split())[:400] or "no output"
        raise CheckFailed(
            f"`{command}` exited with status {status}: {detail}; the driver is "
            "installed but the devices are not usable (check `dmesg`, reload the driver or "
            "reboot after a firmware upgrade)"
        )
    return stdout
