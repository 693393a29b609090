"""Bad input: each case is refused with one line naming the file (and tensor), exit 2."""

from __future__ import annotations

import json
import os
import struct

import pytest

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")

from test_fp8_fixtures import copy_model, fp8_template, rewrite_shard  # noqa: E402

from ascend_deploy.cli import main  # noqa: E402

INDEX = "model.safetensors.index.json"
SHARD1 = "model-00001-of-00002.safetensors"
SHARD2 = "model-00002-of-00002.safetensors"


def load(path):
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def dump(path, doc):
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)


def shard_of(model, name):
    return load(os.path.join(model, INDEX))["weight_map"][name]


def fp8_name(model):
    """An FP8 weight whose dimensions give edge tiles (down_proj: [200, 328])."""
    return "model.layers.0.mlp.down_proj.weight"


def drop_tensor(model, name):
    rewrite_shard(
        model, shard_of(model, name), lambda ts: ts.remove(next(t for t in ts if t[0] == name))
    )
    index = load(os.path.join(model, INDEX))
    del index["weight_map"][name]
    dump(os.path.join(model, INDEX), index)


def replace_tensor(model, name, dtype, shape, raw):
    def edit(tensors):
        for t in tensors:
            if t[0] == name:
                t[1], t[2], t[3] = dtype, shape, raw

    rewrite_shard(model, shard_of(model, name), edit)


def edit_config(model, fn):
    path = os.path.join(model, "config.json")
    config = load(path)
    fn(config)
    dump(path, config)


def missing_scale(m):
    drop_tensor(m, fp8_name(m) + "_scale_inv")


def scale_wrong_shape(m):
    replace_tensor(m, fp8_name(m) + "_scale_inv", "BF16", (2, 2), b"\x80\x3f" * 4)


def scale_wrong_dtype(m):
    replace_tensor(m, fp8_name(m) + "_scale_inv", "F64", (2, 3), np.ones((2, 3)).tobytes())


def scale_not_finite(m):
    raw = np.array([[1, 1, np.inf], [1, 1, 1]], np.float32).astype(ml_dtypes.bfloat16)
    replace_tensor(m, fp8_name(m) + "_scale_inv", "BF16", (2, 3), raw.tobytes())


def nan_codes(m):
    def edit(tensors):
        for t in tensors:
            if t[0] == fp8_name(m):
                raw = bytearray(t[3])
                raw[150 * 328 + 7] = 0x7F  # row 150: the second tile row
                raw[199 * 328 + 327] = 0xFF  # last element of the edge tile
                t[3] = bytes(raw)

    rewrite_shard(m, shard_of(m, fp8_name(m)), edit)


