"""Block-FP8 tile math with numpy and ml_dtypes (imported lazily by callers).

BF16 output (the default): every element is
``bf16_round_nearest_even(float32(fp8) * float32(scale))``, the float32 product rounded
once more to BF16, exactly what ``(w.float() * scale_expanded).bfloat16()`` gives.

FP16 output (310P): every element is ``fp16_round_nearest_even(fp8 * scale)`` of the
*exact* product, rounded once. The product of a 4-significant-bit e4m3 value and a
24-bit float32 scale has up to 28 significant bits, so a float32 product can itself be
rounded, and rounding that again to FP16 is a double rounding that differs from the
exact one at ties (and BF16 in between would lose 3 more bits). The product is
therefore formed in float64, where it is exact (28 <= 53 bits, exponents well inside
float64's range), and numpy's float64 -> float16 cast rounds it once to nearest even.
A product whose magnitude rounds to infinity (>= 65520; FP16's largest finite value is
65504) is an overflow the caller refuses (``TileRowDequantizer.overflows``).
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

F16_EXPONENT = 0x7C00  # all-ones exponent of binary16: infinity or NaN
BF16_EXPONENT = 0x7F80

NAN_CODE = 0x7F  # float8_e4m3fn NaN is S.1111.111 (0x7F / 0xFF); it has no infinity
# Elements per gather (128 KiB of output): a chunk's codes, index and output stay in a
# core's L2 cache from the gather through the pwrite copy into the page cache (measured
# here: 30-40% less kernel time for that copy than from 1-2.5 MB tile rows).
CHUNK_ELEMENTS = 64 << 10


def fp8_to_f32_table() -> Any:
    """float32 value of each of the 256 float8_e4m3fn codes."""
    np, ml = numpy_modules()
    return np.arange(256, dtype=np.uint8).view(ml.float8_e4m3fn).astype(np.float32)


def fp8_to_f64_table() -> Any:
    """float64 value of each of the 256 float8_e4m3fn codes (exact)."""
    np, _ = numpy_modules()
    return fp8_to_f32_table().astype(np.float64)


def product_bits(codes_values: Any, scales_f32: Any, out_dtype: str) -> Any:
    """uint16 bits of ``fp8 value * scale`` rounded to ``out_dtype`` (BF16 or F16).

    ``codes_values`` are the float32 values of FP8 codes and ``scales_f32`` float32 scales
    (broadcastable). BF16: float32 product, then round to nearest even. F16: exact
    float64 product, rounded once to nearest even.
    """
    np, ml = numpy_modules()
    if out_dtype == "F16":
        product = codes_values.astype(np.float64) * scales_f32.astype(np.float64)
        with np.errstate(over="ignore"):  # infinities are found and refused by the caller
            return product.astype(np.float16).view(np.uint16)
    if out_dtype != "BF16":
        raise ValueError(f"output dtype must be BF16 or F16, got {out_dtype!r}")
    return (codes_values * scales_f32).astype(ml.bfloat16).view(np.uint16)


def scales_to_f32(raw: Any, dtype: str, shape: tuple[int, ...]) -> Any:
    """Decode a scale tensor's bytes (F32/BF16/F16) to a float32 grid."""
    np, _ = numpy_modules()
    return np.frombuffer(raw, dtype=np_dtype(dtype)).reshape(shape).astype(np.float32)


