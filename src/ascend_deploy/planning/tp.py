"""Tensor-parallel choice: which TP sizes the heads allow and which one fits the memory.

TP follows vLLM's rule (``model.tp_heads``, shared with the multi-node planner and the
emulator): it divides the attention heads (pitfall 8) and divides the KV heads or is a
multiple of them, KV heads then being replicated (MLA splits only the heads). Without a
pinned TP the size with the longest context that fits wins, the smaller one on a tie; when
none fits on the NPUs given, the reason names the smallest larger TP that would. Sizing one
TP (context length, concurrency, reasons) follows ``memory.MemoryModel``.
Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import CheckFailed
from ..model import tp_heads
from .memory import MemoryModel


def valid_tp_sizes(heads: int, kv_heads: int, mla: bool = False) -> list[int]:
    """TP sizes vLLM accepts for these head counts (``model.tp_heads.valid_tp_sizes``)."""
    return tp_heads.valid_tp_sizes(heads, kv_heads, mla)


def model_tp_sizes(facts: dict) -> tuple[list[int], int, int]:
    """Valid TP sizes of a model with the head counts they were derived from."""
    heads, kv_heads = facts["num_attention_heads"], facts["num_key_value_heads"]
    return tp_heads.facts_tp_sizes(facts), heads, kv_heads


@dataclass(frozen=True)
class Sizing:
    """What ``size_for_tp`` needs besides the TP: the model, memory figures and pins."""

    facts: dict
    mm: MemoryModel
    hbm_total_mb: int
    hbm_used_mb: int
    util: float
    enforce_eager: bool
    max_model_len: int | None
    max_num_seqs: int | None
    profiling: bool = False  # the v0.15.0rc1+ memory model (memory.profiles_memory)


def size_for_tp(s: Sizing, tp: int) -> dict:
    """Context length, concurrency and reasons for one TP size.

    The first budget assumes the default 256 sequences for the sampler's share of the
    profiling peak; the final one uses the planned max_num_seqs, as the engine will.
    """
    mm, facts = s.mm, s.facts

    def budget_for(seqs: int | None) -> dict:
        return mm.budget(
            facts, s.hbm_total_mb, s.hbm_used_mb, s.util, tp, s.enforce_eager, seqs, s.profiling
        )

    budget = budget_for(s.max_num_seqs)
    cap = budget["kv_capacity_tokens"]
    max_pos = facts["max_model_len_limit"]  # max_position_embeddings, RoPE scaling applied
    reasons: list[str] = []
    length = s.max_model_len if s.max_model_len is not None else max_pos
    seqs = s.max_num_seqs

    def result() -> dict:
        return {
            "tp": tp,
            "budget": budget,
            "max_model_len": length,
            "max_num_seqs": seqs,
            "reasons": reasons,
        }

    free = budget["free_for_vllm_mb"]
    if budget["weights_per_npu_mb"] > free:
        reasons.append(
            f"weights need {budget['weights_per_npu_mb']} MB per NPU at TP {tp} but only "
            f"{free} MB of HBM are free for vLLM ({s.hbm_total_mb} MB x {s.util} - "
            f"{s.hbm_used_mb} MB in use); use more NPUs (higher TP), free the HBM, or a "
            "smaller or quantized model"
        )
        return result()
    if cap == 0 and s.max_num_seqs is not None and budget_for(None)["kv_capacity_tokens"] > 0:
        # The pin, not the HBM: its sampler share of the profiling peak (sequences x vocab
        # x 8 bytes) leaves nothing for the KV cache; the default 256 sequences would.
        unpinned = budget_for(None)
        avg = min(s.max_model_len or max_pos, mm.expected_avg_context_tokens)
        fit = max(1, min(unpinned["kv_capacity_tokens"] // avg, mm.default_max_num_seqs))
        reasons.append(
            f"--max-num-seqs {s.max_num_seqs} leaves no HBM for the KV cache at TP {tp}: its "
            f"activation estimate is {budget['activation_mb']} MB (sampler: {s.max_num_seqs} "
            f"sequences x vocab {facts['vocab_size']} x 8 bytes), "
            f"{budget['activation_mb'] - unpinned['activation_mb']} MB more than with the "
            f"default {mm.default_max_num_seqs}; use --max-num-seqs {fit} or less, or leave it "
            "unset (the plan sizes it from the KV cache)"
        )
        return result()
    if cap == 0:
        reasons.append(
            f"no HBM left for the KV cache at TP {tp}: {budget['kv_budget_mb']} MB after "
            f"weights {budget['weights_per_npu_mb']} MB, activation {budget['activation_mb']} "
            f"MB, graph capture {budget['graph_capture_mb']} MB, runtime "
            f"{budget['runtime_reserve_mb']} MB and HCCL {budget['hccl_mb']} MB; use more NPUs, "
            "--enforce-eager, free the HBM, or a smaller model"
        )
        return result()
    if s.max_model_len is None:
        length = min(max_pos, cap)  # cap is a whole number of blocks
    avg = min(length, mm.expected_avg_context_tokens)
    if seqs is None:
        seqs = max(1, min(cap // avg, mm.default_max_num_seqs))
    budget = budget_for(seqs)
    cap = budget["kv_capacity_tokens"]  # >= the first estimate when seqs <= 256
    if s.max_model_len is None:
        length = min(max_pos, cap)
        floor = min(mm.min_model_len, max_pos)
        if length < floor:
            reasons.append(
                f"the KV cache holds only {cap} tokens at TP {tp}, less than the minimum "
                f"useful context {floor}; use more NPUs, free the HBM or a smaller model"
            )
    elif s.max_model_len > cap:
        reasons.append(
            f"--max-model-len {s.max_model_len} does not fit: the KV cache holds {cap} tokens "
            f"({budget['kv_budget_mb']} MB at {budget['kv_bytes_per_token_per_npu']} bytes per "
            f"token per NPU); lower --max-model-len to {cap} or less, or use more NPUs"
        )
    pinned = s.max_num_seqs
    if pinned is not None and not reasons and pinned * avg > cap:
        fit = max(1, min(cap // avg, mm.default_max_num_seqs))
        reasons.append(
            f"--max-num-seqs {pinned} plans {pinned} x {avg} = {pinned * avg} tokens of KV "
            f"(at the assumed average context {avg}) but the cache holds {cap}; under load "
            f"requests would be preempted again and again. Use --max-num-seqs {fit} or less"
        )
    return result()


def choose_tp(
    s: Sizing, valid: list[int], heads: int, kv_heads: int, npus: int, tp: int | None
) -> dict:
    """The sizing of the chosen TP (with ``reasons`` when none fits on ``npus`` NPUs).

    A pinned ``tp`` vLLM refuses (``model.tp_heads``) or that needs more NPUs is CheckFailed.
    """
    if tp is not None:
        failure = tp_heads.tp_head_failure(heads, kv_heads, tp, bool(s.facts.get("mla")))
        if failure is not None:
            what = (
                f"does not divide num_attention_heads {heads} (num_key_value_heads {kv_heads})"
                if heads % tp
                else f"neither divides nor is a multiple of num_key_value_heads {kv_heads} "
                f"(num_attention_heads {heads})"
            )
            raise CheckFailed(
                f'tensor parallel size {tp} {what}; vLLM fails with "{failure}". TP must divide '
                "the attention heads and divide or be a multiple of the KV heads; valid sizes: "
                f"{', '.join(map(str, valid))}"
            )
        if tp > npus:
            raise CheckFailed(f"tensor parallel size {tp} needs {tp} NPUs but --npus is {npus}")
        candidates = [tp]
    else:
        candidates = [t for t in valid if t <= npus]
    attempts = [size_for_tp(s, t) for t in candidates]
    feasible = [a for a in attempts if not a["reasons"]]
    if feasible:
        return max(feasible, key=lambda a: (a["max_model_len"], -a["tp"]))
    chosen = attempts[-1]
    larger = [t for t in valid if t > npus]
    if tp is None and larger:
        # Name the smallest larger TP that would fit: the concrete "use more NPUs".
        trials = (size_for_tp(s, t) for t in larger)
        fits = next((a for a in trials if not a["reasons"]), None)
        chosen["reasons"].append(
            f"no TP up to {npus} NPU(s) fits; valid larger sizes need more NPUs: "
            f"{', '.join(map(str, larger))}"
            + (
                f" (TP {fits['tp']} on {fits['tp']} NPUs fits: its KV cache holds "
                f"{fits['budget']['kv_capacity_tokens']} tokens, max_model_len "
                f"{fits['max_model_len']})"
                if fits
                else " (none of them fits either)"
            )
        )
    return chosen
