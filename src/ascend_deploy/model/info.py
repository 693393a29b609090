"""Model facts for planning: architecture, quantization and weight bytes as served.

Standard library only. Reads ``config.json`` (or its ``text_config`` for multimodal
wrappers), ``quant_model_description.json`` (ModelSlim) and the safetensors shard headers.

Weight bytes "served" are what the NPU holds after the deployment's preparation: on
hardware without FP8 compute (Atlas A2/A3, 310P) a block-FP8 checkpoint is converted to
BF16, so every F8 weight doubles and the ``*_scale_inv`` tensors disappear
(docs/sources.md: block-FP8, vLLM-Ascend quantization). For Qwen3-4B-FP8: 650 tensors /
4,412,063,872 bytes on disk and 398 tensors / 8,044,936,192 bytes served.
"""

from __future__ import annotations

import os

from ..errors import InputError
from .estimate import estimate_weights
from .files import (
    MODELSLIM_DESCRIPTION,
    load_config,
    read_json_file,
    read_weight_layout,
    weights_on_disk,
)
from .modelslim import check_description, linear_weights
from .tp_heads import kv_heads_per_rank

FP8_DTYPES = frozenset({"F8_E4M3", "F8_E5M2"})
SCALE_SUFFIX = "_scale_inv"
# KV-cache element size follows the model dtype (vLLM kv_cache_dtype "auto").
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}
# Names some configs use instead of max_position_embeddings.
_POSITION_KEYS = ("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions")
# RoPE types whose ``factor`` does not lengthen the context vLLM derives (see context_limit).
_ROPE_TYPES_KEEPING_LENGTH = ("su", "longrope", "llama3")
# Decoder families whose KV cache the planner sizes: every layer full attention, one K and one
# V vector of head_dim per KV head per token (MHA/GQA), or MLA (below). Multimodal wrappers count
# by their text model (``text_config``); their vision encoder's activations are not budgeted.
SIZED_MODEL_TYPES = frozenset(
    {
        "llama",
        "mistral",
        "mixtral",
        "qwen2",
        "qwen2_moe",
        "qwen3",
        "qwen3_moe",
        "deepseek_v2",
        "deepseek_v3",
        "kimi_k2",
        "qwen2_vl",
        "qwen2_5_vl",
        "qwen3_vl",
        "qwen3_vl_moe",
        "qwen3_vl_text",
        "qwen3_vl_moe_text",
    }
)


def _arch_section(config: dict, path: str) -> dict:
    """The dict that holds the decoder dimensions (top level or ``text_config``)."""
    if "num_hidden_layers" in config:
        return config
    text = config.get("text_config")
    if isinstance(text, dict) and "num_hidden_layers" in text:
        return text
    raise InputError(
        f"{path}: no 'num_hidden_layers' (top level or text_config); "
        "not a decoder-only language model config"
    )


