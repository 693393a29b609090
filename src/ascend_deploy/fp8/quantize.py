"""Quantize BF16 weights to the published block-FP8 format (Qwen3-*-FP8, DeepSeek-V3).

Per 128x128 tile: ``scale = amax(|w|) / 448``, ``q = round_to_e4m3fn(w / scale)`` and the
stored ``<name>_scale_inv`` is ``scale`` (the multiplier used to dequantize). Edge tiles
cover only the remaining rows/columns and the scale grid is ``[ceil(out/bm), ceil(in/bn)]``.
Sources: deepseek-ai/DeepSeek-V3 ``inference/kernel.py`` (``weight_quant``) and
``README_WEIGHTS.md`` (https://github.com/deepseek-ai/DeepSeek-V3). Used to build test and simulator
checkpoints; numpy and ml_dtypes are imported lazily.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any

from ..errors import InputError, shown
from ..model.files import INDEX_NAME, load_config, read_weight_layout
from .files import copy_file, other_files
from .numeric import SCALE_DTYPES, np_dtype, numpy_modules
from .safetensors_write import encode_header

FP8_MAX = 448.0  # largest finite float8_e4m3fn (ml_dtypes.finfo, OCP FP8 spec)
# The linear layers the published Qwen3 FP8 checkpoints quantize; embeddings, norms,
# q_norm/k_norm and lm_head stay BF16 (https://huggingface.co/Qwen/Qwen3-4B-FP8).
QUANTIZED_WEIGHT = re.compile(r"\.(q|k|v|o|gate|up|down)_proj\.weight$")
FLOAT_DTYPES = ("BF16", "F16", "F32")


def quantize_block_fp8(
    w: Any, block: tuple[int, int] = (128, 128), scale_dtype: str = "BF16"
) -> tuple[Any, Any]:
    """Quantize a float ``[out, in]`` matrix; returns ``(fp8 weight, scale_inv)``.

    ``fp8`` has dtype ``ml_dtypes.float8_e4m3fn``; ``scale_inv`` has ``scale_dtype``
    (F32, BF16 or F16) and shape ``[ceil(out/bm), ceil(in/bn)]``. The division uses the
    scale as stored (after rounding to ``scale_dtype``), so dequantizing with the stored
    scale is consistent; values are clamped to +-448 first (ml_dtypes casts out-of-range
    values to NaN instead of saturating). An all-zero tile gets scale 1.
    """
    np, ml = numpy_modules()
    if scale_dtype not in SCALE_DTYPES:
        raise ValueError(f"scale_dtype must be one of {SCALE_DTYPES}, got {scale_dtype!r}")
    w = np.asarray(w).astype(np.float32, copy=False)
    if w.ndim != 2:
        raise ValueError(f"expected a 2-D weight, got shape {w.shape}")
    bm, bn = (int(b) for b in block)
    rows, cols = w.shape
    gr, gc = math.ceil(rows / bm), math.ceil(cols / bn)
    padded = np.zeros((gr * bm, gc * bn), dtype=np.float32)
    padded[:rows, :cols] = np.abs(w)
    amax = padded.reshape(gr, bm, gc, bn).max(axis=(1, 3))
    scale = np.where(amax > 0, amax / np.float32(FP8_MAX), np.float32(1.0)).astype(np.float32)
    stored = scale.astype(np_dtype(scale_dtype))
    s32 = stored.astype(np.float32)
    expanded = np.repeat(np.repeat(s32, bm, axis=0), bn, axis=1)[:rows, :cols]
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.where(expanded > 0, w / expanded, np.float32(0.0))
    q = np.clip(scaled, -FP8_MAX, FP8_MAX).astype(ml.float8_e4m3fn)
    return q, stored


def _read_tensor(path: str, data_offset: int, info: Any) -> Any:
    np, _ = numpy_modules()
    with open(path, "rb") as fh:
        fh.seek(data_offset + info.begin)
        raw = fh.read(info.nbytes)
    if len(raw) != info.nbytes:
        raise InputError(f"{path}: tensor {shown(info.name)}: truncated data")
    return np.frombuffer(raw, dtype=np_dtype(info.dtype)).reshape(info.shape)


def quantize_checkpoint(
    src_bf16_dir: str,
    dst_fp8_dir: str,
    block: tuple[int, int] = (128, 128),
    scale_dtype: str = "BF16",
) -> dict:
    """Turn a BF16 (or F16/F32) Hugging Face checkpoint into the published block-FP8 layout.

    Every 2-D q/k/v/o/gate/up/down projection weight becomes ``F8_E4M3`` followed by its
    ``<name>_scale_inv``; all other tensors are copied bit for bit. Shard names are kept;
    the index (if any) gains the scale entries and a new ``total_size``; ``config.json``
    gains the Qwen3-FP8 ``quantization_config``; other files are copied. ``dst_fp8_dir``
    must not exist or be empty. Returns counts and sizes.
    """
    if scale_dtype not in SCALE_DTYPES:
        raise InputError(
            f"scale dtype must be one of {', '.join(SCALE_DTYPES)}, got {scale_dtype!r}"
        )
    config = load_config(src_bf16_dir)
    if config.get("quantization_config"):
        raise InputError(
            f"{os.path.join(src_bf16_dir, 'config.json')}: already has a quantization_config; "
            "quantize an unquantized BF16 checkpoint"
        )
    layout = read_weight_layout(src_bf16_dir)
    if os.path.exists(dst_fp8_dir) and os.listdir(dst_fp8_dir):
        raise InputError(f"{dst_fp8_dir}: output directory exists and is not empty")
    os.makedirs(dst_fp8_dir, exist_ok=True)

    weight_map: dict[str, str] = {}
    total = 0
    quantized = 0
    for shard in layout.shards:
        header = layout.headers[shard]
        src_path = os.path.join(src_bf16_dir, shard)
        entries: list[tuple[str, str, tuple[int, ...]]] = []
        for info in header.tensors.values():
            if _quantizable(info):
                rows, cols = info.shape
                grid = (math.ceil(rows / block[0]), math.ceil(cols / block[1]))
                entries.append((info.name, "F8_E4M3", info.shape))
                entries.append((info.name + "_scale_inv", scale_dtype, grid))
            else:
                entries.append((info.name, info.dtype, info.shape))
        metadata = header.metadata or {"format": "pt"}
        head, offsets = encode_header(entries, metadata)
        with open(os.path.join(dst_fp8_dir, shard), "wb") as out:
            out.write(head)
            for info in header.tensors.values():
                if _quantizable(info):
                    w = _read_tensor(src_path, header.data_offset, info)
                    q, s = quantize_block_fp8(w, block, scale_dtype)
                    out.write(q.tobytes())
                    out.write(s.tobytes())
                    quantized += 1
                else:
                    with open(src_path, "rb") as fin:
                        fin.seek(header.data_offset + info.begin)
                        out.write(fin.read(info.nbytes))
            out.flush()
            os.fsync(out.fileno())
        for name, (begin, end) in offsets.items():
            weight_map[name] = shard
            total += end - begin

    if layout.index is not None:
        index = dict(layout.index)
        index["metadata"] = {**(index.get("metadata") or {}), "total_size": total}
        index["weight_map"] = weight_map
        _write_json(os.path.join(dst_fp8_dir, INDEX_NAME), index)
    config = dict(config)
    config["quantization_config"] = {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [int(block[0]), int(block[1])],
    }
    _write_json(os.path.join(dst_fp8_dir, "config.json"), config)
    for rel in other_files(src_bf16_dir, layout.shards):
        copy_file(os.path.join(src_bf16_dir, rel), os.path.join(dst_fp8_dir, rel))
    return {"tensors": len(weight_map), "quantized": quantized, "total_size": total}


def _quantizable(info: Any) -> bool:
    return bool(
        QUANTIZED_WEIGHT.search(info.name) and len(info.shape) == 2 and info.dtype in FLOAT_DTYPES
    )


def _write_json(path: str, doc: dict) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, ensure_ascii=False)
        fh.write("\n")
