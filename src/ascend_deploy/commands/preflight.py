"""``ascend-deploy preflight``: every host check in one report (exit 0 ok, 1 failed, 2 input)."""

from __future__ import annotations

import argparse

from ..cli import emit
from ..host.procs import load_npu_info
from ..planning.compat import HARDWARE, matrix_with_site
from ..planning.preflight import render_table, run_preflight
from ..planning.rules import load_rules
from .argtypes import add_matrix_argument, non_negative_int
from .procs import _port


def npu_id_list(text: str) -> list[int]:
    """``4,5,6,7``: the NPU ids (npu-smi's NPU column) a service would use."""
    return [non_negative_int(part.strip()) for part in text.split(",")]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", default="/", metavar="DIR", help="prefix for every path")
    parser.add_argument("--port", type=_port, metavar="P", help="port the server will use")
    parser.add_argument("--model-dir", metavar="DIR", help="model to plan for this host")
    parser.add_argument("--service", metavar="NAME", help="our service (see procs)")
    parser.add_argument("--hardware", choices=HARDWARE, help="default: from the chip names")
    parser.add_argument(
        "--npus",
        type=npu_id_list,
        metavar="IDS",
        help="NPU ids the service would use, e.g. 4,5,6,7 (default: all); memory judged on these",
    )
    parser.add_argument("--python", metavar="PATH", help="serving interpreter to check")
    parser.add_argument(
        "--vllm-ascend",
        metavar="VERSION",
        help="release that will serve, e.g. v0.23.0: its memory model and HDK needs",
    )
    parser.add_argument(
        "--enforce-eager", action="store_true", help="the service runs eager (no graph capture)"
    )
    parser.add_argument(
        "--npu-smi-file", metavar="FILE", help="saved `npu-smi info` output (- = stdin)"
    )
    add_matrix_argument(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")


def render(result: dict) -> str:
    counts = {s: sum(c["status"] == s for c in result["checks"]) for s in ("ok", "warn", "fail")}
    verdict = "PASS" if result["ok"] else "FAIL"
    summary = (
        f"preflight {verdict} ({result['hardware']}): {counts['ok']} ok, "
        f"{counts['warn']} warn, {counts['fail']} fail"
    )
    return render_table(result["checks"]) + "\n\n" + summary


def run(args: argparse.Namespace) -> int:
    matrix = matrix_with_site(args.matrix)  # a bad --matrix is exit 2 before any probe
    npu_info = None  # run_preflight runs npu-smi itself
    if args.npu_smi_file is not None:
        npu_info, _none = load_npu_info(args.npu_smi_file)
    result = run_preflight(
        root=args.root,
        port=args.port,
        model_dir=args.model_dir,
        npu_info=npu_info,
        service=args.service,
        hardware=args.hardware,
        npus=args.npus,
        python=args.python,
        matrix=matrix,
        rules=load_rules(),
        vllm_ascend=args.vllm_ascend,
        enforce_eager=args.enforce_eager,
    )
    emit(result, args.json, render)
    return 0 if result["ok"] else 1
