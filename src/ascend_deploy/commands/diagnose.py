"""``ascend-deploy diagnose [FILE|-]``: the root cause of a vLLM-Ascend failure, from its log."""

from __future__ import annotations

import argparse

from ..cli import emit
from ..diagnose import diagnose_file, render


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        nargs="?",
        default="-",
        metavar="FILE",
        help="container log, journal or captured start-up output (- or omitted: standard input; "
        ".gz is decompressed)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    """Exit 0 with or without findings (the report is the answer); 2 for unreadable input."""
    result = diagnose_file(args.file)
    emit(result, args.json, render)
    return 0
