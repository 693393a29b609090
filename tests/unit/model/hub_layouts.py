"""Hub download layouts built from a real model directory, as the hub clients leave them.

Hugging Face cache (huggingface_hub file_download: blobs named by sha256 for LFS files and
by git blob id otherwise, snapshot links, refs/main), Hugging Face --local-dir
(huggingface_hub _local_folder: .cache/huggingface/download/<file>.metadata with commit,
etag, timestamp), ModelScope (modelscope hub/utils/caching.py: .msc / .mdl / .mv beside the
files). Which files are LFS follows the hub's default .gitattributes (*.safetensors).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def is_lfs(name: str) -> bool:
    return name.endswith(".safetensors")


def hf_cache(model: Path, root: Path, repo: str = "models--Qwen--Tiny") -> Path:
    """``root/<repo>`` as ``huggingface-cli download`` fills the cache; returns the repo dir."""
    base = root / repo
    (base / "blobs").mkdir(parents=True)
    (base / "refs").mkdir()
    (base / "refs" / "main").write_text(COMMIT)
    snap = base / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    for f in sorted(model.iterdir()):
        data = f.read_bytes()
        name = hashlib.sha256(data).hexdigest() if is_lfs(f.name) else git_blob_id(data)
        (base / "blobs" / name).write_bytes(data)
        os.symlink(f"../../blobs/{name}", snap / f.name)
    return base


def hf_local_dir(model: Path, dest: Path) -> Path:
    """``dest`` as ``huggingface-cli download ... --local-dir dest`` leaves it."""
    shutil.copytree(model, dest)
    meta = dest / ".cache" / "huggingface" / "download"
    meta.mkdir(parents=True)
    (dest / ".cache" / "huggingface" / ".gitignore").write_text("*\n")
    stamp = time.time() + 5  # written after the file, as the client does
    for f in sorted(model.iterdir()):
        data = f.read_bytes()
        etag = hashlib.sha256(data).hexdigest() if is_lfs(f.name) else git_blob_id(data)
        (meta / f"{f.name}.metadata").write_text(f"{COMMIT}\n{etag}\n{stamp}\n")
        (meta / f"{f.name}.lock").write_text("")
    return dest


def modelscope_dir(model: Path, dest: Path) -> Path:
    """``dest`` as ``modelscope download`` leaves it (its pickled index is opaque bytes here)."""
    shutil.copytree(model, dest)
    (dest / ".msc").write_bytes(b"\x80\x04\x95opaque pickle, never loaded")
    (dest / ".mdl").write_bytes(b"\x80\x04\x95")
    (dest / ".mv").write_text("Revision:master,CreatedAt:1700000000")
    return dest
