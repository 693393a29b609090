"""``ascend-deploy manifest DIR``: write the SHA256SUMS the bundle checks, or check one.

DIR may be a plain directory or a hub download (``model.hub``: Hugging Face cache or
``--local-dir``, ModelScope); sha256s come from the hub's metadata where it is on disk and
are computed otherwise, and the output says which. Exit 0 written / all files match, 1 a
file differs or is missing, 2 bad input.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..cli import emit
from ..errors import InputError
from ..model.checksums import read_sums, verify_dir
from ..model.hub import MANIFEST, manifest_entries, model_files, resolve, write_manifest
from ..model.staging import human


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", metavar="DIR", help="the model directory (or hub download)")
    parser.add_argument(
        "--output",
        metavar="FILE",
        help=f"where the manifest goes (default: DIR/{MANIFEST}, as the bundle expects it)",
    )
    parser.add_argument(
        "--check", action="store_true", help="only check the existing manifest; never write"
    )
    parser.add_argument(
        "--rewrite", action="store_true", help="write a new manifest over an existing one"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def _say_hashing(rel: str, size: int) -> None:
    if size >= 64 << 20:
        print(f"hashing {rel} ({human(size)})", file=sys.stderr, flush=True)


def render(result: dict) -> str:
    if result["action"] == "checked":
        text = (
            f"{result['manifest']}: all {result['files']} file(s) match "
            f"({result['hashed']} hashed, {human(result['bytes'])})"
        )
        if result["unlisted"]:
            text += (
                f"\nnot in the manifest (not checked, not staged as verified): "
                f"{', '.join(result['unlisted'][:10])}; --rewrite to include them"
            )
        return text
    return (
        f"wrote {result['manifest']}: {result['files']} file(s), {human(result['bytes'])}; "
        f"{result['origin']}"
    )


def run(args: argparse.Namespace) -> int:
    source = resolve(args.dir)
    manifest = args.output or os.path.join(source.dir, MANIFEST)
    exists = os.path.exists(manifest)
    if args.check and not exists:
        raise InputError(f"{manifest} not found; write it with `ascend-deploy manifest {args.dir}`")
    if exists and not args.rewrite:
        path = os.path.abspath(manifest)
        checked = verify_dir(source.dir, path, use_cache=False, record=False)
        listed = set(read_sums(path))
        result = {"action": "checked", "manifest": manifest, "layout": source.layout, **checked}
        result["unlisted"] = [f for f in model_files(source.dir) if f not in listed]
        result.pop("warnings", None)
        emit(result, args.json, render)
        return 0
    made = manifest_entries(source, on_hash=None if args.json else _say_hashing)
    write_manifest(manifest, made["entries"])
    result = {
        "action": "written",
        "manifest": manifest,
        "dir": source.dir,
        "layout": source.layout,
        "revision": source.revision,
        "files": len(made["entries"]),
        "bytes": made["bytes"],
        "from_hub": made["from_hub"],
        "hashed": made["hashed"],
        "origin": made["origin"],
    }
    emit(result, args.json, render)
    return 0
