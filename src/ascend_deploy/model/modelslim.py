"""Is a ModelSlim ``quant_model_description.json`` complete for its checkpoint?

Standard library only. vllm-ascend's ModelSlim config looks every linear layer up in the
description by ``<layer prefix>.weight`` when the model is built, so a description that
lacks one, or that gives the shards of one fused layer different precisions, fails at load
time after the image is pulled and the NPUs are taken. This module refuses it before
deploying, with the entries named.

Upstream (https://github.com/vllm-project/vllm-ascend):

* Fused layers (``qkv_proj`` = q/k/v, ``gate_up_proj`` = gate/up): ``is_layer_skipped_ascend``
  reads ``quant_description[shard + ".weight"]`` for every shard (``KeyError`` when one is
  missing) and raises ``ValueError: Detected some but not all shards of <prefix> are
  quantized`` when some shards are ``FLOAT`` and some are not, at every tag
  (``vllm_ascend/quantization/quant_config.py@v0.11.0``,
  ``vllm_ascend/quantization/modelslim_config.py@v0.23.0``). From v0.16.0rc1
  ``get_linear_quant_type`` also raises ``ValueError: Not all shards of <prefix> are quantized
  with same quant type`` for two quantized types.
* Other linear layers: ``quant_description[prefix + ".weight"]`` (``KeyError``;
  ``quant_config.py@v0.11.0`` ``is_layer_skipped_ascend``, ``modelslim_config.py@v0.23.0``
  ``get_linear_quant_type``). A real one: ``KeyError: 'model.layers.0.self_attn.q_proj.weight'``
  (https://github.com/vllm-project/vllm-ascend/issues/569).

Linear layers are read from the checkpoint: 2-D ``*.weight`` tensors other than the
embeddings, the LM head and MoE experts (upstream looks experts up by prefix, not by
``.weight``, and tolerates embeddings without an entry from v0.23.0).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import InputError

FUSED_SHARDS: dict[str, tuple[str, ...]] = {
    "qkv_proj": ("q_proj", "k_proj", "v_proj"),
    "gate_up_proj": ("gate_proj", "up_proj"),
}
FLOAT = "FLOAT"
SHOWN = 5  # missing entries named in a refusal; the rest are counted
_NOT_LINEAR = ("embed_tokens", "lm_head", "wte", "word_embeddings")
_FIX = (
    "re-export the checkpoint with ModelSlim (msmodelslim) so the description lists every "
    "layer's '.weight' with one precision per fused layer, or put back the "
    "quant_model_description.json that was exported with these weights"
)


def linear_weights(tensors: Iterable[tuple[str, tuple[int, ...]]]) -> list[str]:
    """Names of the linear layers' ``.weight`` tensors among ``(name, shape)`` pairs."""
    out = []
    for name, shape in tensors:
        if not name.endswith(".weight") or len(shape) != 2 or ".experts." in name:
            continue
        if any(part in _NOT_LINEAR for part in name.split(".")):
            continue
        out.append(name)
    return sorted(out)


def _fused_groups(names: list[str]) -> dict[str, list[str]]:
    """``<fused prefix>`` -> the shard weight names present, for q/k/v and gate/up."""
    groups: dict[str, list[str]] = {}
    for name in names:
        prefix = name[: -len(".weight")]
        head, _, proj = prefix.rpartition(".")
        for fused, shards in FUSED_SHARDS.items():
            if proj in shards:
                groups[f"{head}.{fused}"] = [f"{head}.{s}.weight" for s in shards]
    return groups


def problems(description: dict, weights: list[str]) -> tuple[list[str], list[str]]:
    """``(missing entries, mixed fused layers)`` of ``description`` for these linear weights.

    A fused layer's shard is required whenever one of its shards is in the checkpoint.
    Each mixed entry reads ``<fused prefix> (<shard>=<type>, ...)``.
    """
    wanted = set(weights)
    groups = _fused_groups(weights)
    for shards in groups.values():
        wanted.update(shards)
    missing = sorted(n for n in wanted if n not in description)
    mixed = []
    for fused, shards in sorted(groups.items()):
        types = [description.get(s) for s in shards]
        if None in types:
            continue  # already missing
        if len({str(t) for t in types}) > 1:
            parts = ", ".join(
                f"{s.rsplit('.', 2)[-2]}={t}" for s, t in zip(shards, types, strict=True)
            )
            mixed.append(f"{fused} ({parts})")
    return missing, mixed


def check_description(description: dict, weights: list[str], path: str) -> None:
    """InputError naming what upstream's loader would fail on; silent when complete."""
    missing, mixed = problems(description, weights)
    if not missing and not mixed:
        return
    why = []
    if missing:
        shown = ", ".join(missing[:SHOWN])
        more = f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
        why.append(
            f"{len(missing)} linear layer weight(s) have no entry ({shown}{more}); "
            "vllm-ascend fails at load with KeyError on such an entry"
        )
    if mixed:
        why.append(
            f"fused layer shards at mixed precision: {'; '.join(mixed[:SHOWN])}"
            + (f" and {len(mixed) - SHOWN} more" if len(mixed) > SHOWN else "")
            + "; vllm-ascend fails loading with ValueError (all shards of a fused layer need "
            "the same quant type)"
        )
    raise InputError(f"{path}: incomplete ModelSlim description: {'; '.join(why)}; {_FIX}")
