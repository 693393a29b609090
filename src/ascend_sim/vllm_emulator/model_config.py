"""What the emulated vLLM reads from a model directory: its context limit and the ModelSlim file.

Written for the emulator, apart from the planner (``ascend_deploy.model.info``), so that a
planner that derives a different limit or looks for another file name is refused at start-up
as real vLLM would refuse it.

* Context limit, vLLM ``_get_and_verify_max_len`` (vllm/config/model.py): the smallest of the
  config's length keys (``max_position_embeddings``, ``n_positions``, ``max_seq_len``,
  ``seq_length``, ``model_max_length``, ``max_sequence_length``, ``max_seq_length``,
  ``seq_len``), 2048 when none is set; RoPE scaling of any type but ``su``, ``longrope``,
  ``llama3`` multiplies it by ``factor`` (``mrope``: 1) after ``yarn`` has replaced it by
  ``original_max_position_embeddings``; Gemma 3's limit already includes its scaling. The
  scaling is ``rope_scaling`` or, with transformers 5, ``rope_parameters`` (possibly one dict
  per layer type).
* ModelSlim: vllm-ascend's quantization config reads ``quant_model_description.json`` from
  the model directory (``AscendQuantConfig`` / ``maybe_auto_detect_quantization``).
"""

from __future__ import annotations

MODELSLIM_FILE = "quant_model_description.json"
_LENGTH_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
_NO_LENGTH_CHANGE = ("su", "longrope", "llama3")
DEFAULT_MAX_LEN = 2048


def _text(config: dict) -> dict:
    if "num_hidden_layers" not in config and isinstance(config.get("text_config"), dict):
        return config["text_config"]
    return config


def _scalings(sec: dict) -> list[dict]:
    raw = sec.get("rope_parameters") or sec.get("rope_scaling")
    if not isinstance(raw, dict) or not raw:
        return []
    if all(isinstance(v, dict) for v in raw.values()):
        return list(raw.values())
    return [raw]


def derived_max_model_len(config: dict) -> int:
    """The longest ``--max-model-len`` vLLM accepts for this config."""
    sec = _text(config)
    lengths = []
    for key in _LENGTH_KEYS:
        value = sec.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            lengths.append(value)
    derived: float = min(lengths) if lengths else DEFAULT_MAX_LEN
    model_type = str(config.get("model_type") or sec.get("model_type") or "")
    if "gemma3" in model_type:
        return int(derived)
    for scaling in _scalings(sec):
        kind = str(scaling.get("rope_type") or scaling.get("type") or "default")
        if kind in _NO_LENGTH_CHANGE or (kind == "default" and "factor" not in scaling):
            continue
        factor = 1.0 if kind == "mrope" else float(scaling.get("factor", 1.0))
        if kind == "yarn":
            derived = scaling.get("original_max_position_embeddings") or derived
        return int(derived * factor)  # per-layer-type dicts share one length
    return int(derived)


# What vllm-ascend's ModelSlim config raises while the model is built, layer by layer, for a
# quant_model_description.json that lacks a linear layer's "<prefix>.weight" or mixes the
# precision of a fused layer's shards (vllm_ascend/quantization/quant_config.py@v0.11.0
# is_layer_skipped_ascend; modelslim_config.py@v0.23.0 is_layer_skipped_ascend and
# get_linear_quant_type; "Not all shards" is there from v0.9.1 on). Real KeyError:
# https://github.com/vllm-project/vllm-ascend/issues/569. Dense decoder layers only (the
# tiny models): attention qkv_proj, o_proj, then the MLP gate_up_proj, down_proj.
_LAYER_LINEARS = (
    ("self_attn", "qkv_proj", ("q_proj", "k_proj", "v_proj")),
    ("self_attn", "o_proj", ()),
    ("mlp", "gate_up_proj", ("gate_proj", "up_proj")),
    ("mlp", "down_proj", ()),
)


def _fused_error(desc: dict, prefix: str, proj: str, shards: tuple[str, ...]) -> str | None:
    fused = f"{prefix}.{proj}"
    keys = [f"{prefix}.{s}.weight" for s in shards]
    for key in keys:
        if key not in desc:
            return f"KeyError: '{key}'"
    if len({desc[k] == "FLOAT" for k in keys}) > 1:
        return (
            f"ValueError: Detected some but not all shards of {fused} are quantized. "
            "All shards of fused layers to have the same precision."
        )
    first = desc[keys[0]]
    for key in keys[1:]:
        if desc[key] != first:
            return (
                f"ValueError: Not all shards of {fused} are quantized with same quant type. "
                f"Shard {proj} uses {desc[key]}, but another shard uses {first}. "
                "Please check quantization config."
            )
    return None


def modelslim_load_error(desc: dict, weight_names: set[str], layers: int) -> str | None:
    """The first error building the model raises for this description, or None."""
    for i in range(layers):
        for block, proj, shards in _LAYER_LINEARS:
            prefix = f"model.layers.{i}.{block}"
            names = shards or (proj,)
            if not any(f"{prefix}.{n}.weight" in weight_names for n in names):
                continue  # not a dense layer of this kind (MoE experts, another naming)
            if shards:
                err = _fused_error(desc, prefix, proj, shards)
            else:
                key = f"{prefix}.{proj}.weight"
                err = None if key in desc else f"KeyError: '{key}'"
            if err:
                return err
    return None
