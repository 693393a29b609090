"""ModelSlim W8A8 checkpoints (pitfall 2 option 2, pitfall 7): the committed tiny W8A8 model.

tests/data/tiny-qwen3-w8a8 is what tools/make_tiny_w8a8.py writes from the trained tiny FP8
model, on any processor: regenerated under two BLAS kernels it differs from the committed copy
at most where calibration noise crosses a rounding step, and a changed quantization is caught.
The planner and the weights role's conversion check accept ModelSlim's own file names; the
emulator computes the int8 projections as vllm-ascend's W8A8 method does and answers the
verification questions, refuses the checkpoint loaded as float on a release without
auto-detection, and serves it with --quantization ascend there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys

import pytest
from conftest import DATA, REPO, ask_chat

from ascend_deploy.cli import main
from ascend_deploy.fp8.convert import conversion_status
from ascend_deploy.model.files import read_weight_layout
from ascend_deploy.model.safetensors_header import read_header
from ascend_deploy.planning.plan import make_plan
from ascend_sim.checkpoints import w8a8_differences, write_checkpoint
from ascend_sim.vllm_emulator.sandbox import Emulator, emulator_env, make_root, write_row

np = pytest.importorskip("numpy")
pytest.importorskip("ml_dtypes")

W8A8 = DATA / "tiny-qwen3-w8a8"
WEIGHTS = "quant_model_weight_w8a8.safetensors"
QUESTIONS = json.loads((DATA / "verification-questions.json").read_text(encoding="utf-8"))
LINEAR_PARTS = {"weight", "weight_scale", "weight_offset", "input_scale", "input_offset"}
LINEAR_PARTS |= {"deq_scale", "quant_bias"}


def _correct(q: dict, text: str) -> bool:
    if q.get("expect_all"):
        return all(s in text for s in q["expect_all"])
    return any(s in text for s in q["expect_any"])


def _generic_blas_kernel() -> str:
    """An OpenBLAS kernel every processor of this architecture runs, unlike the one
    OpenBLAS's DYNAMIC_ARCH picks for this machine (OPENBLAS_CORETYPE forces it)."""
    return "ARMV8" if platform.machine() in ("aarch64", "arm64") else "Prescott"


@pytest.mark.parametrize("kernel", ["", "generic"])
def test_committed_checkpoint_is_what_the_tool_writes(tmp_path, kernel):
    """Regenerated with this machine's BLAS kernel and with a generic one (the kernel decides
    the last bits of the calibration's float32 sums), the tool's output is the committed
    checkpoint up to what that noise can move (ascend_sim.checkpoints.w8a8_differences)."""
    out = tmp_path / "w8a8"
    env = dict(os.environ)
    if kernel:
        env["OPENBLAS_CORETYPE"] = _generic_blas_kernel()
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "make_tiny_w8a8.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert w8a8_differences(str(W8A8), str(out)) == []


def _make_tool():
    spec = importlib.util.spec_from_file_location(
        "make_tiny_w8a8", REPO / "tools" / "make_tiny_w8a8.py"
    )
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return lambda out: tool.make(
        str(DATA / "tiny-qwen3-fp8"), str(DATA / "verification-questions.json"), str(out)
    )


def test_regeneration_check_fails_when_the_quantization_changes(tmp_path, monkeypatch):
    """The check tolerates calibration noise, not a changed tool: each change of the
    quantization below is reported, naming what moved; noise of another BLAS kernel is not."""
    from ascend_sim import checkpoints, float_tensors

    make = _make_tool()
    calibrate = checkpoints._calibrate_inputs

    def noisy(*args):  # another kernel's float32 sums: a few units in the 7th digit
        return {k: [v * (1 + 3e-7) for v in r] for k, r in calibrate(*args).items()}

    monkeypatch.setattr(checkpoints, "_calibrate_inputs", noisy)
    make(tmp_path / "noise")
    assert w8a8_differences(str(W8A8), str(tmp_path / "noise")) == []
    monkeypatch.setattr(checkpoints, "_calibrate_inputs", calibrate)

    changes = {
        "weight_qmax": (checkpoints, "W8A8_WEIGHT_QMAX", 126, ".weight: bytes differ"),
        "act_levels": (checkpoints, "W8A8_ACT_LEVELS", 254, "calibrated values moved"),
        "unrounded_scale": (float_tensors, "bf16_round", lambda v: v, "deq_scale is not"),
    }
    for label, (module, attr, value, expect) in changes.items():
        with monkeypatch.context() as m:
            m.setattr(module, attr, value)
            make(tmp_path / label)
        found = w8a8_differences(str(W8A8), str(tmp_path / label))
        assert any(expect in p for p in found), (label, found)


