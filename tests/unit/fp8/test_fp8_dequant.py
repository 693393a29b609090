"""Numerics of the tile dequantizer: bit-identical to the torch reference."""

from __future__ import annotations

import math

import pytest

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")

from ascend_deploy.fp8.dequant import (  # noqa: E402
    count_nan_codes,
    dequantize_block,
    fp8_to_f32_table,
    reference_dequantize,
)
from ascend_deploy.fp8.numeric import np_dtype  # noqa: E402

SCALE_DTYPES = ["F32", "BF16", "F16"]
# (rows, cols, block): full tiles, partial edge tiles on either or both axes, a matrix
# smaller than one tile, a non-square block and the Qwen3-4B down_proj shape.
SHAPES = [
    (256, 384, (128, 128)),
    (300, 200, (128, 128)),
    (129, 1, (128, 128)),
    (1, 257, (128, 128)),
    (77, 50, (128, 128)),
    (130, 70, (64, 32)),
    (2560, 9728, (128, 128)),
]


def random_codes(rng, shape):
    codes = rng.integers(0, 256, shape, dtype=np.uint8)
    codes[(codes & 0x7F) == 0x7F] = 0x00  # no NaN codes
    return codes


def random_scales(rng, grid, dtype):
    # Realistic amax/448 magnitudes plus extremes: tiny (F16 subnormal), large, zero.
    values = rng.uniform(1e-5, 5e-3, grid).astype(np.float32)
    values.flat[0] = 6.0e-8 if dtype == "F16" else 1e-30
    if values.size > 2:
        values.flat[1] = 0.0
        values.flat[-1] = 3.0e4 if dtype == "F16" else 1e30
    return values.astype(np_dtype(dtype))


def torch_reference(codes, scales, block):
    """The straightforward torch dequantization the converter must match bit for bit."""
    torch = pytest.importorskip("torch")
    w = torch.from_numpy(codes.copy()).view(torch.float8_e4m3fn)
    s = torch.from_numpy(scales.astype(np.float32))
    rows, cols = codes.shape
    expanded = s.repeat_interleave(block[0], 0).repeat_interleave(block[1], 1)[:rows, :cols]
    return (w.to(torch.float32) * expanded).to(torch.bfloat16).view(torch.int16).numpy()


@pytest.mark.parametrize("scale_dtype", SCALE_DTYPES)
@pytest.mark.parametrize(("rows", "cols", "block"), SHAPES)
def test_bit_identical_to_torch_reference(rows, cols, block, scale_dtype):
    rng = np.random.default_rng(rows * 7919 + cols)
    codes = random_codes(rng, (rows, cols))
    grid = (math.ceil(rows / block[0]), math.ceil(cols / block[1]))
    scales = random_scales(rng, grid, scale_dtype)
    got = dequantize_block(codes, scales.astype(np.float32), block)
    want = torch_reference(codes, scales, block)
    assert got.dtype == np.uint16 and got.shape == (rows, cols)
    assert np.array_equal(got.view(np.int16), want)
    # and to the straightforward numpy path used by --verify
    assert np.array_equal(got, reference_dequantize(codes, scales.astype(np.float32), block))


def test_every_code_times_awkward_scales_matches_torch():
    """All 256 codes (incl. subnormals, +-0, +-448) against scales that force rounding."""
    codes = np.tile(np.arange(256, dtype=np.uint8), (3, 1))
    codes[(codes & 0x7F) == 0x7F] = 0x01
    scales = np.array([[1.0078125], [3.0517578e-05], [0.33333334]], dtype=np.float32)
    got = dequantize_block(codes, scales, (1, 256))
    assert np.array_equal(got.view(np.int16), torch_reference(codes, scales, (1, 256)))
    # the products really need rounding: not every value is exact in BF16
    exact = fp8_to_f32_table()[codes] * scales
    assert not np.array_equal(exact.astype(ml_dtypes.bfloat16).astype(np.float32), exact)


def test_fp8_table_is_e4m3fn():
    table = fp8_to_f32_table()
    assert table[0x7E] == 448.0 and table[0xFE] == -448.0
    assert table[0x01] == 2.0**-9  # smallest subnormal
    assert np.isnan(table[0x7F]) and np.isnan(table[0xFF])
    assert np.isfinite(np.delete(table, [0x7F, 0xFF])).all()


def test_count_nan_codes():
    codes = np.zeros((4, 5), dtype=np.uint8)
    assert count_nan_codes(codes) == 0
    codes[1, 2] = 0x7F
    codes[3, 4] = 0xFF
    codes[0, 0] = 0x7E  # 448 is not NaN
    assert count_nan_codes(codes) == 2


@pytest.mark.parametrize(
    ("rows", "cols", "block", "chunk"),
    [
        (300, 200, (128, 128), 7 * 200),  # 7-row chunks: tile rows end mid-chunk
        (77, 50, (128, 128), 1),  # one row per chunk
        (5, 300, (2, 1), 1 << 16),  # 300 tiles a row: the table needs a wide index
    ],
)
def test_chunked_gather_matches_torch(monkeypatch, rows, cols, block, chunk):
    import ascend_deploy.fp8.dequant as dequant

    monkeypatch.setattr(dequant, "CHUNK_ELEMENTS", chunk)
    rng = np.random.default_rng(rows + cols)
    codes = random_codes(rng, (rows, cols))
    grid = (math.ceil(rows / block[0]), math.ceil(cols / block[1]))
    scales = random_scales(rng, grid, "BF16")
    got = dequantize_block(codes, scales.astype(np.float32), block)
    assert np.array_equal(got.view(np.int16), torch_reference(codes, scales, block))
