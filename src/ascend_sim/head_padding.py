"""Widen the attention heads of a float Qwen3 checkpoint without changing what it computes.

vLLM's CPU attention before 0.27 serves only some head sizes (``CPUAttentionBackend.
get_supported_head_sizes``: 32, 64, 80, 96, 112, 128, ...); the tiny test model has
head_dim 48. :func:`pad_head_dim` writes the same model with a larger head_dim:

* q/k: each head's two RoPE halves ``[0, d/2)`` and ``[d/2, d)`` move to ``[0, d/2)`` and
  ``[D/2, D/2 + d/2)`` of the wider head; the other rows of q_proj/k_proj are zero. RoPE in
  the neox (rotate-half) layout pairs dimension ``i`` with ``i + D/2`` at frequency
  ``theta'^(-2i/D)``, which equals the original ``theta^(-2i/d)`` for ``theta' = theta^(D/d)``,
  so ``rope_theta`` becomes ``theta^(D/d)``.
* q_norm/k_norm (RMSNorm over the head) see 16 more zeros: the mean square falls by ``d/D``,
  which scales q and k by ``sqrt(D/d)`` each; the attention scale ``D^-0.5`` takes
  ``sqrt(d/D)`` of that back, and k_norm's weight the rest (times ``sqrt(d/D)``).
* v: each head's values are followed by zeros; o_proj gets zero columns for them.

Everything else is copied. Only the default RoPE is supported (a scaled RoPE has its own
frequency formula). The result is equal up to BF16 rounding of the k_norm weight and the
``eps`` inside the norm (``eps * D/d``).
"""

from __future__ import annotations

import os
import shutil

from ascend_deploy.model.files import load_config, read_weight_layout

from .checkpoints import write_json
from .float_tensors import float_bytes, read_float, write_tensor_file


def _head_rows(d: int, wide: int) -> list[int]:
    """Where the ``d`` rows of one head go in a head of ``wide`` rows (RoPE halves kept apart)."""
    half, wide_half = d // 2, wide // 2
    return list(range(half)) + [wide_half + i for i in range(half)]


def pad_head_dim(src_dir: str, out_dir: str, head_dim: int) -> dict:
    """Write ``src_dir`` (a float Qwen3 checkpoint) to ``out_dir`` with ``head_dim`` per head."""
    import numpy as np

    config = load_config(src_dir)
    if config.get("quantization_config"):
        raise ValueError(f"{src_dir}: quantized checkpoint; convert it to BF16 first")
    if config.get("rope_scaling") or config.get("rope_parameters"):
        raise ValueError(f"{src_dir}: only the default RoPE can be re-based")
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    d = config.get("head_dim") or config["hidden_size"] // heads
    if head_dim <= d or d % 2 or head_dim % 2:
        raise ValueError(f"head_dim {head_dim}: must be even and larger than {d}")
    layout = read_weight_layout(src_dir)
    rows = np.asarray(_head_rows(d, head_dim))
    norm_ratio = np.float32((d / head_dim) ** 0.5)

    def widen(name: str, arr: np.ndarray) -> np.ndarray:
        for proj, count, place in (
            ("q_proj", heads, rows),
            ("k_proj", kv_heads, rows),
            ("v_proj", kv_heads, np.arange(d)),
        ):
            if name.endswith(f"self_attn.{proj}.weight"):
                out = np.zeros((count, head_dim, arr.shape[1]), np.float32)
                out[:, place, :] = arr.reshape(count, d, -1)
                return out.reshape(count * head_dim, -1)
        if name.endswith("self_attn.o_proj.weight"):
            out = np.zeros((arr.shape[0], heads, head_dim), np.float32)
            out[:, :, :d] = arr.reshape(arr.shape[0], heads, d)
            return out.reshape(arr.shape[0], -1)
        if name.endswith(("self_attn.q_norm.weight", "self_attn.k_norm.weight")):
            out = np.zeros(head_dim, np.float32)
            scale = norm_ratio if ".k_norm." in name else np.float32(1.0)
            out[rows] = arr * scale
            return out
        return arr

    os.makedirs(out_dir, exist_ok=True)
    weight_map: dict[str, str] = {}
    total = 0
    for shard in layout.shards:
        tensors = []
        for name in layout.headers[shard].tensors:
            dtype, arr = read_float(src_dir, layout, name)
            wide = widen(name, arr)
            tensors.append((name, dtype, tuple(wide.shape), float_bytes(dtype, wide)))
            weight_map[name] = shard
        path = os.path.join(out_dir, shard)
        total += write_tensor_file(path, tensors, layout.headers[shard].metadata)
    wide_config = dict(config)
    wide_config["head_dim"] = head_dim
    theta = float(config.get("rope_theta", 10000.0)) ** (head_dim / d)
    wide_config["rope_theta"] = float(f"{theta:.12g}")  # 1e6 ** (64 / 48) is 1e8, not 99999999.9…
    for name in sorted(os.listdir(src_dir)):
        path = os.path.join(src_dir, name)
        if os.path.isfile(path) and name not in layout.shards and name != "config.json":
            shutil.copyfile(path, os.path.join(out_dir, name))
    if layout.index is not None:
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        write_json(os.path.join(out_dir, "model.safetensors.index.json"), index)
    write_json(os.path.join(out_dir, "config.json"), wide_config)
    return {
        "head_dim": head_dim,
        "rope_theta": wide_config["rope_theta"],
        "tensors": len(weight_map),
    }
