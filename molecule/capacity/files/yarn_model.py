"""Write a sparse Qwen3-8B BF16 checkpoint with YaRN enabled, and its SHA256SUMS manifest.

Runs on the simulated host (``PYTHONPATH=/opt/ascend-sim/src``). The shards are sparse
(``ascend_sim.checkpoints``, ``data="sparse"``: real headers, the data a hole), so 16 GB of
weights cost no disk. config.json gets the ``rope_scaling`` Qwen's model cards give for
contexts up to 131,072 tokens. SHA256SUMS holds the real sha256 of every file (the hole reads
as zeros), as ``sha256sum *`` would write it; model_weights verifies the staged model against it.

    python3 yarn_model.py DIR        # prints "changed" or "unchanged"
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

from ascend_sim.checkpoints import QWEN3_YARN_ROPE_SCALING, with_yarn, write_checkpoint

MANIFEST = "SHA256SUMS"


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def main(out: str) -> str:
    cfg_path = os.path.join(out, "config.json")
    if os.path.isfile(os.path.join(out, MANIFEST)) and os.path.isfile(cfg_path):
        with open(cfg_path, encoding="utf-8") as fh:
            if json.load(fh).get("rope_scaling") == QWEN3_YARN_ROPE_SCALING:
                return "unchanged"
    write_checkpoint(out, with_yarn("qwen3-8b"), fp8=False, data="sparse")
    names = [
        name
        for name in sorted(os.listdir(out))
        if os.path.isfile(os.path.join(out, name)) and not name.startswith(".") and name != MANIFEST
    ]
    # hashlib releases the GIL on large updates: two threads use both cores.
    with ThreadPoolExecutor(2) as pool:
        sums = list(pool.map(lambda name: sha256_of(os.path.join(out, name)), names))
    lines = [f"{digest}  {name}" for digest, name in zip(sums, names, strict=True)]
    with open(os.path.join(out, MANIFEST), "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    return "changed"


if __name__ == "__main__":
    print(main(sys.argv[1]))
