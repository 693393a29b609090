"""Choose a gpu_memory_utilization at which the engine's KV cache holds exactly N max-length
sequences, and what the planner makes of that card.

Used by molecule/capacity (pitfall 6): on a 32 GB card the tiny test model's KV cache would
hold millions of tokens, so the case lowers ``--gpu-memory-utilization`` until the emulated
engine, which sizes its cache with its own code (``ascend_sim.vllm_emulator.memory``, never the
planner's), holds ``--seqs`` sequences of ``--max-model-len`` tokens, no more. It sizes for the
served copy (the FP8 checkpoint converted to BF16: F8 tensors doubled, ``*_scale_inv`` dropped)
and for ``--twin-seqs`` sequences (the hand-started contrast replica; fewer sequences only
shrink the profile peak, so the planned replica holds at least as much). The planner then
plans that card from its own memory model: its ``max_num_seqs`` must fit in what the engine
holds.

    python kv_sizing.py --model-dir DIR --hbm-total-mb 32768 --hbm-used-mb 3200 \
        --max-model-len 4096 --seqs 3 [--twin-seqs 16] [--vllm-ascend v0.23.0]  # one JSON object

``--vllm-ascend`` is the image's release (molecule.yml's image): from v0.15.0rc1 both the engine
and the planner size memory with vLLM's profiling model.
"""

from __future__ import annotations

import argparse
import json
import sys

from ascend_deploy.errors import AscendDeployError
from ascend_deploy.model.files import load_config, read_weight_layout
from ascend_deploy.planning.memory import profiles_memory
from ascend_deploy.planning.plan import make_plan
from ascend_sim.vllm_emulator import memory

FP8 = ("F8_E4M3", "F8_E5M2")


def served_tensors(model_dir: str) -> list[tuple[str, tuple[int, ...], int]]:
    """(name, shape, bytes) of the BF16 copy the replica serves."""
    out = []
    for _shard, info in read_weight_layout(model_dir).tensors():
        if info.name.endswith("_scale_inv"):
            continue
        nbytes = info.numel * 2 if info.dtype in FP8 else info.nbytes
        out.append((info.name, tuple(info.shape), nbytes))
    return out


def utilization_for(
    model_dir: str,
    hbm_total_mb: int,
    hbm_used_mb: int,
    max_model_len: int,
    seqs: int,
    twin_seqs: int = 16,
    vllm_ascend: str = "v0.23.0",
) -> dict:
    """The utilization, the engine's cache and the plan; ValueError when they do not fit."""
    block = memory.BLOCK_SIZE
    if max_model_len % block:
        raise ValueError(f"max_model_len {max_model_len} is not a multiple of {block}")
    config, tensors = load_config(model_dir), served_tensors(model_dir)
    blocks = seqs * max_model_len // block
    profiling = profiles_memory(vllm_ascend)
    util = memory.utilization_for_blocks(
        config, tensors, hbm_total_mb, hbm_used_mb, blocks, max_num_seqs=twin_seqs,
        profiling=profiling,
    )  # fmt: skip
    engine = memory.kv_budget(
        config, tensors, hbm_total_mb, hbm_used_mb, 0, gpu_memory_utilization=util,
        max_num_seqs=twin_seqs, profiling=profiling,
    )  # fmt: skip
    plan = make_plan(
        model_dir,
        hbm_total_mb=hbm_total_mb,
        hbm_used_mb=hbm_used_mb,
        max_model_len=max_model_len,
        gpu_memory_utilization=util,
        vllm_ascend=vllm_ascend,
    )
    if not plan["feasible"] or plan["max_num_seqs"] * max_model_len > engine.tokens:
        raise ValueError(
            f"utilization {util}: the planner chose max_num_seqs {plan['max_num_seqs']} "
            f"(feasible {plan['feasible']}, reasons {plan['reasons']}) for an engine cache of "
            f"{engine.tokens} tokens"
        )
    return {
        "gpu_memory_utilization": util,
        "engine_kv_tokens": engine.tokens,
        "engine_kv_blocks": engine.num_blocks,
        "twin_seqs": twin_seqs,
        "kv_budget_mb": plan["memory"]["kv_budget_mb"],
        "kv_capacity_tokens": plan["kv_capacity_tokens"],
        "kv_blocks": plan["kv_capacity_tokens"] // block,
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
    ap.add_argument("--twin-seqs", type=int, default=16)
    ap.add_argument("--vllm-ascend", default="v0.23.0")
    a = ap.parse_args(argv)
    try:
        out = utilization_for(
            a.model_dir,
            a.hbm_total_mb,
            a.hbm_used_mb,
            a.max_model_len,
            a.seqs,
            a.twin_seqs,
            a.vllm_ascend,
        )
    except (ValueError, OSError, AscendDeployError) as exc:
        print(f"kv_sizing: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
