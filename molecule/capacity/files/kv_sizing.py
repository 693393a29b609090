"""Choose a gpu_memory_utilization whose KV cache holds exactly N max-length sequences.

Used by molecule/capacity (pitfall 6): on a 32 GB card the tiny test model's KV cache would hold
millions of tokens, so the case lowers ``--gpu-memory-utilization`` until the planner's own
memory model (``ascend_deploy.memory_model``) leaves room for ``--seqs`` sequences of
``--max-model-len`` tokens, no more. The result is checked against ``ascend_deploy.plan``:
the planner must size ``max_num_seqs`` to exactly ``--seqs``.

    python kv_sizing.py --model-dir DIR --hbm-total-mb 32768 --hbm-used-mb 3200 \
        --max-model-len 4096 --seqs 3        # prints one JSON object
"""

from __future__ import annotations

import argparse
import json
import sys

from ascend_deploy.errors import AscendDeployError
from ascend_deploy.memory_model import DEFAULT_MODEL, MIB
from ascend_deploy.model_info import inspect_model
from ascend_deploy.plan import make_plan


def utilization_for(
    model_dir: str, hbm_total_mb: int, hbm_used_mb: int, max_model_len: int, seqs: int
) -> dict:
    """The utilization, and the plan it gives; ValueError when no utilization gives ``seqs``."""
    mm = DEFAULT_MODEL
    facts = inspect_model(model_dir)
    if max_model_len % mm.block_size:
        raise ValueError(f"max_model_len {max_model_len} is not a multiple of {mm.block_size}")
    per_block = mm.kv_bytes_per_token_per_npu(facts, 1) * mm.block_size
    blocks = seqs * max_model_len // mm.block_size
    kv_mb = -(-blocks * per_block // MIB)  # the smallest whole-MB budget holding the blocks
    if kv_mb * MIB // per_block != blocks:
        raise ValueError(
            f"no whole-MB KV budget holds exactly {blocks} blocks of {per_block} bytes"
        )
    # Everything the budget subtracts besides the KV cache, at utilization 1.0.
    full = mm.budget(facts, hbm_total_mb, hbm_used_mb, 1.0, 1, False, seqs)
    overhead = hbm_total_mb - full["kv_budget_mb"]
    usable = overhead + kv_mb
    util = round((usable + 0.5) / hbm_total_mb, 6)
    if int(hbm_total_mb * util) != usable:
        raise ValueError(f"utilization {util} does not give {usable} MB of {hbm_total_mb} MB")
    plan = make_plan(
        model_dir,
        hbm_total_mb=hbm_total_mb,
        hbm_used_mb=hbm_used_mb,
        max_model_len=max_model_len,
        gpu_memory_utilization=util,
    )
    if not plan["feasible"] or plan["max_num_seqs"] != seqs:
        raise ValueError(
            f"utilization {util}: the planner chose max_num_seqs {plan['max_num_seqs']} "
            f"(feasible {plan['feasible']}, reasons {plan['reasons']}), not {seqs}"
        )
    return {
        "gpu_memory_utilization": util,
        "kv_budget_mb": plan["memory"]["kv_budget_mb"],
        "kv_capacity_tokens": plan["kv_capacity_tokens"],
        "kv_blocks": plan["kv_capacity_tokens"] // mm.block_size,
        "max_num_seqs": plan["max_num_seqs"],
        "max_model_len": plan["max_model_len"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--hbm-total-mb", type=int, required=True)
    ap.add_argument("--hbm-used-mb", type=int, required=True)
    ap.add_argument("--max-model-len", type=int, required=True)
    ap.add_argument("--seqs", type=int, required=True)
    a = ap.parse_args(argv)
    try:
        out = utilization_for(a.model_dir, a.hbm_total_mb, a.hbm_used_mb, a.max_model_len, a.seqs)
    except (ValueError, OSError, AscendDeployError) as exc:
        print(f"kv_sizing: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
