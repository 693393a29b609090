"""Weight bytes of a model from its ``config.json`` alone, before the weights are downloaded.

``plan`` answers "will it fit?" from the config (and the index's ``metadata.total_size``
when the index is there): the served bytes are the parameter count times the served dtype's
size. The count follows the decoder layout of the families the planner sizes (embeddings,
attention with its biases and QK norms, gated MLP or experts, norms, LM head unless tied);
for Qwen3 dense models it is exact: Qwen3-4B counts 4,022,468,096 parameters, 8,044,936,192
BF16 bytes, which is what the converted Qwen3-4B-FP8 holds. Block-FP8 on disk adds one scale
per weight tile (``weight_block_size``). Estimates for MoE and MLA models leave out what the
config does not describe (DeepSeek's multi-token-prediction layers, which vLLM does not load
by default). Standard library only.
"""

from __future__ import annotations

import math

# Bytes per parameter of the dtypes configs name (torch_dtype).
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}
# Bytes of one block-FP8 scale (weight_scale_inv: BF16 in the Qwen3-FP8 releases).
FP8_SCALE_BYTES = 2


def _attention_params(a: dict) -> tuple[int, int]:
    """(linear weights, other parameters) of one attention block."""
    hidden, heads = a["hidden_size"], a["num_attention_heads"]
    mla = a.get("mla")
    if mla:
        nope = mla.get("qk_nope_head_dim") or 0
        rope, rank = mla["qk_rope_head_dim"], mla["kv_lora_rank"]
        v_dim = mla.get("v_head_dim") or nope or a["head_dim"]
        q_rank = mla.get("q_lora_rank")
        q = (
            hidden * q_rank + q_rank * heads * (nope + rope)
            if q_rank
            else hidden * heads * (nope + rope)
        )
        linear = q + hidden * (rank + rope) + rank * heads * (nope + v_dim) + heads * v_dim * hidden
        norms = rank + (q_rank or 0)
        return linear, norms
    hd, kv = a["head_dim"], a["num_key_value_heads"]
    linear = hidden * heads * hd + 2 * hidden * kv * hd + heads * hd * hidden
    other = 0
    family = a.get("model_type") or ""
    if a.get("attention_bias") or family.startswith("qwen2"):
        other += heads * hd + 2 * kv * hd  # q, k, v biases
    if family.startswith("qwen3"):
        other += 2 * hd  # q_norm, k_norm
    return linear, other


def _mlp_params(a: dict, dense: bool) -> tuple[int, int]:
    """(linear weights, other parameters) of one MLP: gated dense, or experts + router."""
    hidden = a["hidden_size"]
    inter = a.get("intermediate_size") or 4 * hidden
    moe = a.get("moe")
    if dense or not moe:
        return 3 * hidden * inter, 0
    expert = moe.get("moe_intermediate_size") or inter
    linear = moe["experts"] * 3 * hidden * expert
    shared = moe.get("shared_expert_intermediate_size") or moe.get("shared_experts", 0) * expert
    linear += 3 * hidden * shared
    router = hidden * moe["experts"] + (hidden if moe.get("shared_expert_intermediate_size") else 0)
    return linear, router


def parameter_counts(arch: dict) -> dict[str, int]:
    """``{"linear", "other", "total"}`` parameters of the decoder ``read_architecture`` read."""
    hidden, vocab, layers = arch["hidden_size"], arch["vocab_size"], arch["num_hidden_layers"]
    dense_layers = (arch.get("moe") or {}).get("first_dense_layers", 0)
    linear = other = 0
    for i in range(layers):
        att_linear, att_other = _attention_params(arch)
        mlp_linear, mlp_other = _mlp_params(arch, dense=i < dense_layers)
        linear += att_linear + mlp_linear
        other += att_other + mlp_other + 2 * hidden  # input and post-attention norms
    other += vocab * hidden + hidden  # embeddings, final norm
    if not arch.get("tie_word_embeddings"):
        other += vocab * hidden  # lm_head (never quantized in the FP8 releases)
    return {"linear": linear, "other": other, "total": linear + other}


def fp8_scale_count(arch: dict, block: list[int]) -> int:
    """Block-FP8 scales of every linear weight: one per ``block`` tile, edge tiles included.
    Counted per matrix shape for dense GQA models; others by elements (an estimate)."""
    bo, bi = block[0], block[-1]
    if arch.get("mla") or arch.get("moe"):
        return math.ceil(parameter_counts(arch)["linear"] / (bo * bi))
    hidden, heads, kv = (
        arch["hidden_size"],
        arch["num_attention_heads"],
        arch["num_key_value_heads"],
    )
    hd = arch["head_dim"]
    inter = arch.get("intermediate_size") or 4 * hidden
    shapes = [(heads * hd, hidden), (kv * hd, hidden), (kv * hd, hidden), (hidden, heads * hd)]
    shapes += [(inter, hidden), (inter, hidden), (hidden, inter)]
    per_layer = sum(math.ceil(o / bo) * math.ceil(i / bi) for o, i in shapes)
    return per_layer * arch["num_hidden_layers"]


def estimate_weights(
    arch: dict,
    quant_method: str | None,
    block: list[int] | None,
    fp8_native: bool,
    total_size: int | None,
) -> dict:
    """Weight bytes on disk and as served, from the config (``total_size``: the index's
    ``metadata.total_size``, the bytes on disk when known). ``source`` says which."""
    counts = parameter_counts(arch)
    dtype_bytes = DTYPE_BYTES.get(str(arch.get("torch_dtype", "bfloat16")).lower(), 2)
    fp8 = quant_method == "fp8"
    if fp8:
        scales = fp8_scale_count(arch, block or [128, 128]) * FP8_SCALE_BYTES
        on_disk = counts["linear"] + scales + counts["other"] * 2
        served = on_disk if fp8_native else counts["total"] * 2  # converted to BF16
    else:
        on_disk = served = counts["total"] * dtype_bytes
    source = f"config.json: {counts['total']:,} parameters"
    if total_size is not None:
        source += "; bytes on disk from the index's metadata.total_size"
        if not fp8 or fp8_native:
            served = total_size  # served as stored
        on_disk = total_size
    return {
        "weight_bytes_on_disk": on_disk,
        "weight_bytes_served": served,
        "needs_conversion": fp8 and not fp8_native,
        "parameters": counts["total"],
        "weights_source": source,
    }
