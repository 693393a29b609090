"""The synthetic Qwen3 checkpoint writer: layouts, sizes, data validity, sparse files."""

from __future__ import annotations

import json
import math
import os

import pytest

from ascend_deploy.model.files import read_weight_layout
from ascend_deploy.model.safetensors_header import read_header
from ascend_sim.checkpoints import QWEN3_ARCHS, qwen3_tensors, write_checkpoint

SIZES = {"F8_E4M3": 1, "BF16": 2, "F16": 2, "F32": 4}


def total(specs):
    return sum(math.prod(shape) * SIZES[dtype] for _, dtype, shape in specs)


# docs/sources.md (block-FP8 checkpoints): tensor counts and total_size
# (BF16 release, FP8 release with BF16 scales)
@pytest.mark.parametrize(
    ("arch", "bf16_count", "bf16_size", "fp8_count", "fp8_size"),
    [
        ("qwen3-0.6b", 310, 1_192_099_840, 506, 751_751_680),
        ("qwen3-1.7b", 310, 3_441_149_952, 506, 2_032_035_840),
        ("qwen3-4b", 398, 8_044_936_192, 650, 4_412_063_872),
        ("qwen3-8b", 399, 16_381_470_720, 651, 9_436_551_168),
    ],
)
def test_tensor_tables_match_published_sizes(arch, bf16_count, bf16_size, fp8_count, fp8_size):
    cfg = QWEN3_ARCHS[arch]
    bf16 = qwen3_tensors(cfg, None)
    fp8 = qwen3_tensors(cfg, (128, 128))
    assert (len(bf16), total(bf16)) == (bf16_count, bf16_size)
    assert (len(fp8), total(fp8)) == (fp8_count, fp8_size)


def test_qwen3_4b_names_shapes_and_scales():
    specs = {n: (d, s) for n, d, s in qwen3_tensors(QWEN3_ARCHS["qwen3-4b"], (128, 128))}
    assert "lm_head.weight" not in specs  # tied embeddings
    assert specs["model.embed_tokens.weight"] == ("BF16", (151936, 2560))
    assert specs["model.layers.35.self_attn.q_proj.weight"] == ("F8_E4M3", (4096, 2560))
    assert specs["model.layers.0.self_attn.k_proj.weight_scale_inv"] == ("BF16", (8, 20))
    assert specs["model.layers.7.mlp.down_proj.weight_scale_inv"] == ("BF16", (20, 76))
    assert specs["model.layers.3.self_attn.q_norm.weight"] == ("BF16", (128,))
    assert "model.layers.36.input_layernorm.weight" not in specs


def test_untied_models_have_lm_head_and_partial_blocks_round_up():
    names = [n for n, _, _ in qwen3_tensors(QWEN3_ARCHS["qwen3-14b"], (128, 128))]
    assert names[-1] == "lm_head.weight"
    odd = dict(QWEN3_ARCHS["qwen3-0.6b"], intermediate_size=3000, num_hidden_layers=1)
    specs = {n: s for n, _, s in qwen3_tensors(odd, (128, 128))}
    assert specs["model.layers.0.mlp.up_proj.weight_scale_inv"] == (24, 8)  # ceil(3000/128)


def test_sparse_full_4b_checkpoint_costs_no_disk_and_reads_back(tmp_path):
    info = write_checkpoint(str(tmp_path), "qwen3-4b", data="sparse")
    assert info["tensor_count"] == 650 and info["served_tensor_count"] == 398
    assert info["total_size"] == 4_412_063_872
    assert info["served_total_size"] == 8_044_936_192
    files = sorted(os.listdir(tmp_path))
    assert files == [
        "config.json",
        "generation_config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "tokenizer_config.json",
    ]
    used = sum(os.stat(tmp_path / f).st_blocks * 512 for f in files)
    assert used < 10 * 2**20  # 4.4 GB of tensors, holes only
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["quantization_config"] == {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    }
    assert config["num_hidden_layers"] == 36 and config["tie_word_embeddings"] is True
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert index["metadata"]["total_size"] == 4_412_063_872
    layout = read_weight_layout(str(tmp_path))  # cross-checks every header against the index
    assert len(layout.weight_map) == 650 and layout.total_bytes == 4_412_063_872


def test_bf16_checkpoint_without_quantization_config(tmp_path):
    info = write_checkpoint(str(tmp_path), "qwen3-0.6b", fp8=False, data="sparse")
    config = json.loads((tmp_path / "config.json").read_text())
    assert "quantization_config" not in config
    assert info["tensor_count"] == info["served_tensor_count"] == 310
    assert info["total_size"] == 1_192_099_840


@pytest.mark.parametrize("scale_dtype", ["BF16", "F16", "F32"])
def test_random_data_is_finite_and_has_no_fp8_nan(tmp_path, scale_dtype):
    np = pytest.importorskip("numpy")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    cfg = dict(QWEN3_ARCHS["qwen3-0.6b"], vocab_size=4096)  # small embedding: fast
    info = write_checkpoint(
        str(tmp_path), cfg, layers=2, scale_dtype=scale_dtype, shard_bytes=20_000_000, seed=3
    )
    assert len(info["shards"]) > 1
    np_types = {"BF16": ml_dtypes.bfloat16, "F16": np.float16, "F32": np.float32}
    seen_scales = 0
    for shard in info["shards"]:
        header = read_header(tmp_path / shard)
        raw = (tmp_path / shard).read_bytes()[header.data_offset :]
        for t in header.tensors.values():
            buf = np.frombuffer(raw[t.begin : t.end], dtype=np.uint8)
            if t.dtype == "F8_E4M3":
                assert not np.any((buf & 0x7F) == 0x7F), t.name
                assert len(np.unique(buf)) > 200  # really random bytes
                continue
            values = buf.view(np_types[t.dtype]).astype(np.float32)
            assert np.all(np.isfinite(values)), t.name
            if t.name.endswith("_scale_inv"):
                assert t.dtype == scale_dtype
                assert np.all(values > 0)
                seen_scales += 1
            elif t.name.endswith("norm.weight"):
                assert np.all((values >= 1.0) & (values < 2.0))
            else:
                assert 0 < np.abs(values).max() < 0.07
    assert seen_scales == 2 * 7


def test_same_seed_same_bytes(tmp_path):
    cfg = dict(QWEN3_ARCHS["qwen3-0.6b"], vocab_size=2048)
    a = write_checkpoint(str(tmp_path / "a"), cfg, layers=1, seed=7)
    b = write_checkpoint(str(tmp_path / "b"), cfg, layers=1, seed=7)
    for shard in a["shards"]:
        assert (tmp_path / "a" / shard).read_bytes() == (tmp_path / "b" / shard).read_bytes()
    assert b["shards"] == a["shards"]


def test_layers_override(tmp_path):
    info = write_checkpoint(str(tmp_path), "qwen3-4b", layers=3, data="sparse")
    assert info["config"]["num_hidden_layers"] == 3
    assert info["tensor_count"] == 2 + 3 * 18


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"arch": "qwen3-7b"}, "unknown architecture"),
        ({"layers": 0}, "layers must be a positive integer"),
        ({"data": "zeros"}, "data must be"),
        ({"scale_dtype": "F8_E4M3"}, "scale_dtype must be"),
        ({"shard_bytes": 0}, "shard_bytes must be"),
    ],
)
def test_bad_arguments(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        write_checkpoint(str(tmp_path), **{"data": "sparse", **kwargs})
