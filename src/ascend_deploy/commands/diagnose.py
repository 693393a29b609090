"""``ascend-deploy diagnose [FILE|-]``: the root cause of a vLLM-Ascend failure, from its log."""

from __future__ import annotations

import argparse
import os
import sys

from ..cli import emit
from ..diagnosis.engine import DEFAULT_MAX_MB, DEFAULT_MAX_SECONDS, diagnose_file, render
from .argtypes import positive_float, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        nargs="?",
        default="-",
        metavar="FILE",
        help="container log, journal or captured start-up output (- or omitted: standard input; "
        "gzip is decompressed)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--max-mb",
        type=positive_int,
        default=DEFAULT_MAX_MB,
        metavar="MB",
        help=f"stop after this much (decompressed) log text (default {DEFAULT_MAX_MB})",
    )
    parser.add_argument(
        "--max-seconds",
        type=positive_float,
        default=DEFAULT_MAX_SECONDS,
        metavar="S",
        help=f"stop after this many seconds, waits for input included "
        f"(default {DEFAULT_MAX_SECONDS:g})",
    )


STDIN_HINT = (
    "ascend-deploy diagnose: reading the log from the terminal: paste it and end with Ctrl-D "
    "(at most {seconds:g} s, --max-seconds), or give a file: ascend-deploy diagnose FILE"
)


def run(args: argparse.Namespace) -> int:
    """Exit 0 with or without findings (the report is the answer); 2 for unreadable input or a
    log beyond the caps."""
    if args.file == "-" and _stdin_is_terminal():
        print(STDIN_HINT.format(seconds=args.max_seconds), file=sys.stderr, flush=True)
    result = diagnose_file(args.file, max_mb=args.max_mb, max_seconds=args.max_seconds)
    emit(result, args.json, render)
    return 0


def _stdin_is_terminal() -> bool:
    try:
        return os.isatty(sys.stdin.fileno())
    except (AttributeError, ValueError, OSError):
        return False
