"""``ascend-deploy npu-smi``: parse saved npu-smi output or show this host's NPUs."""

from __future__ import annotations

import argparse
from typing import Any

from ..cli import emit
from ..errors import InputError, describe_path
from ..host.npu_smi import KINDS, MAX_OUTPUT, lists_processes, parse, run_npu_smi
from ..reporting.tables import cell, key_values
from ..reporting.tables import render as render_table
from ..stdin import read_stdin
from .argtypes import positive_seconds

_SHOW_ARGS = {"info": ["info"], "map": ["info", "-m"], "kv": ["info", "-l"]}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    p_parse = actions.add_parser(
        "parse",
        help="parse saved npu-smi output (info table, info -m, or Key : Value output)",
        description="Parse saved npu-smi output. The kind is detected when --kind is omitted.",
    )
    p_parse.add_argument(
        "file",
        nargs="?",
        default="-",
        metavar="FILE",
        help="file with npu-smi output, or - for standard input (default)",
    )
    p_parse.add_argument("--kind", choices=KINDS, help="info (table), map (info -m), kv (-l, -t)")
    p_parse.add_argument("--json", action="store_true", help="print JSON")

    p_show = actions.add_parser(
        "show",
        help="run npu-smi on this host and show its NPUs",
        description="Run `npu-smi info` (or `info -m` / `info -l`) on this host and show it.",
    )
    p_show.add_argument(
        "--kind",
        choices=KINDS,
        default="info",
        help="info (default): `npu-smi info`; map: `info -m`; kv: `info -l`",
    )
    p_show.add_argument(
        "--npu-smi",
        dest="npu_smi",
        default="npu-smi",
        metavar="PATH",
        help="npu-smi binary (default: npu-smi on PATH, /usr/local/{bin,sbin})",
    )
    p_show.add_argument(
        "--timeout",
        type=positive_seconds,
        default=30.0,
        metavar="SECONDS",
        help="give up after this many seconds (default 30)",
    )
    p_show.add_argument("--json", action="store_true", help="print JSON")


# What each kind is, for a hint when --kind names the wrong one.
KIND_OUTPUT = {"info": "`npu-smi info`", "map": "`npu-smi info -m`", "kv": "Key : Value"}


def _parse(raw: bytes | str, kind: str | None, source: str) -> dict:
    """``parse``; when a given ``kind`` fails but the text is another kind, say which."""
    try:
        return parse(raw, kind=kind, source=source)  # type: ignore[arg-type]
    except InputError as exc:
        if kind is None:
            raise
        try:
            other = parse(raw, kind=None, source=source)["kind"]
        except InputError:
            raise exc from None
        if other == kind:
            raise
        raise InputError(
            f"{exc}; this looks like {KIND_OUTPUT[other]} output: use --kind {other} or drop --kind"
        ) from None


MAX_BYTES = MAX_OUTPUT  # npu-smi output is a few KiB; refuse to slurp huge or endless files


def _read(path: str) -> bytes:
    try:
        if path == "-":
            data = read_stdin("npu-smi output", MAX_BYTES + 1)
        else:
            with open(path, "rb") as fh:
                data = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file; pass a file holding npu-smi output") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a file with npu-smi output") from None
    except OSError as exc:
        raise InputError(f"{describe_path(path)}: cannot read: {exc.strerror}") from None
    if len(data) > MAX_BYTES:
        raise InputError(
            f"{describe_path(path)}: larger than 8 MiB; not npu-smi output (pass the saved "
            "output of one npu-smi command)"
        )
    return data


def run(args: argparse.Namespace) -> int:
    if args.action == "parse":
        raw = _read(args.file)
        result = _parse(raw, args.kind, args.file)
    else:
        argv = _SHOW_ARGS[args.kind]
        raw = run_npu_smi(argv, binary=args.npu_smi, timeout=args.timeout)
        result = parse(raw, kind=args.kind, source=f"`npu-smi {' '.join(argv)}` output")
    listed = result["kind"] != "info" or lists_processes(raw)
    emit(result, args.json, lambda r: render(r, processes_listed=listed))
    return 0


# --------------------------------------------------------------------------- human output


def _pair(used: Any, total: Any) -> str:
    return "-" if used is None and total is None else f"{cell(used)} / {cell(total)}"


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """Left-aligned text table, two spaces between columns."""
    return "\n".join(render_table(headers, rows))


def render(result: dict, processes_listed: bool = True) -> str:
    """Readable text for one parse result (``processes_listed``: the input had the process
    table, so an empty one means no holders)."""
    kind = result["kind"]
    if kind == "info":
        chips = result["chips"]
        head = (
            f"npu-smi info: driver {result['version'] or 'unknown'}, "
            f"{len({c['npu'] for c in chips})} NPU(s), {len(chips)} chip(s)"
        )
        chip_rows = [
            [
                c["npu"],
                c["chip"],
                c["phy_id"],
                c["name"],
                c["health"],
                f"{c['power_w']:.1f}" if isinstance(c["power_w"], (int, float)) else c["power_w"],
                c["temp_c"],
                c["aicore_pct"],
                c["bus_id"],
                _pair(c["hbm_used_mb"], c["hbm_total_mb"]),
                _pair(c["memory_used_mb"], c["memory_total_mb"]),
                _pair(c["hugepages_used"], c["hugepages_total"]),
            ]
            for c in chips
        ]
        parts = [
            head,
            "",
            table(
                [
                    "NPU",
                    "CHIP",
                    "PHY",
                    "NAME",
                    "HEALTH",
                    "POWER(W)",
                    "TEMP(C)",
                    "AICORE(%)",
                    "BUS-ID",
                    "HBM(MB)",
                    "MEMORY(MB)",
                    "HUGEPAGES",
                ],
                chip_rows,
            ),
        ]
        parts.append("")
        if not processes_listed:
            parts.append(
                "Processes: not in the input (it ends before npu-smi's process table): "
                "NPU memory holders unknown."
            )
        elif result["processes"]:
            parts.append(
                table(
                    ["NPU", "CHIP", "PID", "PROCESS", "MEMORY(MB)"],
                    [
                        [p["npu"], p["chip"], p["pid"], p["name"], p["memory_mb"]]
                        for p in result["processes"]
                    ],
                )
            )
        else:
            parts.append("No processes hold NPU memory.")
        return "\n".join(parts)
    if kind == "map":
        return table(
            ["NPU", "CHIP", "LOGIC-ID", "CHIP-NAME"],
            [[r["npu"], r["chip"], r["logic_id"], r["chip_name"]] for r in result["rows"]],
        )
    blocks = []
    for record in result["records"]:
        blocks.append("\n".join(key_values(record)))
    return "\n\n".join(blocks)