def test_layout_is_modelslims_static_w8a8():
    header = read_header(str(W8A8 / WEIGHTS))
    desc = json.loads((W8A8 / "quant_model_description.json").read_text())
    assert desc["model_quant_type"] == "W8A8"
    assert set(desc) - {"model_quant_type", "version"} == set(header.tensors)
    config = json.loads((W8A8 / "config.json").read_text())
    assert "quantization_config" not in config
    q = "model.layers.0.self_attn.q_proj"
    out, inp = config["num_attention_heads"] * config["head_dim"], config["hidden_size"]
    t = header.tensors
    assert (t[f"{q}.weight"].dtype, t[f"{q}.weight"].shape) == ("I8", (out, inp))
    assert (t[f"{q}.deq_scale"].dtype, t[f"{q}.deq_scale"].shape) == ("F32", (out,))
    assert (t[f"{q}.quant_bias"].dtype, t[f"{q}.quant_bias"].shape) == ("I32", (out,))
    assert t[f"{q}.weight_scale"].shape == (out, 1) and t[f"{q}.input_scale"].shape == (1,)
    for name, kind in desc.items():
        if name.endswith(
            ("o_proj.weight", "down_proj.weight", "norm.weight", "embed_tokens.weight")
        ):
            assert kind == "FLOAT" and t[name].dtype == "BF16", name
        elif name.rsplit(".", 1)[-1] in LINEAR_PARTS and kind == "W8A8":
            assert name.split(".")[-2] in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")


def test_engine_runs_npu_quant_matmul_and_answers_every_question():
    from ascend_sim.engine import W8A8Linear, load_model
    from ascend_sim.tokenizer import load_tokenizer

    model, tok = load_model(str(W8A8), "ascend"), load_tokenizer(str(W8A8))
    layer = model._wt("model.layers.0.mlp.gate_proj.weight")
    assert isinstance(layer, W8A8Linear)
    # (x_q @ w_q.T + quant_bias) * deq_scale is x @ (w_q * weight_scale).T up to the
    # activation's int8 rounding (deq_scale = input_scale x weight_scale): the int8
    # weights really are dequantized.
    x = np.random.default_rng(0).normal(0, 0.5, (3, model.dims.hidden)).astype(np.float32)
    w = model.weights["model.layers.0.mlp.gate_proj.weight"]
    scale = layer.deq_scale / layer.input_scale
    approx = x @ (w * scale[:, None]).T
    assert np.abs((x @ layer) - approx).max() < 0.05 * np.abs(approx).max()
    wrong = []
    for q in QUESTIONS:
        prompt = tok.apply_chat_template(q["messages"], True, q["enable_thinking"])
        ids = [t for t, _, _ in model.generate(tok.encode(prompt), q["max_tokens"])]
        text = tok.decode([i for i in ids if i not in tok.eos_token_ids])
        if not _correct(q, text):
            wrong.append((q["id"], text))
    assert wrong == []


def test_engine_refuses_int8_weights_without_the_ascend_method():
    from ascend_deploy.errors import InputError
    from ascend_sim.engine import load_model

    with pytest.raises(InputError, match="has dtype I8"):
        load_model(str(W8A8))