def _positive_int(section: dict, key: str, path: str, required: bool = True) -> int | None:
    value = section.get(key)
    if value is None:
        if required:
            raise InputError(f"{path}: required field '{key}' is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(f"{path}: '{key}' must be a positive integer, got {value!r}")
    return value


def read_architecture(config: dict, path: str = "config.json") -> dict:
    """The architecture facts of a parsed config.json, validated."""
    sec = _arch_section(config, path)
    layers = _positive_int(sec, "num_hidden_layers", path)
    heads = _positive_int(sec, "num_attention_heads", path)
    hidden = _positive_int(sec, "hidden_size", path)
    vocab = _positive_int(sec, "vocab_size", path)
    kv_heads = _positive_int(sec, "num_key_value_heads", path, required=False) or heads
    head_dim = _positive_int(sec, "head_dim", path, required=False)
    if head_dim is None:
        assert hidden is not None and heads is not None
        if hidden % heads:
            raise InputError(
                f"{path}: no 'head_dim' and hidden_size {hidden} is not divisible by "
                f"num_attention_heads {heads}"
            )
        head_dim = hidden // heads
    max_pos = None
    for key in _POSITION_KEYS:
        if sec.get(key) is not None:
            max_pos = _positive_int(sec, key, path)
            break
    if max_pos is None:
        raise InputError(f"{path}: no 'max_position_embeddings'; cannot bound the context length")
    assert heads is not None and kv_heads is not None
    if heads % kv_heads:
        raise InputError(
            f"{path}: num_attention_heads {heads} is not a multiple of "
            f"num_key_value_heads {kv_heads}"
        )
    model_type = config.get("model_type", sec.get("model_type"))
    if not isinstance(model_type, str):
        model_type = None
    limit, rope, limit_source = context_limit(sec, max_pos, model_type, path)
    dtype = sec.get("torch_dtype", sec.get("dtype", config.get("torch_dtype", "bfloat16")))
    if not isinstance(dtype, str):
        raise InputError(f"{path}: 'torch_dtype' must be a string, got {dtype!r}")
    mla = _mla(sec, path)
    moe = _moe(sec, path)
    if mla and mla["qk_nope_head_dim"] and sec.get("head_dim") is None:
        head_dim = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]  # query/key head size
    return {
        "model_type": model_type,
        "architectures": config.get("architectures")
        if isinstance(config.get("architectures"), list)
        else [],
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "hidden_size": hidden,
        "intermediate_size": _positive_int(sec, "intermediate_size", path, required=False),
        "vocab_size": vocab,
        "max_position_embeddings": max_pos,
        "max_model_len_limit": limit,
        "max_model_len_source": limit_source,
        "rope_scaling": rope,
        "torch_dtype": dtype,
        "tie_word_embeddings": bool(
            sec.get("tie_word_embeddings", config.get("tie_word_embeddings", False))
        ),
        "attention": "mla" if mla else "mha",
        "mla": mla,
        "moe": moe,
        "unsized": unsized_reason(config, sec, model_type, mla),
    }


def _opt_int(sec: dict, keys: tuple[str, ...], path: str) -> int | None:
    for key in keys:
        if sec.get(key) is not None:
            return _positive_int(sec, key, path)
    return None


