"""quantize_block_fp8 / quantize_checkpoint produce the published block-FP8 format."""

from __future__ import annotations

import json
import os

import pytest

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")

from test_fp8_fixtures import read_tensors, write_bf16_model  # noqa: E402

from ascend_deploy.errors import InputError  # noqa: E402
from ascend_deploy.fp8.dequant import reference_dequantize  # noqa: E402
from ascend_deploy.fp8.quantize import quantize_block_fp8, quantize_checkpoint  # noqa: E402


def dequant(q, s, block=(128, 128)):
    bits = reference_dequantize(q.view(np.uint8), s.astype(np.float32), block)
    return bits.view(ml_dtypes.bfloat16).astype(np.float32)


@pytest.mark.parametrize("scale_dtype", ["F32", "BF16", "F16"])
def test_scale_is_tile_amax_over_448_and_stored_in_requested_dtype(scale_dtype):
    rng = np.random.default_rng(1)
    w = (0.02 * rng.standard_normal((300, 200))).astype(np.float32)
    q, s = quantize_block_fp8(w, scale_dtype=scale_dtype)
    assert q.dtype == ml_dtypes.float8_e4m3fn and q.shape == (300, 200)
    want_dtype = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16}[scale_dtype]
    assert s.dtype == want_dtype and s.shape == (3, 2)
    # edge tile (rows 256..299, cols 128..199) uses only its own elements
    amax = np.abs(w[256:, 128:]).max()
    assert s[2, 1] == np.asarray(amax / 448.0, dtype=np.float32).astype(want_dtype)
    # the largest element of each tile lands on (or next to) the FP8 maximum
    assert np.abs(q.astype(np.float32)).max() >= 416.0


def test_error_is_within_fp8_rounding():
    rng = np.random.default_rng(2)
    w = (0.02 * rng.standard_normal((256, 384))).astype(np.float32)
    q, s = quantize_block_fp8(w, scale_dtype="F32")
    back = q.astype(np.float32) * np.repeat(np.repeat(s, 128, 0), 128, 1)
    # e4m3 keeps 3 mantissa bits: relative error <= 2**-4 for normal values; subnormals
    # (below 2**-6 of the tile scale) have an absolute error <= 2**-10 * scale.
    scale = np.repeat(np.repeat(s, 128, 0), 128, 1)
    err = np.abs(back - w)
    assert (err <= np.maximum(np.abs(w) * 2.0**-4, scale * 2.0**-10) * (1 + 1e-6)).all()
    rel = np.linalg.norm(back - w) / np.linalg.norm(w)
    assert 0.005 < rel < 0.05  # ~2.6% simulated (docs/sources.md)


def test_zero_tiles_and_clamping():
    w = np.zeros((130, 130), dtype=np.float32)
    w[0, 0] = 1.0
    q, s = quantize_block_fp8(w, scale_dtype="BF16")
    assert float(s[1, 1]) == 1.0  # all-zero tile: scale 1, codes 0
    assert not np.isnan(q.astype(np.float32)).any()
    assert q.astype(np.float32)[0, 0] == 448.0


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="2-D"):
        quantize_block_fp8(np.zeros(5, dtype=np.float32))
    with pytest.raises(ValueError, match="scale_dtype"):
        quantize_block_fp8(np.zeros((2, 2), dtype=np.float32), scale_dtype="F64")


def test_quantize_checkpoint_layout(tmp_path):
    src = write_bf16_model(str(tmp_path / "bf16"))
    result = quantize_checkpoint(src, str(tmp_path / "fp8"), scale_dtype="F16")
    out = read_tensors(str(tmp_path / "fp8"))
    orig = read_tensors(src)
    linear = [n for n in orig if n.endswith("_proj.weight")]
    assert result["quantized"] == len(linear) == 14
    assert len(out) == len(orig) + len(linear)
    for name, (dtype, shape, raw) in orig.items():
        if name in linear:
            q, s = out[name], out[name + "_scale_inv"]
            assert q[0] == "F8_E4M3" and q[1] == shape and s[0] == "F16"
            w = np.frombuffer(raw, ml_dtypes.bfloat16).reshape(shape).astype(np.float32)
            deq = dequant(
                np.frombuffer(q[2], np.uint8).reshape(shape),
                np.frombuffer(s[2], np.float16).reshape(s[1]),
            )
            assert np.linalg.norm(deq - w) / np.linalg.norm(w) < 0.05
        else:  # embeddings, norms, lm_head: bit for bit
            assert out[name] == (dtype, shape, raw)
    with open(tmp_path / "fp8" / "model.safetensors.index.json") as fh:
        index = json.load(fh)
    assert index["metadata"]["total_size"] == result["total_size"]
    assert sum(len(v[2]) for v in out.values()) == result["total_size"]
    assert set(index["weight_map"]) == set(out)
    with open(tmp_path / "fp8" / "config.json") as fh:
        assert json.load(fh)["quantization_config"]["weight_block_size"] == [128, 128]
    assert (tmp_path / "fp8" / "extra" / "notes.txt").read_text() == "a file in a subdirectory\n"


def test_quantize_checkpoint_refuses_quantized_input_and_nonempty_output(tmp_path):
    src = write_bf16_model(str(tmp_path / "bf16"), shards=1)
    quantize_checkpoint(src, str(tmp_path / "fp8"))
    with pytest.raises(InputError, match="already has a quantization_config"):
        quantize_checkpoint(str(tmp_path / "fp8"), str(tmp_path / "again"))
    with pytest.raises(InputError, match="not empty"):
        quantize_checkpoint(src, str(tmp_path / "fp8"))
    assert os.path.exists(tmp_path / "fp8" / "model.safetensors")
