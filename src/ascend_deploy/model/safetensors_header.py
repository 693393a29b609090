"""Read and validate safetensors headers with the standard library only.

Format (https://github.com/huggingface/safetensors, README "Format"): an unsigned
little-endian 64-bit header length N, N bytes of UTF-8 JSON, then the tensor data.
Each JSON entry is ``{"dtype", "shape", "data_offsets": [begin, end]}`` with offsets
relative to the start of the data; ``__metadata__`` maps strings to strings.
"""

from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass, field

from ..errors import InputError, shown

# Bytes per element of every dtype name the format defines.
DTYPE_SIZES: dict[str, int] = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}
# The reference implementation refuses headers above 100 MB.
MAX_HEADER_BYTES = 100 * 1000 * 1000


@dataclass(frozen=True)
class TensorInfo:
    """One tensor's entry in a safetensors header."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int  # relative to the data section
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass
class SafetensorsHeader:
    """A parsed header: tensors in file order, metadata, and where the data starts."""

    path: str
    data_offset: int
    file_size: int
    tensors: dict[str, TensorInfo] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def data_size(self) -> int:
        return self.file_size - self.data_offset


def read_header(path: str | os.PathLike[str]) -> SafetensorsHeader:
    """Parse and validate the header of one ``.safetensors`` file.

    Raises InputError naming the file (and tensor) for a missing, truncated or corrupt
    file, an oversized header, an unknown dtype, a size that disagrees with the shape,
    data offsets beyond the end of the file, or tensors that overlap or leave bytes of
    the data region unused.
    """
    p = os.fspath(path)
    try:
        size = os.path.getsize(p)
        with open(p, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise InputError(
                    f"{p}: truncated safetensors file ({size} bytes, no header length)"
                )
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES:
                raise InputError(
                    f"{p}: corrupt or oversized safetensors header ({n} bytes declared, "
                    f"limit {MAX_HEADER_BYTES}); the file is damaged or not safetensors"
                )
            if 8 + n > size:
                raise InputError(
                    f"{p}: truncated safetensors file: header declares {n} bytes but the file "
                    f"has {size} bytes; copy or download it again"
                )
            raw = fh.read(n)
    except FileNotFoundError:
        raise InputError(f"{p}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{p}: is a directory, expected a .safetensors file") from None
    except PermissionError:
        raise InputError(f"{p}: permission denied") from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{p}: corrupt safetensors header (not JSON: {exc})") from None
    except RecursionError:
        raise InputError(f"{p}: corrupt safetensors header (JSON nested too deeply)") from None
    if not isinstance(doc, dict):
        raise InputError(f"{p}: corrupt safetensors header (JSON is not an object)")
    header = SafetensorsHeader(path=p, data_offset=8 + n, file_size=size)
    meta = doc.pop("__metadata__", None) or {}
    if not isinstance(meta, dict):
        raise InputError(f"{p}: corrupt safetensors header (__metadata__ is not an object)")
    header.metadata = {str(k): str(v) for k, v in meta.items()}
    entries = []
    for name, entry in doc.items():
        entries.append(_tensor_info(p, name, entry, header.data_size))
    # Keep the order of the data in the file (the JSON order is not guaranteed to match).
    ordered = sorted(entries, key=lambda t: (t.begin, t.end))
    _check_coverage(p, ordered, header.data_size)
    for info in ordered:
        header.tensors[info.name] = info
    return header


def _check_coverage(path: str, ordered: list[TensorInfo], data_size: int) -> None:
    """The tensors, in offset order, tile the data region exactly (as safetensors requires:
    each one starts where the previous one ends, the last one ends at the end of the file)."""
    at = 0
    previous: TensorInfo | None = None
    for info in ordered:
        if info.begin < at and previous is not None:
            raise InputError(
                f"{path}: tensor {shown(info.name)}: data_offsets [{info.begin}, {info.end}] "
                f"overlap tensor {shown(previous.name)} [{previous.begin}, {previous.end}]; the "
                "header is corrupt (the safetensors library refuses it) - download the file again"
            )
        if info.begin > at:
            raise InputError(
                f"{path}: data bytes {at}-{info.begin} belong to no tensor (gap before "
                f"{shown(info.name)}); the header is corrupt (the safetensors library refuses it)"
            )
        at = info.end
        previous = info
    if at != data_size:
        raise InputError(
            f"{path}: {data_size - at} data bytes after the last tensor belong to no tensor; "
            "the file is corrupt or was appended to (the safetensors library refuses it)"
        )


def _tensor_info(path: str, name: str, entry: object, data_size: int) -> TensorInfo:
    where = f"{path}: tensor {shown(name)}"
    if not isinstance(entry, dict):
        raise InputError(f"{where}: corrupt header entry (not an object)")
    dtype = entry.get("dtype")
    shape = entry.get("shape")
    offsets = entry.get("data_offsets")
    if dtype not in DTYPE_SIZES:
        raise InputError(f"{where}: unknown dtype {shown(dtype)}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise InputError(f"{where}: corrupt shape {shown(shape)}")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(o, int) for o in offsets)
        or not 0 <= offsets[0] <= offsets[1]
    ):
        raise InputError(f"{where}: corrupt data_offsets {shown(offsets)}")
    begin, end = offsets
    expected = math.prod(shape) * DTYPE_SIZES[dtype]
    if end - begin != expected:
        raise InputError(
            f"{where}: data_offsets {offsets} hold {end - begin} bytes but shape {shape} "
            f"of {dtype} needs {expected}"
        )
    if end > data_size:
        raise InputError(
            f"{where}: data offsets {offsets} go beyond the end of the file "
            f"({data_size} data bytes); the file is truncated"
        )
    return TensorInfo(name=name, dtype=dtype, shape=tuple(shape), begin=begin, end=end)
