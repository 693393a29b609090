"""The non-weight files of a model directory (tokenizer, generation config, licence, code)."""

from __future__ import annotations

import os
import shutil

from ..model.files import INDEX_NAME

MANIFEST_NAME = "ascend-deploy-fp8-manifest.json"
# Local download caches (huggingface-cli / modelscope) are not part of the model.
SKIP_DIRS = {".cache", ".git", "__pycache__"}


def other_files(model_dir: str, shards: list[str]) -> list[str]:
    """Relative paths of regular files to copy unchanged, sorted.

    Excludes the weight shards, the index, ``config.json`` (rewritten) and our manifest.
    Symlinks (Hugging Face cache snapshots) are followed.
    """
    skip = {*shards, INDEX_NAME, "config.json", MANIFEST_NAME}
    found: list[str] = []
    for root, dirs, names in os.walk(model_dir, followlinks=True):
        rel_root = os.path.relpath(root, model_dir)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in names:
            rel = name if rel_root == "." else os.path.join(rel_root, name)
            if rel in skip or not os.path.isfile(os.path.join(root, name)):
                continue
            found.append(rel)
    return sorted(found)


def copy_file(src: str, dst: str) -> int:
    """Copy one file's bytes (following symlinks) and fsync it; returns its size."""
    os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
        fout.flush()
        os.fsync(fout.fileno())
        return fout.tell()
