"""The conversion manifest written into DST (standard library only).

It records which source files (size, mtime, sha256) and which converter version produced
the output, so a repeated conversion of an unchanged source is a no-op, a changed source
is converted again, and a DST that is not our output is never overwritten by accident.
"""

from __future__ import annotations

import json
import os
import time

from .. import __version__
from ..model.checksums import sha256_file
from . import CONVERTER_VERSION
from .files import MANIFEST_NAME

KIND = "ascend-deploy fp8-to-bf16"
# The kind of each output dtype. A BF16 manifest is exactly what it was before FP16 output
# existed (no dtype key), so earlier BF16 outputs stay up to date; an FP16 manifest has its
# own kind (an older converter sees a foreign directory, never a BF16 output) and records
# ``output_dtype: float16``.
KINDS = {"bfloat16": KIND, "float16": "ascend-deploy fp8-to-fp16"}


def dtype_fields(dtype: str) -> dict:
    """The manifest fields that depend on the output dtype (``kind``, ``output_dtype``)."""
    if dtype == "bfloat16":
        return {"kind": KIND}
    return {"kind": KINDS[dtype], "output_dtype": dtype}


def manifest_dtype(doc: dict) -> str:
    """The output dtype a manifest read by ``read_manifest`` records."""
    return "bfloat16" if doc.get("kind") == KIND else str(doc.get("output_dtype"))


def stat_entry(path: str) -> dict:
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def build_manifest(
    src_dir: str,
    source: dict[str, dict],
    outputs: dict[str, int],
    dtype: str = "bfloat16",
    **extra,
) -> dict:
    """Manifest document; ``source`` maps relative names to size/mtime_ns/sha256."""
    return {
        **dtype_fields(dtype),
        "converter_version": CONVERTER_VERSION,
        "ascend_deploy_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "source_dir": os.path.realpath(src_dir),
        "source_files": source,
        "output_files": {name: {"size": size} for name, size in sorted(outputs.items())},
        **extra,
    }


def read_manifest(dst_dir: str) -> dict | None:
    """The manifest in ``dst_dir``, or None if there is none or it is not ours/readable."""
    try:
        with open(os.path.join(dst_dir, MANIFEST_NAME), encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("kind") not in KINDS.values():
        return None
    if doc["kind"] != KIND and doc.get("output_dtype") not in KINDS:
        return None
    if not isinstance(doc.get("source_files"), dict):
        return None
    return doc


def dst_state(src_dir: str, dst_dir: str, source_names: list[str], dtype: str = "bfloat16") -> str:
    """Relation of ``dst_dir`` to a conversion of ``src_dir`` to ``dtype``.

    ``absent`` (missing or empty directory), ``up-to-date`` (our output of these exact
    source files in this dtype, complete), ``stale`` (our output of this source, but the
    source, the converter, the dtype or the output changed), ``foreign`` (anything else:
    refuse without --force).
    Sizes and mtimes are compared first; a file whose mtime changed is re-hashed.
    """
    if not os.path.exists(dst_dir):
        return "absent"
    if not os.path.isdir(dst_dir):
        return "foreign"
    if not os.listdir(dst_dir):
        return "absent"
    doc = read_manifest(dst_dir)
    if doc is None:
        return "foreign"
    recorded: dict = doc["source_files"]
    same_dir = doc.get("source_dir") == os.path.realpath(src_dir)
    if sorted(recorded) != sorted(source_names):
        return "stale" if same_dir else "foreign"
    for name in source_names:
        entry = recorded.get(name)
        path = os.path.join(src_dir, name)
        if not isinstance(entry, dict):
            return "stale" if same_dir else "foreign"
        try:
            now = stat_entry(path)
        except OSError:
            return "stale" if same_dir else "foreign"
        if now["size"] != entry.get("size"):
            return "stale" if same_dir else "foreign"
        if now["mtime_ns"] != entry.get("mtime_ns") and sha256_file(path) != entry.get("sha256"):
            return "stale" if same_dir else "foreign"
    if doc.get("converter_version") != CONVERTER_VERSION or manifest_dtype(doc) != dtype:
        return "stale"
    outputs = doc.get("output_files")
    if not isinstance(outputs, dict):
        return "stale"
    for name, entry in outputs.items():
        path = os.path.join(dst_dir, name)
        if not os.path.isfile(path) or os.path.getsize(path) != (entry or {}).get("size"):
            return "stale"
    return "up-to-date"