def _mla(sec: dict, path: str) -> dict | None:
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi K2): vLLM caches one compressed
    latent of ``kv_lora_rank`` values plus the shared RoPE key of ``qk_rope_head_dim`` values
    per layer and token, the same on every TP rank (vLLM ``MLAAttention``; DeepSeek-V2 paper
    section 2.1). Present when the config has ``kv_lora_rank``."""
    if sec.get("kv_lora_rank") is None:
        return None
    rank = _positive_int(sec, "kv_lora_rank", path)
    rope = _positive_int(sec, "qk_rope_head_dim", path)
    nope = _positive_int(sec, "qk_nope_head_dim", path, required=False)
    v_dim = _positive_int(sec, "v_head_dim", path, required=False)
    return {
        "kv_lora_rank": rank,
        "qk_rope_head_dim": rope,
        "qk_nope_head_dim": nope,
        "v_head_dim": v_dim,
        "q_lora_rank": sec.get("q_lora_rank"),
    }


def _moe(sec: dict, path: str) -> dict | None:
    """Mixture of experts: every expert's weights stay resident (their bytes are in the shard
    headers); a token runs through ``experts_per_token`` routed experts plus the shared ones."""
    experts = _opt_int(sec, ("n_routed_experts", "num_experts", "num_local_experts"), path)
    if experts is None or experts < 2:
        return None
    per_token = _opt_int(sec, ("num_experts_per_tok", "moe_top_k"), path) or 1
    inter = _opt_int(sec, ("moe_intermediate_size",), path) or _opt_int(
        sec, ("intermediate_size",), path
    )
    shared = _opt_int(sec, ("n_shared_experts",), path) or 0
    shared_inter = _opt_int(sec, ("shared_expert_intermediate_size",), path)
    return {
        "experts": experts,
        "experts_per_token": per_token,
        "moe_intermediate_size": inter,
        "shared_experts": shared,
        "shared_expert_intermediate_size": shared_inter,
        "first_dense_layers": _opt_int(sec, ("first_k_dense_replace",), path) or 0,
    }


def unsized_reason(config: dict, sec: dict, model_type: str | None, mla: dict | None) -> str | None:
    """Why the planner cannot size this model's KV cache, or None when it can.

    The planner knows two cache layouts: full attention with K and V per KV head (every layer
    alike) and MLA. Anything else (sliding-window or linear-attention layers, state-space
    layers, DeepSeek sparse attention's indexer cache, an unknown model type) would be sized
    wrong, so it is refused with what sizing it would need.
    """
    layer_types = sec.get("layer_types")
    if isinstance(layer_types, list):
        other = sorted({str(t) for t in layer_types if t != "full_attention"})
        if other:
            return (
                f"its layer_types mix full attention with {', '.join(other)} layers, whose "
                "cache is not K and V per token in every layer; sizing it needs the per-layer "
                "cache layout (window length, or the recurrent state size of linear attention)"
            )
    if sec.get("use_sliding_window") and sec.get("sliding_window"):
        return (
            f"it uses sliding-window attention (sliding_window {sec.get('sliding_window')}); "
            "sizing it needs vLLM's per-layer window cache layout"
        )
    hybrid = [
        k
        for k in ("full_attention_interval", "linear_num_value_heads", "mamba_d_state", "ssm_cfg")
        if k in sec
    ]
    if hybrid:
        return (
            f"it has linear-attention or state-space layers ({', '.join(hybrid)}); sizing it "
            "needs the recurrent state size per sequence besides the per-token KV cache"
        )
    if sec.get("index_topk") is not None or sec.get("index_head_dim") is not None:
        return (
            "it uses DeepSeek sparse attention, whose indexer keeps its own key cache per "
            "token besides the MLA cache; sizing it needs index_head_dim and that cache's dtype"
        )
    if mla is None and model_type not in SIZED_MODEL_TYPES:
        known = ", ".join(sorted(SIZED_MODEL_TYPES))
        return (
            f"model_type {model_type!r} is not one the planner sizes ({known}); sizing it "
            "needs its KV-cache layout per layer (attention kind, cached heads and values per "
            "token), added to ascend_deploy.model.info"
        )
    return None


def _rope_entries(sec: dict, path: str) -> list[dict]:
    """The RoPE parameter dicts of a config: ``rope_scaling`` (transformers 4.x) or
    ``rope_parameters`` (transformers 5, possibly one dict per layer type)."""
    raw = sec.get("rope_parameters")
    key = "rope_parameters"
    if raw is None:
        raw, key = sec.get("rope_scaling"), "rope_scaling"
    if raw is None:
        return []
    if not isinstance(raw, dict):
        raise InputError(f"{path}: '{key}' must be an object or null, got {raw!r}")
    if raw and all(isinstance(v, dict) for v in raw.values()):
        entries = list(raw.values())  # {"full_attention": {...}, "sliding_attention": {...}}
    else:
        entries = [raw]
    for entry in entries:
        factor = entry.get("factor")
        if factor is not None and (
            isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor <= 0
        ):
            raise InputError(f"{path}: {key}.factor must be a positive number, got {factor!r}")
        orig = entry.get("original_max_position_embeddings")
        if orig is not None and (isinstance(orig, bool) or not isinstance(orig, int) or orig <= 0):
            raise InputError(
                f"{path}: {key}.original_max_position_embeddings must be a positive integer, "
                f"got {orig!r}"
            )
    return entries


def context_limit(
    sec: dict, max_pos: int, model_type: str | None, path: str = "config.json"
) -> tuple[int, dict | None, str]:
    """The longest max_model_len vLLM accepts for this config, the RoPE scaling that set it
    and a description of where the number comes from.

    vLLM's rule (``_get_and_verify_max_len`` in vllm/config/model.py; read at vllm-project/vllm
    commit 0052a5b818980ce8a0477706aaf9f75bd5af72cd, the same in vllm/config.py of earlier
    releases): start from the config's position limit; when the model has RoPE scaling and
    its model_type is not Gemma3 (whose limit already includes it), every rope_type except
    ``su``, ``longrope`` and ``llama3`` multiplies the limit by its ``factor`` (none: 1),
    and ``yarn`` first replaces the limit by its ``original_max_position_embeddings``. A
    ``--max-model-len`` above the result is refused ("User-specified max_model_len ... is
    greater than the derived max_model_len"). Qwen3 dense models have
    max_position_embeddings 40960; their model cards enable YaRN with factor 4.0 and
    original_max_position_embeddings 32768, which vLLM turns into 32768 x 4 = 131072 tokens.
    A yarn entry without original_max_position_embeddings starts from the position limit
    (transformers' own default for YaRN). The ``type`` key is read as ``rope_type``, as
    vLLM's config patching does.
    """
    base_source = f"max_position_embeddings {max_pos}"
    entries = _rope_entries(sec, path)
    if not entries or (model_type is not None and "gemma3" in model_type):
        return max_pos, None, base_source
    derived: float = max_pos
    factor: float = 1.0
    chosen: dict | None = None
    for entry in entries:
        rope_type = str(entry.get("rope_type", entry.get("type", "default")))
        if rope_type in _ROPE_TYPES_KEEPING_LENGTH:
            continue
        factor = entry.get("factor", factor)
        if rope_type == "yarn":
            derived = entry.get("original_max_position_embeddings") or max_pos
        chosen = {
            "rope_type": rope_type,
            "factor": factor,
            "original_max_position_embeddings": entry.get("original_max_position_embeddings"),
        }
    if chosen is None or (factor == 1.0 and derived == max_pos):
        return max_pos, None, base_source
    limit = int(derived * factor)
    if chosen["rope_type"] == "yarn":
        source = (
            f"rope_scaling yarn: original_max_position_embeddings {int(derived)} x factor "
            f"{factor:g}; max_position_embeddings {max_pos}"
        )
    else:
        source = f"rope_scaling {chosen['rope_type']}: {base_source} x factor {factor:g}"
    return limit, chosen, source


def kv_values_per_token_per_layer(arch: dict, tp: int = 1) -> int:
    """Cached values one token holds in one layer on one rank of a TP group.

    MHA/GQA: K and V for each KV head the rank holds, ``2 x max(1, kv_heads / TP) x head_dim``
    (ranks beyond the KV head count hold a replica). MLA: the latent plus the RoPE key,
    ``kv_lora_rank + qk_rope_head_dim``, replicated on every rank (DeepSeek-V3: 512 + 64).
    """
    mla = arch.get("mla")
    if mla:
        return mla["kv_lora_rank"] + mla["qk_rope_head_dim"]
    return 2 * kv_heads_per_rank(arch["num_key_value_heads"], tp) * arch["head_dim"]


def kv_bytes_per_token(arch: dict, kv_dtype_bytes: int = 2) -> int:
    """KV-cache bytes one token occupies (one full copy): layers x cached values x bytes.

    MHA/GQA: 2 (K and V) x layers x kv_heads x head_dim x bytes; MLA: layers x
    (kv_lora_rank + qk_rope_head_dim) x bytes (DeepSeek-V3: 61 x 576 x 2 = 70,272).
    """
    return arch["num_hidden_layers"] * kv_values_per_token_per_layer(arch) * kv_dtype_bytes


def _quantization(config: dict, model_dir: str, cfg_path: str) -> tuple[str | None, list | None]:
    desc = os.path.join(model_dir, MODELSLIM_DESCRIPTION)
    if os.path.exists(desc):
        read_json_file(desc, "ModelSlim quantization description")  # must be a JSON object
        return "ascend", None
    qc = config.get("quantization_config")
    if qc is None:
        return None, None
    if not isinstance(qc, dict):
        raise InputError(f"{cfg_path}: 'quantization_config' must be an object, got {qc!r}")
    method = qc.get("quant_method")
    if not isinstance(method, str) or not method:
        raise InputError(f"{cfg_path}: quantization_config has no 'quant_method' string")
    block = qc.get("weight_block_size")
    if block is not None and (
        not isinstance(block, list)
        or not all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)
    ):
        raise InputError(
            f"{cfg_path}: quantization_config.weight_block_size must be a list of positive "
            f"integers, got {block!r}"
        )
    return method.lower(), block


def inspect_model(model_dir: str, fp8_native: bool = False, estimate: bool = False) -> dict:
    """Architecture, quantization and weight sizes of a Hugging Face model directory.

    ``fp8_native``: the target hardware computes in FP8 (Ascend 950), so an FP8
    checkpoint is served as it is; otherwise (A2/A3, the default) it is converted to BF16.
    ``estimate``: when the weight files are not (all) there, size the weights from
    config.json and the index's ``metadata.total_size`` (``model.estimate``) instead of
    refusing; ``weights_source`` says where the figures come from, and tensor counts are
    None. Raises InputError for a missing or malformed config, index or shard.
    """
    cfg_path = os.path.join(model_dir, "config.json")
    config = load_config(model_dir)
    facts = read_architecture(config, cfg_path)
    dtype_bytes = _DTYPE_BYTES.get(facts["torch_dtype"].lower(), 2)
    quant_method, block = _quantization(config, model_dir, cfg_path)
    facts.update(
        {
            "quant_method": quant_method,
            "weight_block_size": block,
            "kv_dtype_bytes": dtype_bytes,
            "kv_bytes_per_token": kv_bytes_per_token(facts, dtype_bytes),
        }
    )
    if estimate:
        complete, total_size = weights_on_disk(model_dir)
        if not complete:
            return _estimated(facts, model_dir, fp8_native, total_size)

    layout = read_weight_layout(model_dir)
    if quant_method == "ascend":
        desc = os.path.join(model_dir, MODELSLIM_DESCRIPTION)
        weights = linear_weights((info.name, info.shape) for _shard, info in layout.tensors())
        check_description(read_json_file(desc, "ModelSlim quantization description"), weights, desc)
    on_disk = served = 0
    count = served_count = 0
    fp8_tensors = 0
    for _shard, info in layout.tensors():
        count += 1
        on_disk += info.nbytes
        if info.dtype in FP8_DTYPES:
            fp8_tensors += 1
    needs_conversion = quant_method == "fp8" and fp8_tensors > 0 and not fp8_native
    for _shard, info in layout.tensors():
        if needs_conversion and info.name.endswith(SCALE_SUFFIX):
            continue
        served_count += 1
        if needs_conversion and info.dtype in FP8_DTYPES:
            served += info.numel * 2  # BF16
        else:
            served += info.nbytes
    facts.update(
        {
            "weight_bytes_on_disk": on_disk,
            "weight_bytes_served": served,
            "needs_conversion": needs_conversion,
            "tensor_count": count,
            "served_tensor_count": served_count,
            "fp8_tensor_count": fp8_tensors,
            "shards": list(layout.shards),
            "weights_source": "the safetensors shard headers",
        }
    )
    return facts


def _estimated(facts: dict, model_dir: str, fp8_native: bool, total_size: int | None) -> dict:
    """``facts`` completed from config.json (and ``total_size``) for weights not on disk."""
    if facts["quant_method"] not in (None, "fp8") and total_size is None:
        raise InputError(
            f"{model_dir}: the weights are not there and config.json alone cannot size a "
            f"checkpoint quantized with {facts['quant_method']!r}; download its "
            "*.safetensors.index.json (its metadata.total_size is enough) or the weights"
        )
    sizes = estimate_weights(
        facts, facts["quant_method"], facts["weight_block_size"], fp8_native, total_size
    )
    facts.update(sizes)
    facts.update(
        {"tensor_count": None, "served_tensor_count": None, "fp8_tensor_count": None, "shards": []}
    )
    return facts
