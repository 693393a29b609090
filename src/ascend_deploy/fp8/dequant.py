"""Block-FP8 tile math with numpy and ml_dtypes (imported lazily by callers).

Every output element is ``bf16_round_nearest_even(float32(fp8) * float32(scale))``.
Because a tile has one scale, the result depends only on the 8-bit code and the tile, so
each tile gets its own 256-entry BF16 table built with exactly that float32 product and
ml_dtypes' round-to-nearest-even cast. That is bit-identical to
``(w.float() * scale_expanded).bfloat16()`` and avoids float math on the full matrix. The
tables of a tile row are laid end to end, so a chunk of rows is dequantized by one gather
(``table[code + 256 * tile_of_column]``), a few numpy calls that release the GIL.
``reference_dequantize`` is the straightforward path, used by ``verify``.
"""

from __future__ import annotations

from typing import Any

from .numeric import np_dtype, numpy_modules

NAN_CODE = 0x7F  # float8_e4m3fn NaN is S.1111.111 (0x7F / 0xFF); it has no infinity
# Elements per gather (128 KiB of output): a chunk's codes, index and output stay in a
# core's L2 cache from the gather through the pwrite copy into the page cache (measured
# here: 30-40% less kernel time for that copy than from 1-2.5 MB tile rows).
CHUNK_ELEMENTS = 64 << 10


def fp8_to_f32_table() -> Any:
    """float32 value of each of the 256 float8_e4m3fn codes."""
    np, ml = numpy_modules()
    return np.arange(256, dtype=np.uint8).view(ml.float8_e4m3fn).astype(np.float32)


def scales_to_f32(raw: Any, dtype: str, shape: tuple[int, ...]) -> Any:
    """Decode a scale tensor's bytes (F32/BF16/F16) to a float32 grid."""
    np, _ = numpy_modules()
    return np.frombuffer(raw, dtype=np_dtype(dtype)).reshape(shape).astype(np.float32)


class TileRowDequantizer:
    """Dequantize an ``[rows, cols]`` FP8 matrix tile row by tile row, in row chunks.

    All tables are built at once (output bytes / 64); ``rows`` then turns up to
    ``chunk_rows`` rows of one tile row into BF16 bits with one add and one gather. Not
    thread-safe (one index buffer): use one instance per thread.
    """

    def __init__(self, cols: int, block: tuple[int, int], scales_f32: Any) -> None:
        np, _ = numpy_modules()
        self.np = np
        self.bm, self.bn = block
        self.cols = cols
        # tables[i, 256 * tile + code] = bf16(f32(code) * f32(scale[i, tile]))
        products = fp8_to_f32_table()[None, None, :] * scales_f32[:, :, None]
        grid_rows, grid_cols = scales_f32.shape
        self.tables = _f32_to_bf16_bits(products).reshape(grid_rows, grid_cols * 256)
        index_dtype = np.uint16 if self.tables.shape[1] <= 1 << 16 else np.intp
        self.offsets = (np.arange(cols) // self.bn * 256).astype(index_dtype)
        self.chunk_rows = max(1, min(self.bm, CHUNK_ELEMENTS // max(cols, 1)))
        self.index = np.empty((self.chunk_rows, cols), dtype=index_dtype)

    def rows(self, i: int, codes: Any, out: Any) -> Any:
        """BF16 bits (uint16) into ``out`` of ``codes`` (<= ``chunk_rows`` rows of tile row i)."""
        index = self.index[: codes.shape[0]]
        self.np.add(codes, self.offsets, out=index)
        return self.tables[i].take(index, out=out, mode="clip")

    def tile_row(self, i: int, codes: Any, out: Any | None = None) -> Any:
        """BF16 bits (uint16) of tile row ``i`` from its uint8 codes ``[<=bm, cols]``."""
        if out is None:
            out = self.np.empty(codes.shape, dtype=self.np.uint16)
        step = self.chunk_rows
        for r in range(0, codes.shape[0], step):
            self.rows(i, codes[r : r + step], out[r : r + step])
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