class TileRowDequantizer:
    """Dequantize an ``[rows, cols]`` FP8 matrix tile row by tile row, in row chunks.

    All tables are built at once (output bytes / 64); ``rows`` then turns up to
    ``chunk_rows`` rows of one tile row into BF16 (or F16) bits with one add and one
    gather. Not thread-safe (one index buffer): use one instance per thread.
    """

    def __init__(
        self, cols: int, block: tuple[int, int], scales_f32: Any, out_dtype: str = "BF16"
    ) -> None:
        np, _ = numpy_modules()
        self.np = np
        self.bm, self.bn = block
        self.cols = cols
        # tables[i, 256 * tile + code] = round(code * scale[i, tile]) (module docstring)
        table = fp8_to_f32_table()[None, None, :]
        bits = product_bits(table, scales_f32[:, :, None], out_dtype)
        grid_rows, grid_cols = scales_f32.shape
        self.tables = bits.reshape(grid_rows, grid_cols * 256)
        index_dtype = np.uint16 if self.tables.shape[1] <= 1 << 16 else np.intp
        self.offsets = (np.arange(cols) // self.bn * 256).astype(index_dtype)
        self.chunk_rows = max(1, min(self.bm, CHUNK_ELEMENTS // max(cols, 1)))
        self.index = np.empty((self.chunk_rows, cols), dtype=index_dtype)
        # FP16 overflow: per tile the smallest magnitude code (code & 0x7F; e4m3fn is
        # sign-magnitude, so values grow with it) whose product is infinite, 0x80 if none.
        # Only tile rows with such a code need a look at their codes (none, usually).
        self.overflow_rows: Any = None
        if out_dtype == "F16":
            infinite = (bits[:, :, :0x80] & 0x7FFF) == F16_EXPONENT
            first = np.where(infinite.any(axis=2), infinite.argmax(axis=2), 0x80)
            self.limits = first.astype(np.uint8)  # [grid_rows, grid_cols]
            self.overflow_rows = infinite.any(axis=(1, 2))
            self.limit_cols = self.limits[:, np.arange(cols) // self.bn]

    def overflows(self, i: int, codes: Any) -> bool:
        """True if an FP16 product of tile row ``i``'s ``codes`` is infinite (F16 only)."""
        if self.overflow_rows is None or not self.overflow_rows[i]:
            return False
        magnitude = self.np.bitwise_and(codes, 0x7F)
        return bool((magnitude >= self.limit_cols[i]).any())

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


def largest_magnitude(codes: Any, scales_f32: Any, bn: int) -> float:
    """Largest ``|fp8 * scale|`` (exact, float64) of one tile row.

    ``codes``: uint8 ``[rows, cols]`` of one tile row; ``scales_f32``: its scale row
    ``[ceil(cols / bn)]``. NaN codes must have been refused before.
    """
    np, _ = numpy_modules()
    magnitude = np.bitwise_and(codes, 0x7F)
    per_tile = np.maximum.reduceat(magnitude.max(axis=0), np.arange(0, codes.shape[1], bn))
    values = fp8_to_f64_table()[per_tile] * np.abs(scales_f32.astype(np.float64))
    return float(values.max()) if values.size else 0.0


def bf16_to_f16_bits(bits: Any) -> Any:
    """F16 bits (uint16) of BF16 bits (uint16): exact to float32, one rounding to F16."""
    np, ml = numpy_modules()
    with np.errstate(over="ignore"):  # infinities are found by f16_overflow
        return bits.view(ml.bfloat16).astype(np.float32).astype(np.float16).view(np.uint16)


def f16_overflow(src_bf16: Any, out_f16: Any) -> bool:
    """True where a finite BF16 value became an FP16 infinity (> 65504 after rounding)."""
    finite = (src_bf16 & BF16_EXPONENT) != BF16_EXPONENT
    infinite = (out_f16 & 0x7FFF) == F16_EXPONENT
    return bool((finite & infinite).any())


def largest_finite_bf16(bits: Any) -> float:
    """Largest magnitude of the finite values among BF16 bits (uint16)."""
    np, ml = numpy_modules()
    finite = bits[(bits & BF16_EXPONENT) != BF16_EXPONENT]
    if not finite.size:
        return 0.0
    return float(np.abs(finite.view(ml.bfloat16).astype(np.float32)).max())


def _f32_to_bf16_bits(x: Any) -> Any:
    np, ml = numpy_modules()
    return x.astype(ml.bfloat16).view(np.uint16)


def dequantize_block(
    codes: Any, scales_f32: Any, block: tuple[int, int], out_dtype: str = "BF16"
) -> Any:
    """Whole-matrix tile-table dequantization; returns BF16 (or F16) bits (uint16)."""
    np, _ = numpy_modules()
    rows, cols = codes.shape
    deq = TileRowDequantizer(cols, block, scales_f32, out_dtype)
    out = np.empty((rows, cols), dtype=np.uint16)
    for i, start in enumerate(range(0, rows, block[0])):
        stop = min(rows, start + block[0])
        deq.tile_row(i, codes[start:stop], out=out[start:stop])
    return out


def reference_dequantize(
    codes: Any, scales_f32: Any, block: tuple[int, int], out_dtype: str = "BF16"
) -> Any:
    """The straightforward path: expand and crop the scales, multiply, round once.

    BF16: float32 product rounded to BF16. F16: float64 (exact) product rounded to F16.
    """
    np, ml = numpy_modules()
    rows, cols = codes.shape
    bm, bn = block
    expanded = np.repeat(np.repeat(scales_f32, bm, axis=0), bn, axis=1)[:rows, :cols]
    if out_dtype == "F16":
        values = codes.view(ml.float8_e4m3fn).astype(np.float64) * expanded.astype(np.float64)
        with np.errstate(over="ignore"):
            return values.astype(np.float16).view(np.uint16)
    values = codes.view(ml.float8_e4m3fn).astype(np.float32) * expanded
    return _f32_to_bf16_bits(values)