def _sharded_copy(src, dst, with_index: bool) -> None:
    """ModelSlim's sharded names (w4a8_dynamic style), with or without the index."""
    shutil.copytree(src, dst)
    header = read_header(str(dst / WEIGHTS))
    names = sorted(header.tensors)
    half = len(names) // 2
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(dst / WEIGHTS))
    os.remove(dst / WEIGHTS)
    shards = {}
    for i, part in enumerate((names[:half], names[half:]), start=1):
        shard = f"quant_model_weight_w4a8_dynamic-{i:05d}-of-00002.safetensors"
        save_file({n: tensors[n] for n in part}, str(dst / shard))
        shards.update((n, shard) for n in part)
    if with_index:
        index = {"metadata": {}, "weight_map": shards}
        (dst / "quant_model_weight_w4a8_dynamic.safetensors.index.json").write_text(
            json.dumps(index)
        )


@pytest.mark.parametrize("layout", ["single", "sharded-index", "sharded-no-index"])
def test_plan_accepts_modelslims_file_names(tmp_path, capsys, layout):
    model = W8A8
    if layout != "single":
        model = tmp_path / layout
        _sharded_copy(W8A8, model, with_index=layout == "sharded-index")
    weights = read_weight_layout(str(model))
    assert len(weights.weight_map) == len(read_header(str(W8A8 / WEIGHTS)).tensors)
    rc = main(["plan", "--model-dir", str(model), "--hbm-total-mb", "65536", "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    plan = json.loads(out.out)
    assert plan["quantization"] == "ascend"
    argv = plan["argv"]
    assert argv[argv.index("--quantization") + 1] == "ascend" and argv[2] == str(model)
    assert conversion_status(str(model), str(tmp_path / "bf16")) == "not-needed"


def test_plan_refuses_two_indexes_naming_both(tmp_path):
    model = tmp_path / "two"
    _sharded_copy(W8A8, model, with_index=True)
    (model / "other.safetensors.index.json").write_text("{}")
    from ascend_deploy.errors import InputError

    with pytest.raises(InputError, match="several safetensors indexes"):
        make_plan(str(model), hbm_total_mb=65536)


def test_modelslim_sparse_layout_sizes_like_its_bytes(tmp_path):
    d = tmp_path / "q4b"
    write_checkpoint(str(d), "qwen3-4b", fp8=False, data="sparse")
    os.rename(
        d / "model.safetensors.index.json", d / "quant_model_weight_w8a8.safetensors.index.json"
    )
    plan = make_plan(str(d), hbm_total_mb=65536)
    assert plan["model"]["weight_bytes_served"] == plan["model"]["weight_bytes_on_disk"]


# -- the emulator ---------------------------------------------------------------------------
def _env(tmp_path, row: str) -> dict:
    root = tmp_path / f"root-{row}"
    make_root(str(root))
    return emulator_env(str(root), write_row(str(tmp_path / f"row-{row}.json"), row))


def _serve_args(*extra: str) -> list[str]:
    return [str(W8A8), "--host", "127.0.0.1", "--port", "0", "--served-model-name", "tiny",
            "--max-model-len", "4096", "--enforce-eager", *extra]  # fmt: skip


def _ask(emu: Emulator, q: dict) -> str:
    return ask_chat(emu.port, q)["content"] or ""


@pytest.mark.parametrize(
    ("row", "detected"),
    [("v0.14.0rc1", False), ("v0.15.0rc1", True), ("v0.16.0rc1", False), ("v0.17.0rc1", True)],
)
def test_without_the_flag_auto_detection_per_release(tmp_path, row, detected):
    """maybe_auto_detect_quantization: at v0.15.0rc1 (PR #6645), reverted at v0.16.0rc1
    (#6873), back from v0.17.0rc1 (#7111); elsewhere the float loader meets deq_scale."""
    emu = Emulator(_serve_args(), _env(tmp_path, row)).start()
    try:
        if detected:
            assert emu.ready, emu.output()
            # utils.py@v0.17.0rc1 wording (assumed the same at v0.15.0rc1)
            assert re.search(
                r"Auto-detected quantization method 'ascend' from model files for '[^']+'\. "
                r"To override, pass '--quantization <method>' explicitly\.$",
                emu.output(),
                re.M,
            ), emu.output()
            assert _correct(QUESTIONS[0], _ask(emu, QUESTIONS[0]))
        else:
            assert emu.wait(60) == 1
            assert "KeyError: 'layers.0.mlp.gate_up_proj.deq_scale'" in emu.output()
    finally:
        emu.stop()


def test_v0_11_without_the_flag_stops_with_the_quant_key_error(tmp_path):
    emu = Emulator(_serve_args(), _env(tmp_path, "v0.11.0")).start()
    assert emu.wait(60) == 1
    assert "KeyError: 'layers.0.mlp.gate_up_proj.deq_scale'" in emu.output()


@pytest.mark.parametrize(
    ("row", "extra"), [("v0.23.0", ()), ("v0.11.0", ("--quantization", "ascend"))]
)
def test_served_w8a8_answers(tmp_path, row, extra):
    with Emulator(_serve_args(*extra), _env(tmp_path, row)).start() as emu:
        assert emu.ready, emu.output()
        if not extra:
            assert "Auto-detected quantization method 'ascend'" in emu.output()
        for q in QUESTIONS[:6]:
            assert _correct(q, _ask(emu, q)), q["id"]


def test_a_tensor_in_two_weight_files_is_refused_naming_both(tmp_path):
    from ascend_deploy.errors import InputError

    model = tmp_path / "dup"
    shutil.copytree(W8A8, model)
    shutil.copyfile(model / WEIGHTS, model / "quant_model_weight_w8a8-copy.safetensors")
    with pytest.raises(InputError, match=r"is also in .*remove the duplicate weight file"):
        read_weight_layout(str(model))


@pytest.mark.parametrize("how", ["dtype", "config"])
def test_w8a8_for_a_float16_model_is_refused_by_name(tmp_path, how):
    """vllm-ascend takes deq_scale as int64 for float16 models (310P), float32 for bfloat16
    ones; the writer makes only the latter, so it refuses float16 before calibrating."""
    from ascend_sim.checkpoints import write_modelslim_w8a8

    src = tmp_path / "bf16"
    shutil.copytree(DATA / "tiny-qwen3-fp8", src)
    config = json.loads((src / "config.json").read_text())
    config.pop("quantization_config")
    if how == "config":
        config["torch_dtype"] = "float16"
    (src / "config.json").write_text(json.dumps(config))
    kwargs = {"dtype": "float16"} if how == "dtype" else {}
    with pytest.raises(ValueError, match=r"W8A8 for float16 models \(310P\) needs deq_scale"):
        write_modelslim_w8a8(str(src), str(tmp_path / "w8a8"), ["hi"], **kwargs)
    assert not (tmp_path / "w8a8").exists()


def _broken_copy(tmp_path, change) -> str:
    model = tmp_path / "broken"
    shutil.copytree(W8A8, model)
    path = model / "quant_model_description.json"
    desc = json.loads(path.read_text())
    change(desc)
    path.write_text(json.dumps(desc))
    return str(model)


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (
            lambda d: d.pop("model.layers.0.self_attn.k_proj.weight"),
            "KeyError: 'model.layers.0.self_attn.k_proj.weight'",
        ),
        (
            lambda d: d.pop("model.layers.1.mlp.down_proj.weight"),
            "KeyError: 'model.layers.1.mlp.down_proj.weight'",
        ),
        (
            lambda d: d.update({"model.layers.0.mlp.up_proj.weight": "FLOAT"}),
            "ValueError: Detected some but not all shards of model.layers.0.mlp.gate_up_proj "
            "are quantized. All shards of fused layers to have the same precision.",
        ),
        (
            lambda d: d.update({"model.layers.0.self_attn.v_proj.weight": "W8A8_DYNAMIC"}),
            "ValueError: Not all shards of model.layers.0.self_attn.qkv_proj are quantized with "
            "same quant type. Shard qkv_proj uses W8A8_DYNAMIC, but another shard uses W8A8.",
        ),
    ],
)
def test_emulator_fails_loading_an_incomplete_description(tmp_path, change, error):
    """Upstream's ModelSlim config looks each linear layer's .weight up while building it."""
    model = _broken_copy(tmp_path, change)
    args = [model, *_serve_args("--quantization", "ascend")[1:]]
    emu = Emulator(args, _env(tmp_path, "v0.23.0")).start()
    assert emu.wait(60) == 1
    assert error in emu.output()
    assert "Starting vLLM API server" not in emu.output()
