"""Block-FP8 tile math with numpy and ml_dtypes (imported lazily by callers).

Every output element is ``bf16_round_nearest_even(float32(fp8) * float32(scale))``.
Because a tile has one scale, the result depends only on the 8-bit code and the tile, so
each tile is dequantized with one gather from its own 256-entry BF16 table built with
exactly that float32 product and ml_dtypes' round-to-nearest-even cast. That is
bit-identical to ``(w.float() * scale_expanded).bfloat16()`` and avoids float math on the
full matrix. ``reference_dequantize`` is the straightforward path, used by ``verify``.
"""

from __future__ import annotations

from typing import Any

from .numeric import np_dtype, numpy_modules

NAN_CODE = 0x7F  # float8_e4m3fn NaN is S.1111.111 (0x7F / 0xFF); it has no infinity


def fp8_to_f32_table() -> Any:
    """float32 value of each of the 256 float8_e4m3fn codes."""
    np, ml = numpy_modules()
    return np.arange(256, dtype=np.uint8).view(ml.float8_e4m3fn).astype(np.float32)


def scales_to_f32(raw: Any, dtype: str, shape: tuple[int, ...]) -> Any:
    """Decode a scale tensor's bytes (F32/BF16/F16) to a float32 grid."""
    np, _ = numpy_modules()
    return np.frombuffer(raw, dtype=np_dtype(dtype)).reshape(shape).astype(np.float32)


class TileRowDequantizer:
    """Dequantize an ``[rows, cols]`` FP8 matrix one tile row (``bm`` rows) at a time."""

    def __init__(self, cols: int, block: tuple[int, int], scales_f32: Any) -> None:
        np, _ = numpy_modules()
        self.np = np
        self.bm, self.bn = block
        self.cols = cols
        self.scales = scales_f32
        self.lut = fp8_to_f32_table()

    def tile_row(self, i: int, codes: Any, out: Any | None = None) -> Any:
        """BF16 bits (uint16) of tile row ``i`` from its uint8 codes ``[<=bm, cols]``."""
        np = self.np
        if out is None:
            out = np.empty(codes.shape, dtype=np.uint16)
        # One 256-entry table per tile: table[j, code] = bf16(f32(code) * f32(scale[i, j])).
        tables = _f32_to_bf16_bits(self.lut[None, :] * self.scales[i][:, None])
        bn = self.bn
        for j in range(tables.shape[0]):
            cols = slice(j * bn, (j + 1) * bn)  # the last tile may be narrower
            np.take(tables[j], codes[:, cols], out=out[:, cols], mode="clip")
        return out


def count_nan_codes(codes: Any, scratch: Any | None = None) -> int:
    """Number of float8_e4m3fn NaN codes (0x7F, 0xFF) in a uint8 array.

    ``scratch`` (uint8, same shape) avoids an allocation; the common no-NaN case costs
    one masked copy and a max.
    """
    np, _ = numpy_modules()
    masked = np.bitwise_and(codes, 0x7F, out=scratch)
    if masked.size == 0 or masked.max() != NAN_CODE:
        return 0
    return int(np.count_nonzero(masked == NAN_CODE))


def _f32_to_bf16_bits(x: Any) -> Any:
    np, ml = numpy_modules()
    return x.astype(ml.bfloat16).view(np.uint16)


def dequantize_block(codes: Any, scales_f32: Any, block: tuple[int, int]) -> Any:
    """Whole-matrix tile-table dequantization; returns BF16 bits (uint16)."""
    np, _ = numpy_modules()
    rows, cols = codes.shape
    deq = TileRowDequantizer(cols, block, scales_f32)
    out = np.empty((rows, cols), dtype=np.uint16)
    for i, start in enumerate(range(0, rows, block[0])):
        stop = min(rows, start + block[0])
        deq.tile_row(i, codes[start:stop], out=out[start:stop])
    return out


def reference_dequantize(codes: Any, scales_f32: Any, block: tuple[int, int]) -> Any:
    """The straightforward path: expand and crop the scales, multiply in float32, round."""
    np, ml = numpy_modules()
    rows, cols = codes.shape
    bm, bn = block
    expanded = np.repeat(np.repeat(scales_f32, bm, axis=0), bn, axis=1)[:rows, :cols]
    values = codes.view(ml.float8_e4m3fn).astype(np.float32) * expanded
    return _f32_to_bf16_bits(values)
