"""How vLLM splits attention heads over a tensor-parallel group: the one rule of the bundle.

Standard library only. The single-host planner (``planning.tp``), the multi-node planner
(``planning.multinode``), the KV-cache sizing (``model.info``) and the emulator
(``ascend_sim.vllm_emulator.startup``) all ask this module, so they cannot disagree.

vLLM's rule, in the order it checks it:

1. The attention heads must be divisible by TP, checked before any worker starts
   (``ModelConfig.verify_with_parallel_config``,
   https://github.com/vllm-project/vllm/blob/main/vllm/config/model.py):
   ``ValueError: Total number of attention heads (32) must be divisible by tensor parallel
   size (3).`` (pitfall 8).
2. KV heads (MHA/GQA, ``QKVParallelLinear``,
   https://github.com/vllm-project/vllm/blob/main/vllm/model_executor/layers/linear.py):
   when TP >= KV heads every rank holds one KV head and each KV head is replicated on
   ``TP / KV heads`` ranks (``divide(tp_size, total_num_kv_heads)``); otherwise each rank
   holds ``KV heads / TP`` heads (``divide(total_num_kv_heads, tp_size)``). ``divide``
   asserts (https://github.com/vllm-project/vllm/blob/main/vllm/distributed/utils.py), so a
   TP that neither divides nor is a multiple of the KV heads fails while the model is built:
   ``AssertionError: 6 is not divisible by 4``.
   vLLM-Ascend serves Qwen3-235B-A22B (64 heads, 4 KV heads) at ``--tensor-parallel-size 8``
   (https://docs.vllm.ai/projects/ascend/en/latest/tutorials/models/Qwen3-235B-A22B.html).
3. MLA (DeepSeek-V2/V3) caches one latent per token that every rank holds whole; only the
   attention heads split, so only rule 1 applies.
"""

from __future__ import annotations

# vLLM's own wording (sources in the module docstring); the emulator prints these lines.
HEADS_NOT_DIVISIBLE = (
    "ValueError: Total number of attention heads ({heads}) must be divisible by tensor parallel "
    "size ({tp})."
)
NOT_DIVISIBLE = "AssertionError: {numerator} is not divisible by {denominator}"


def tp_head_failure(heads: int, kv_heads: int, tp: int, mla: bool = False) -> str | None:
    """vLLM's exception line for TP ``tp`` on this head layout, or None when vLLM accepts it."""
    if tp < 1 or heads % tp:
        return HEADS_NOT_DIVISIBLE.format(heads=heads, tp=tp)
    if mla:
        return None
    if tp >= kv_heads and tp % kv_heads:
        return NOT_DIVISIBLE.format(numerator=tp, denominator=kv_heads)
    if tp < kv_heads and kv_heads % tp:
        return NOT_DIVISIBLE.format(numerator=kv_heads, denominator=tp)
    return None


def valid_tp_sizes(heads: int, kv_heads: int, mla: bool = False) -> list[int]:
    """Every TP vLLM accepts: it divides the heads and divides or is a multiple of the KV heads."""
    return [t for t in range(1, heads + 1) if tp_head_failure(heads, kv_heads, t, mla) is None]


def kv_heads_per_rank(kv_heads: int, tp: int) -> int:
    """KV heads one rank holds (and caches): ``max(1, kv_heads / tp)``, as QKVParallelLinear."""
    return max(1, kv_heads // tp)


def kv_head_replicas(kv_heads: int, tp: int) -> int:
    """Ranks that hold a copy of each KV head: ``tp / kv_heads`` when TP exceeds them, else 1."""
    return tp // kv_heads if tp > kv_heads else 1


def facts_tp_sizes(facts: dict) -> list[int]:
    """``valid_tp_sizes`` for a model's facts (``model.info.inspect_model``)."""
    return valid_tp_sizes(
        facts["num_attention_heads"], facts["num_key_value_heads"], bool(facts.get("mla"))
    )
