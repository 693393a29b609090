"""``convert --dtype float16`` (Atlas 300I Duo / 310P has no BF16): exact single rounding,
overflow refused, config/manifest/verify in FP16, BF16 output unchanged."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from fractions import Fraction

import pytest

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")

from test_convert_safety import BLOCKING_CLI  # noqa: E402
from test_fp8_fixtures import copy_model, fp8_template, read_tensors, rewrite_shard  # noqa: E402

from ascend_deploy.cli import main  # noqa: E402
from ascend_deploy.errors import CheckFailed, InputError  # noqa: E402
from ascend_deploy.fp8.convert import conversion_status, convert_checkpoint  # noqa: E402
from ascend_deploy.fp8.dequant import reference_dequantize  # noqa: E402
from ascend_deploy.fp8.files import MANIFEST_NAME  # noqa: E402
from ascend_deploy.fp8.plan import plan_conversion  # noqa: E402
from ascend_deploy.fp8.verify import verify_output  # noqa: E402
from ascend_deploy.model.safetensors_header import read_header  # noqa: E402

INDEX = "model.safetensors.index.json"
REAL_MODEL = os.path.join(os.path.dirname(__file__), "..", "..", "data", "tiny-qwen3-fp8")
WEIGHT = "model.layers.0.mlp.down_proj.weight"  # [200, 328] in the template: 2 x 3 tiles
NORM = "model.layers.0.input_layernorm.weight"
SCALE_NP = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16}


def load_json(path) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def shard_of(model: str, name: str) -> str:
    return load_json(os.path.join(model, INDEX))["weight_map"][name]


def edit_tensors(model: str, name: str, edit) -> None:
    """Replace the raw bytes of tensors in ``name``'s shard: ``edit(dict name -> [dtype, shape,
    numpy array])`` changes the arrays in place."""

    def apply(tensors):
        arrays = {}
        for t in tensors:
            dtype = np.uint8 if t[1] == "F8_E4M3" else SCALE_NP.get(t[1], np.uint8)
            arrays[t[0]] = [t[1], t[2], np.frombuffer(t[3], dtype).reshape(t[2]).copy()]
        edit(arrays)
        for t in tensors:
            t[3] = arrays[t[0]][2].tobytes()

    rewrite_shard(model, shard_of(model, name), apply)


def f16_reference(codes: np.ndarray, scales: np.ndarray, block=(128, 128)) -> np.ndarray:
    """Independent of the converter: fp8 value x scale in float64 (exact), one float16 cast."""
    rows, cols = codes.shape
    expanded = np.repeat(np.repeat(scales.astype(np.float64), block[0], 0), block[1], 1)
    values = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64) * expanded[:rows, :cols]
    return values.astype(np.float16)


def check_every_element(src: str, dst: str) -> int:
    """Every output element against the float64 -> float16 rule; returns FP8 weights seen."""
    fp8, out = read_tensors(src), read_tensors(dst)
    seen = 0
    for name, (dtype, shape, raw) in out.items():
        src_dtype, src_shape, src_raw = fp8[name]
        assert shape == src_shape, name
        if src_dtype == "F8_E4M3":
            s_dtype, s_shape, s_raw = fp8[name + "_scale_inv"]
            scales = np.frombuffer(s_raw, SCALE_NP[s_dtype]).reshape(s_shape)
            codes = np.frombuffer(src_raw, np.uint8).reshape(shape)
            want = f16_reference(codes, scales)
            assert dtype == "F16", name
            assert raw == want.tobytes(), name
            assert np.isfinite(want).all()
            seen += 1
        elif src_dtype == "BF16":
            values = np.frombuffer(src_raw, ml_dtypes.bfloat16).astype(np.float64)
            assert (dtype, raw) == ("F16", values.astype(np.float16).tobytes()), name
        else:
            assert (dtype, raw) == (src_dtype, src_raw), name
    return seen


@pytest.mark.parametrize("scale_dtype", ["BF16", "F16", "F32"])
def test_fp16_output_is_the_exact_product_rounded_once_everywhere(tmp_path, scale_dtype):
    src = fp8_template(scale_dtype)
    dst = tmp_path / "fp16"
    result = convert_checkpoint(src, str(dst), workers=2, verify=True, dtype="float16")
    assert result["status"] == "converted" and result["verified"]
    assert result["dtype"] == "float16" and result["tensors_out"] == 25
    assert check_every_element(src, str(dst)) == 14
    assert not [p for p in os.listdir(tmp_path) if p != "fp16"]


def test_real_tiny_qwen3_checkpoint_in_fp16(tmp_path):
    src = copy_model(REAL_MODEL, str(tmp_path / "fp8"))
    dst = tmp_path / "fp16"
    result = convert_checkpoint(src, str(dst), verify=True, dtype="float16")
    assert result["status"] == "converted"
    assert check_every_element(src, str(dst)) == 14
    # The FP16 values of the real weights are closer to the exact products than BF16's.
    out_bf16 = read_tensors(convert_checkpoint(src, str(tmp_path / "bf16"))["dst"])
    out_fp16, fp8 = read_tensors(str(dst)), read_tensors(src)
    name = "model.layers.0.self_attn.q_proj.weight"
    scales = np.frombuffer(fp8[name + "_scale_inv"][2], ml_dtypes.bfloat16).reshape(2, 2)
    codes = np.frombuffer(fp8[name][2], np.uint8).reshape(192, 160)
    exact = np.repeat(np.repeat(scales.astype(np.float64), 128, 0), 128, 1)[:192, :160]
    exact = exact * codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    f16 = np.frombuffer(out_fp16[name][2], np.float16).astype(np.float64).reshape(192, 160)
    b16 = np.frombuffer(out_bf16[name][2], ml_dtypes.bfloat16).astype(np.float64)
    assert np.abs(f16 - exact).max() < np.abs(b16.reshape(192, 160) - exact).max()


def test_fp8_times_scale_is_exact_in_float64():
    """The premise of the single rounding: every e4m3 value times every scale of the real
    checkpoint (and extreme float32 scales) is exact in float64."""
    fp8 = read_tensors(REAL_MODEL)
    scales = [
        float(v)
        for name, (dtype, shape, raw) in fp8.items()
        if name.endswith("_scale_inv")
        for v in np.frombuffer(raw, SCALE_NP[dtype]).astype(np.float64)
    ]
    scales += [float(np.float32(1) + np.finfo(np.float32).eps), 0.80039066, 1e-30, 3.0e38]
    codes = [c for c in range(256) if c & 0x7F != 0x7F]  # no NaN codes
    values = np.array(codes, np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    for s in scales:
        s32 = float(np.float32(s))
        for v in values:
            assert Fraction(float(v)) * Fraction(s32) == Fraction(float(v) * s32)


# 1.25 (e4m3 code 0x3A) x float32 0x3f4ce667 is 1.000488326 exactly: just above the FP16 tie
# 1 + 2^-11 between 1.0 and 1.0009765625. The float32 product rounds onto the tie (then ties
# to even give 1.0), BF16 keeps only 1.0: the single rounding gives 1.0009765625.
CRAFTED_CODE = 0x3A
CRAFTED_SCALE = np.array([0x3F4CE667], np.uint32).view(np.float32)[0]


def test_double_rounding_differs_from_the_single_rounding():
    value = float(np.array([CRAFTED_CODE], np.uint8).view(ml_dtypes.float8_e4m3fn)[0])
    exact = Fraction(value) * Fraction(float(CRAFTED_SCALE))
    assert Fraction(1) + Fraction(1, 2**11) < exact < Fraction(1) + Fraction(1, 2**10)
    f32 = np.float32(value) * CRAFTED_SCALE
    direct = np.float64(value) * np.float64(CRAFTED_SCALE)
    assert float(np.float16(direct)) == 1.0009765625  # single rounding
    assert float(np.float16(f32)) == 1.0  # via float32
    assert float(np.float16(np.float32(f32.astype(ml_dtypes.bfloat16)))) == 1.0  # via BF16
    codes = np.full((1, 1), CRAFTED_CODE, np.uint8)
    scales = np.full((1, 1), CRAFTED_SCALE, np.float32)
    got = reference_dequantize(codes, scales, (128, 128), "F16").view(np.float16)
    assert float(got[0, 0]) == 1.0009765625


def test_converter_rounds_the_crafted_value_once(tmp_path):
    src = copy_model(fp8_template("F32"), str(tmp_path / "fp8"))

    def craft(t):
        t[WEIGHT][2][5, 7] = CRAFTED_CODE
        t[WEIGHT + "_scale_inv"][2][0, 0] = CRAFTED_SCALE

    edit_tensors(src, WEIGHT, craft)
    convert_checkpoint(src, str(tmp_path / "fp16"), verify=True, dtype="float16")
    convert_checkpoint(src, str(tmp_path / "bf16"), verify=True)
    fp16 = read_tensors(str(tmp_path / "fp16"))[WEIGHT][2]
    bf16 = read_tensors(str(tmp_path / "bf16"))[WEIGHT][2]
    assert np.frombuffer(fp16, np.float16).reshape(200, 328)[5, 7] == 1.0009765625
    bf16_value = np.frombuffer(bf16, ml_dtypes.bfloat16).reshape(200, 328)[5, 7]
    assert float(np.float16(np.float32(bf16_value))) == 1.0  # FP8 -> BF16 -> FP16 is off
    assert check_every_element(src, str(tmp_path / "fp16")) == 14


def test_config_index_and_manifest_say_float16(tmp_path):
    src = copy_model(fp8_template(), str(tmp_path / "fp8"))
    config = load_json(os.path.join(src, "config.json"))
    config["dtype"] = "bfloat16"
    config["text_config"] = {"torch_dtype": "bfloat16", "quantization_config": {"x": 1}}
    with open(os.path.join(src, "config.json"), "w") as fh:
        json.dump(config, fh)
    dst = tmp_path / "fp16"
    convert_checkpoint(src, str(dst), dtype="float16")
    out = load_json(dst / "config.json")
    assert out["torch_dtype"] == out["dtype"] == "float16"
    assert out["text_config"] == {"torch_dtype": "float16"}
    assert "quantization_config" not in out
    manifest = load_json(dst / MANIFEST_NAME)
    assert manifest["kind"] == "ascend-deploy fp8-to-fp16"
    assert manifest["output_dtype"] == "float16"
    index = load_json(dst / INDEX)
    for name in (WEIGHT, NORM):
        assert read_header(str(dst / shard_of(str(dst), name))).tensors[name].dtype == "F16"
    assert index["metadata"]["total_size"] == sum(
        len(raw) for _, _, raw in read_tensors(str(dst)).values()
    )


def test_bf16_manifest_and_output_are_unchanged(tmp_path):
    src = fp8_template()
    dst = tmp_path / "bf16"
    result = convert_checkpoint(src, str(dst))
    manifest = load_json(dst / MANIFEST_NAME)
    assert manifest["kind"] == "ascend-deploy fp8-to-bf16" and "output_dtype" not in manifest
    assert list(manifest)[:3] == ["kind", "converter_version", "ascend_deploy_version"]
    assert result["dtype"] == "bfloat16"
    assert read_header(str(dst / shard_of(src, NORM))).tensors[NORM].dtype == "BF16"
    assert read_tensors(str(dst))[NORM] == read_tensors(src)[NORM]


def test_verify_checks_fp16_against_the_fp16_rule(tmp_path):
    src = fp8_template()
    dst = tmp_path / "fp16"
    convert_checkpoint(src, str(dst), dtype="float16")
    plan = plan_conversion(src, "float16")
    counts = verify_output(plan, str(dst))
    assert counts["tiles"] > 0 and counts["copied_ranges"] > 0
    with pytest.raises(CheckFailed, match="torch_dtype is 'float16', expected 'bfloat16'"):
        verify_output(plan_conversion(src), str(dst))  # not the BF16 conversion
    shard = dst / shard_of(src, WEIGHT)
    header = read_header(str(shard))
    info = header.tensors[WEIGHT]
    with open(shard, "r+b") as fh:  # one element of the first tile, one mantissa bit
        fh.seek(header.data_offset + info.begin + 2 * 10)
        byte = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([byte[0] ^ 0x01]))
    with pytest.raises(CheckFailed, match=f"{WEIGHT}.*tile \\(0, 0\\) has 1 values"):
        verify_output(plan, str(dst))


def test_verify_checks_bf16_tensors_rounded_to_fp16(tmp_path):
    src = fp8_template()
    dst = tmp_path / "fp16"
    convert_checkpoint(src, str(dst), dtype="float16")
    shard = dst / shard_of(src, NORM)
    header = read_header(str(shard))
    with open(shard, "r+b") as fh:
        fh.seek(header.data_offset + header.tensors[NORM].begin + 2 * 3)
        byte = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([byte[0] ^ 0x01]))
    with pytest.raises(CheckFailed, match=f"{NORM}.*rounded to float16"):
        verify_output(plan_conversion(src, "float16"), str(dst))


def set_tile(scale: float, code: int = 0x78):
    """Tile (0, 0) of WEIGHT all ``code`` (0x78 is 256.0) with scale ``scale``."""

    def edit(t):
        t[WEIGHT][2][:128, :128] = code
        t[WEIGHT + "_scale_inv"][2][0, 0] = scale

    return edit


def test_largest_fp16_value_is_kept_and_one_beyond_is_refused(tmp_path):
    """256 x 255.90625 = 65512 rounds to 65504 (FP16's largest); 256 x 255.9375 = 65520 is
    the tie to 65536, which rounds to infinity: refused, naming the tensor and the value."""
    src = copy_model(fp8_template("F32"), str(tmp_path / "fp8"))
    edit_tensors(src, WEIGHT, set_tile(255.90625))
    convert_checkpoint(src, str(tmp_path / "ok"), verify=True, dtype="float16")
    out = np.frombuffer(read_tensors(str(tmp_path / "ok"))[WEIGHT][2], np.float16)
    assert (out.reshape(200, 328)[:128, :128] == 65504).all()

    edit_tensors(src, WEIGHT, set_tile(255.9375))
    dst = tmp_path / "fp16"
    with pytest.raises(InputError) as exc:
        convert_checkpoint(src, str(dst), workers=2, dtype="float16")
    text = str(exc.value)
    assert f"tensor '{WEIGHT}'" in text and "largest absolute value 65520 " in text
    assert "overflows float16" in text and "65504" in text
    assert sorted(os.listdir(tmp_path)) == ["fp8", "ok"]  # no DST, no temporary directory
    # BF16 has the range: the same checkpoint converts to BF16.
    assert convert_checkpoint(src, str(tmp_path / "bf16"))["status"] == "converted"


def test_overflow_names_the_largest_value_of_the_whole_tensor(tmp_path, capsys):
    src = copy_model(fp8_template("F32"), str(tmp_path / "fp8"))

    def edit(t):
        t[WEIGHT][2][:128, :128] = 0x7E  # 448.0 in the first tile
        t[WEIGHT][2][130, 300] = 0xFE  # -448.0 in the last tile, with a larger scale
        t[WEIGHT + "_scale_inv"][2][0, 0] = 200.0
        t[WEIGHT + "_scale_inv"][2][1, 2] = 1000.0

    edit_tensors(src, WEIGHT, edit)
    rc = main(["convert", src, str(tmp_path / "fp16"), "--dtype", "float16", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert f"tensor '{WEIGHT}'" in err and "largest absolute value 448000 " in err
    assert sorted(os.listdir(tmp_path)) == ["fp8"]


def test_bf16_tensor_beyond_fp16_is_refused(tmp_path):
    src = copy_model(fp8_template(), str(tmp_path / "fp8"))

    def edit(t):
        t[NORM][2][17] = -70144.0  # a BF16 value FP16 cannot hold

    edit_tensors(src, NORM, edit)
    with pytest.raises(InputError, match=f"tensor '{NORM}': largest absolute value 70144 "):
        convert_checkpoint(src, str(tmp_path / "fp16"), dtype="float16")
    assert sorted(os.listdir(tmp_path)) == ["fp8"]


def test_failed_fp16_conversion_keeps_the_previous_output(tmp_path):
    src = copy_model(fp8_template("F32"), str(tmp_path / "fp8"))
    dst = tmp_path / "out"
    convert_checkpoint(src, str(dst))
    edit_tensors(src, WEIGHT, set_tile(300.0))
    convert_checkpoint(src, str(dst))  # reconverted (source changed), still BF16
    before = read_tensors(str(dst))
    with pytest.raises(InputError, match="overflows float16"):
        convert_checkpoint(src, str(dst), dtype="float16")
    assert read_tensors(str(dst)) == before
    assert conversion_status(src, str(dst)) == "up-to-date"
    assert sorted(os.listdir(tmp_path)) == ["fp8", "out"]


def test_switching_dtype_reconverts_and_each_is_idempotent(tmp_path):
    src = fp8_template()
    dst = str(tmp_path / "out")
    convert_checkpoint(src, dst)
    assert conversion_status(src, dst) == "up-to-date"
    assert conversion_status(src, dst, "float16") == "needed"
    result = convert_checkpoint(src, dst, dtype="float16")
    assert (result["status"], result["replaced"]) == ("converted", "stale")
    assert conversion_status(src, dst, "float16") == "up-to-date"
    assert conversion_status(src, dst) == "needed"
    again = convert_checkpoint(src, dst, dtype="float16", verify=True)
    assert again["status"] == "up-to-date" and again["verified"]
    assert "already the FP16 conversion" in again["message"]


def test_unknown_dtype_is_refused():
    with pytest.raises(InputError, match="float16 for 310P"):
        convert_checkpoint(fp8_template(), "/nonexistent/out", dtype="float32")


def test_cli_dtype_option(tmp_path, capsys):
    src = fp8_template()
    dst = str(tmp_path / "fp16")
    assert main(["convert", src, dst, "--dtype", "float16", "--no-progress", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dtype"] == "float16"
    assert load_json(os.path.join(dst, "config.json"))["torch_dtype"] == "float16"
    assert main(["convert", src, str(tmp_path / "h"), "--dtype", "float16", "--no-progress"]) == 0
    assert "14 FP8 weights dequantized to FP16" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["convert", src, str(tmp_path / "x"), "--dtype", "float32"])
    assert exc.value.code == 2


def test_interrupted_fp16_conversion_leaves_nothing(tmp_path):
    src = copy_model(fp8_template(), str(tmp_path / "fp8"))
    dst = str(tmp_path / "fp16")
    script = BLOCKING_CLI.replace("sys.argv[2]]", 'sys.argv[2], "--dtype", "float16"]')
    assert script != BLOCKING_CLI
    proc = subprocess.Popen(
        [sys.executable, "-c", script, src, dst],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "in progress", proc.stderr.read()
        assert [n for n in os.listdir(tmp_path) if ".fp8conv-tmp-" in n]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143 and "interrupted by SIGTERM" in err, err
    assert sorted(os.listdir(tmp_path)) == ["fp8"]
