"""sha256 of files and the check of a model directory against a ``SHA256SUMS`` manifest.

The manifest is what ``sha256sum * > SHA256SUMS`` writes inside the model directory: one
``<sha256>  <relative path>`` line per file (``*`` binary markers accepted). Files whose size
and mtime match an earlier successful check, recorded in ``<dir>/.ascend-deploy-verified.json``,
are not hashed again, so a second deploy run is fast. The converter hashes its source files
with :func:`sha256_file` too. Standard library only (Ansible ships it with ``ascend_manifest``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable

from ..errors import CheckFailed, InputError

RECORD = ".ascend-deploy-verified.json"
LINE = re.compile(r"^([0-9a-fA-F]{64}) [ *](.+)$")
BLOCK = 4 << 20  # bytes per sha256 update


class ChecksumMismatch(CheckFailed):
    """Files differ from the manifest or are missing; ``problems`` names each (one per file)."""

    def __init__(self, message: str, problems: list[str]) -> None:
        super().__init__(message)
        self.problems = problems


def sha256_file(path: str, block: int = BLOCK, check: Callable[[], None] | None = None) -> str:
    """Hex sha256 of a file, read in ``block``-byte steps; ``check()`` runs before each step
    (the converter's stop flag raises from there)."""
    digest = hashlib.sha256()
    buf = bytearray(block)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while True:
            if check is not None:
                check()
            n = fh.readinto(buf)
            if not n:
                return digest.hexdigest()
            digest.update(view[:n])


def manifest_path(root: str, manifest: str) -> str:
    """The manifest's path: a relative one is taken inside the model directory."""
    return manifest if os.path.isabs(manifest) else os.path.join(root, manifest)


def read_sums(path: str) -> dict[str, str]:
    """Map relative path -> sha256; InputError naming the line on anything else."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise InputError(
            f"manifest {path} not found; create it in the model directory with "
            "'sha256sum * > SHA256SUMS' (or set model_weights_manifest)"
        ) from None
    except OSError as exc:
        raise InputError(f"manifest {path}: cannot read: {exc.strerror}") from None
    return parse_sums(raw, path)


def parse_sums(raw: bytes, path: str) -> dict[str, str]:
    """Map relative path -> sha256 of a manifest's bytes (``path`` names it in errors)."""
    try:
        if b"\x00" in raw:
            raise UnicodeDecodeError("utf-8", raw, 0, 1, "NUL byte")
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"manifest {path} is not text (binary content); regenerate it") from None
    entries: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        match = LINE.match(line.strip())
        if not match:
            raise InputError(
                f"manifest {path} line {number} is not '<sha256>  <file>': {line[:60]!r}; "
                "regenerate it with sha256sum"
            )
        rel = os.path.normpath(match.group(2))
        if rel.startswith("..") or os.path.isabs(rel):
            raise InputError(f"manifest {path} line {number}: path {rel!r} leaves the directory")
        entries[rel] = match.group(1).lower()
    if not entries:
        raise InputError(f"manifest {path} is empty; regenerate it with sha256sum")
    return entries


def _read_record(root: str) -> dict:
    try:
        with open(os.path.join(root, RECORD), encoding="utf-8") as fh:
            record = json.load(fh)
    except (OSError, ValueError, RecursionError):
        return {}
    return record if isinstance(record, dict) else {}


def verify_dir(
    root: str, manifest: str = "SHA256SUMS", use_cache: bool = True, record: bool = True
) -> dict:
    """Check every file of the manifest in ``root``.

    Returns ``{"files", "hashed", "bytes", "warnings"}`` (files checked, files hashed in this
    call, their total size, warnings for the operator). Raises ChecksumMismatch naming every
    missing or different file, InputError for a missing directory or a bad manifest. With
    ``record`` (not in check mode) the checked files are recorded for the next call.
    """
    if not os.path.isdir(root):
        raise InputError(f"model directory {root} does not exist; stage the weights first")
    path = manifest_path(root, manifest)
    entries = read_sums(path)
    known = _read_record(root) if use_cache else {}
    checked: dict[str, list] = {}
    problems: list[str] = []
    hashed = total = 0
    for rel, want in sorted(entries.items()):
        full = os.path.join(root, rel)
        try:
            st = os.stat(full)
        except FileNotFoundError:
            problems.append(f"{full}: missing")
            continue
        total += st.st_size
        stamp = [want, st.st_size, st.st_mtime_ns]
        if use_cache and known.get(rel) == stamp:
            checked[rel] = stamp
            continue
        got = sha256_file(full)
        hashed += 1
        if got != want:
            problems.append(f"{full}: sha256 {got[:16]}... != manifest {want[:16]}...")
        else:
            checked[rel] = stamp
    if problems:
        raise ChecksumMismatch(
            f"{len(problems)} file(s) in {root} do not match {path}: "
            + "; ".join(problems[:5])
            + ". Fix: re-stage the model (delete the bad files and re-run) or fix the manifest",
            problems,
        )
    warnings: list[str] = []
    if hashed and record:
        try:
            with open(os.path.join(root, RECORD), "w", encoding="utf-8") as fh:
                json.dump(checked, fh, sort_keys=True)
        except OSError:
            warnings.append(f"could not record the verification in {root}; next run hashes again")
    return {"files": len(checked), "hashed": hashed, "bytes": total, "warnings": warnings}
