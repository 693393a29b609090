"""Write safetensors headers (standard library only).

Format: little-endian u64 header length, UTF-8 JSON header, tensor data. The reference
implementation pads the JSON with spaces so the data starts 8-byte aligned
(https://github.com/huggingface/safetensors, README "Format"); so do we.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterable, Sequence

from ..model.safetensors_header import DTYPE_SIZES


def tensor_nbytes(dtype: str, shape: Sequence[int]) -> int:
    return math.prod(shape) * DTYPE_SIZES[dtype]


def encode_header(
    entries: Iterable[tuple[str, str, Sequence[int]]], metadata: dict[str, str] | None = None
) -> tuple[bytes, dict[str, tuple[int, int]]]:
    """Header bytes (length prefix included) for tensors laid out back to back in order.

    Returns the bytes and each tensor's ``(begin, end)`` relative to the data section.
    """
    doc: dict[str, object] = {}
    if metadata:
        doc["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offsets: dict[str, tuple[int, int]] = {}
    pos = 0
    for name, dtype, shape in entries:
        n = tensor_nbytes(dtype, shape)
        doc[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [pos, pos + n]}
        offsets[name] = (pos, pos + n)
        pos += n
    raw = json.dumps(doc, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw, offsets