def truncated_shard(m):
    path = os.path.join(m, SHARD2)
    os.truncate(path, os.path.getsize(path) // 2)


def tiny_shard(m):
    with open(os.path.join(m, SHARD2), "wb") as fh:
        fh.write(b"\x01\x02\x03")


def empty_shard(m):
    open(os.path.join(m, SHARD2), "wb").close()


def corrupt_header(m):
    path = os.path.join(m, SHARD1)
    with open(path, "r+b") as fh:
        fh.seek(8)
        fh.write(b"\xff\xfe garbage \x00\x01")


def binary_garbage_shard(m):
    with open(os.path.join(m, SHARD1), "wb") as fh:
        fh.write(struct.pack("<Q", 64) + os.urandom(64) + os.urandom(4096))


def oversized_header(m):
    path = os.path.join(m, SHARD1)
    with open(path, "r+b") as fh:
        fh.write(struct.pack("<Q", 1 << 40))


def offsets_beyond_file(m):
    path = os.path.join(m, SHARD1)
    os.truncate(path, os.path.getsize(path) - 16)


def missing_shard(m):
    os.remove(os.path.join(m, SHARD2))


def tensor_not_in_shard(m):
    index = load(os.path.join(m, INDEX))
    index["weight_map"]["model.layers.9.mlp.up_proj.weight"] = SHARD1
    dump(os.path.join(m, INDEX), index)


def quant_method(name):
    def mutate(m):
        edit_config(m, lambda c: c["quantization_config"].update(quant_method=name))

    return mutate


def modelslim(m):
    dump(os.path.join(m, "quant_model_description.json"), {"model_quant_type": "W8A8"})


def fmt_e5m2(m):
    edit_config(m, lambda c: c["quantization_config"].update(fmt="e5m2"))


def no_block_size(m):
    edit_config(m, lambda c: c["quantization_config"].pop("weight_block_size"))


def no_quantization_config(m):
    edit_config(m, lambda c: c.pop("quantization_config"))


def orphan_scale(m):
    drop_tensor(m, fp8_name(m))


def config_garbage(m):
    with open(os.path.join(m, "config.json"), "wb") as fh:
        fh.write(b"\x00\x01not json")


def config_empty(m):
    open(os.path.join(m, "config.json"), "w").close()


def config_missing(m):
    os.remove(os.path.join(m, "config.json"))


def index_garbage(m):
    with open(os.path.join(m, INDEX), "w") as fh:
        fh.write('{"weight_map": [1, 2]}')


CASES = [
    (
        "fp8 weight without scale",
        missing_scale,
        [f"{SHARD1}: tensor 'model.layers.0.mlp.down_proj.weight'", "no scale tensor"],
    ),
    (
        "scale of wrong shape",
        scale_wrong_shape,
        ["down_proj.weight_scale_inv", "scale shape [2, 2]", "expected [2, 3]"],
    ),
    ("scale of wrong dtype", scale_wrong_dtype, ["down_proj.weight_scale_inv", "scale dtype F64"]),
    ("non-finite scale", scale_not_finite, ["down_proj.weight_scale_inv", "NaN or infinity"]),
    (
        "fp8 NaN codes",
        nan_codes,
        [f"{SHARD1}: tensor 'model.layers.0.mlp.down_proj.weight'", "2 FP8 NaN codes"],
    ),
    ("truncated shard", truncated_shard, [SHARD2, "truncated"]),
    ("shard shorter than a header", tiny_shard, [SHARD2, "truncated"]),
    ("empty shard", empty_shard, [SHARD2, "truncated"]),
    ("corrupt header", corrupt_header, [SHARD1, "corrupt safetensors header"]),
    ("binary garbage shard", binary_garbage_shard, [SHARD1, "corrupt safetensors header"]),
    ("oversized header", oversized_header, [SHARD1, "oversized"]),
    ("offsets beyond file", offsets_beyond_file, [SHARD1, "beyond the end of the file"]),
    ("shard missing", missing_shard, [SHARD2, "missing"]),
    (
        "tensor not in shard",
        tensor_not_in_shard,
        [SHARD1, "model.layers.9.mlp.up_proj.weight", "not present"],
    ),
    (
        "compressed-tensors",
        quant_method("compressed-tensors"),
        ["config.json", "compressed-tensors", "directly"],
    ),
    (
        "unknown quant_method",
        quant_method("awq"),
        ["config.json", "unsupported quant_method 'awq'"],
    ),
    ("modelslim", modelslim, ["quant_model_description.json", "--quantization ascend"]),
    ("fmt e5m2", fmt_e5m2, ["config.json", "fmt 'e5m2'"]),
    ("no weight_block_size", no_block_size, ["config.json", "weight_block_size", "per-tensor"]),
    (
        "fp8 without quantization_config",
        no_quantization_config,
        ["is FP8", "no quantization_config"],
    ),
    ("scale without weight", orphan_scale, ["down_proj.weight_scale_inv", "scale tensor without"]),
    ("config not json", config_garbage, ["config.json", "not valid JSON"]),
    ("config empty", config_empty, ["config.json", "empty"]),
    ("config missing", config_missing, ["config.json", "not found"]),
    ("index without weight_map object", index_garbage, [INDEX, "weight_map"]),
]


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_refused_with_one_line(tmp_path, capsys, mutate, expected):
    model = copy_model(fp8_template(), str(tmp_path / "fp8"))
    mutate(model)
    dst = tmp_path / "out"
    rc = main(["convert", model, str(dst), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("ascend-deploy convert: error: ")
    for text in expected:
        assert text in err, err
    assert not dst.exists()
    assert sorted(os.listdir(tmp_path)) == ["fp8"]  # no temporary directory left behind


def test_status_check_refuses_the_same_input(tmp_path):
    from ascend_deploy.errors import InputError
    from ascend_deploy.fp8.convert import conversion_status

    model = copy_model(fp8_template(), str(tmp_path / "fp8"))
    missing_scale(model)
    with pytest.raises(InputError, match="no scale tensor"):
        conversion_status(model, str(tmp_path / "out"))


def test_unusable_dst_path_is_an_input_error(tmp_path, capsys):
    (tmp_path / "a-file").write_text("x")
    rc = main(["convert", fp8_template(), str(tmp_path / "a-file" / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "a-file" in err and "check the SRC and DST paths" in err
