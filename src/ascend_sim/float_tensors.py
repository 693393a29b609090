"""Float tensors of a safetensors checkpoint as numpy arrays, and back to BF16/F32 bytes.

Shared by the tools that rewrite the tiny test model (ModelSlim W8A8, wider heads).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any


def read_float(src_dir: str, layout: Any, name: str) -> tuple[str, Any]:
    """Tensor ``name`` of the checkpoint ``layout`` (``model.files.read_weight_layout``) as
    float32, with its stored dtype (BF16 or F32; anything else is refused)."""
    import numpy as np

    shard = layout.weight_map[name]
    info = layout.headers[shard].tensors[name]
    with open(os.path.join(src_dir, shard), "rb") as fh:
        fh.seek(layout.headers[shard].data_offset + info.begin)
        raw = fh.read(info.nbytes)
    if info.dtype == "BF16":
        arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    elif info.dtype == "F32":
        arr = np.frombuffer(raw, dtype="<f4")
    else:
        raise ValueError(f"{src_dir}: tensor {name!r} is {info.dtype}; expected BF16 or F32")
    return info.dtype, arr.reshape(info.shape)


def bf16_bytes(values: Any) -> bytes:
    """``values`` rounded to BF16 (nearest even), little-endian."""
    import numpy as np

    bits = np.asarray(values, dtype=np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2").tobytes()


def bf16_round(values: Any) -> Any:
    """``values`` rounded to BF16 (nearest even) and widened back to float32: what a reader of
    ``bf16_bytes(values)`` gets."""
    import numpy as np

    bits = np.frombuffer(bf16_bytes(values), dtype="<u2").astype(np.uint32) << 16
    return bits.view(np.float32).reshape(np.shape(values))


def float_bytes(dtype: str, values: Any) -> bytes:
    """``values`` stored as ``dtype`` (BF16 or F32)."""
    import numpy as np

    return bf16_bytes(values) if dtype == "BF16" else np.asarray(values, "<f4").tobytes()


def write_tensor_file(
    path: str,
    tensors: Sequence[tuple[str, str, tuple[int, ...], bytes]],
    metadata: dict | None = None,
) -> int:
    """Write ``(name, dtype, shape, data)`` tensors as one safetensors file; the data bytes."""
    from ascend_deploy.fp8.safetensors_write import encode_header

    header, _offsets = encode_header(
        [(n, d, s) for n, d, s, _ in tensors], metadata or {"format": "pt"}
    )
    with open(path, "wb") as fh:
        fh.write(header)
        for *_meta, data in tensors:
            fh.write(data)
    return sum(len(t[3]) for t in tensors)
