"""``ascend-deploy convert SRC DST``: block-FP8 checkpoint -> BF16 (or FP16), once, offline."""

from __future__ import annotations

import argparse
import os

from ..cli import emit


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("src", metavar="SRC", help="FP8 Hugging Face model directory (read only)")
    parser.add_argument(
        "dst", metavar="DST", help="output directory for the BF16 (or --dtype float16) model"
    )
    parser.add_argument(
        "--dtype",
        choices=("bfloat16", "float16"),
        default="bfloat16",
        help="output dtype (default: bfloat16); float16 for Atlas 300I Duo (310P), which has "
        "no BF16: FP8 weights are rounded once to FP16 and BF16 tensors become FP16; a value "
        "beyond FP16's range (65504) is refused",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help=f"parallel worker threads (default: number of cores, {os.cpu_count()})",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="re-read the output: all names, shapes and dtypes, and a sample of tiles",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace a DST that is not an earlier conversion of SRC",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress display on stderr")


def _human(result: dict) -> str:
    status = result["status"]
    if status == "not-needed":
        return result["message"]
    if status == "up-to-date":
        lines = [result["message"]]
    else:
        seconds = result["seconds"]
        rate = result["bytes_written"] / seconds / 1e6 if seconds else 0.0
        lines = [
            f"converted {result['src']} -> {result['dst']}",
            f"  tensors: {result['tensors_in']} in, {result['tensors_out']} out "
            f"({result['fp8_tensors']} FP8 weights dequantized to "
            f"{'FP16' if result.get('dtype') == 'float16' else 'BF16'}, scales dropped)",
            f"  total_size: {result['total_size']:,} bytes; written {result['bytes_written']:,} "
            f"bytes in {seconds:.1f}s ({rate:.0f} MB/s, workers: {result['workers']})",
        ]
        if result.get("replaced"):
            lines.append(f"  replaced the previous ({result['replaced']}) contents of DST")
    if result.get("verified"):
        v = result["verify"]
        lines.append(
            f"  verified: {v['tensors']} tensors, {v['tiles']} FP8 tiles, "
            f"{v['copied_ranges']} copied ranges match the source"
        )
    if result.get("ignored_tensors"):
        lines.append(
            f"  note: {len(result['ignored_tensors'])} tensors present in shards but not in the "
            "index were not copied"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from ..errors import InputError
    from ..fp8.convert import convert_checkpoint
    from ..fp8.progress import ProgressDisplay

    if args.workers is not None and args.workers < 1:
        raise InputError(f"--workers must be at least 1, got {args.workers}")
    progress = None if args.no_progress else ProgressDisplay()
    result = convert_checkpoint(
        args.src,
        args.dst,
        workers=args.workers,
        verify=args.verify,
        force=args.force,
        progress=progress,
        dtype=args.dtype,
    )
    emit(result, args.json, _human)
    return 0
