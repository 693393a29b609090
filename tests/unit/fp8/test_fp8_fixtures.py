"""Small real checkpoints for the FP8 converter tests (helpers, plus tests of the helpers).

``write_bf16_model`` writes a Qwen3-shaped BF16 model with random weights whose linear
dimensions are NOT multiples of 128 (partial edge tiles everywhere); ``fp8_template``
quantizes it with ``quantize_checkpoint`` into the published block-FP8 layout, once per
session, and ``copy_model`` gives each test its own copy.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile

import pytest

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")

from ascend_deploy.fp8.quantize import quantize_checkpoint  # noqa: E402
from ascend_deploy.fp8.safetensors_write import encode_header  # noqa: E402
from ascend_deploy.model.files import read_weight_layout  # noqa: E402

TINY = {
    "hidden_size": 200,
    "intermediate_size": 328,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 48,
    "vocab_size": 300,
    "num_hidden_layers": 2,
}
OTHER_FILES = {
    "generation_config.json": '{\n  "do_sample": true,\n  "temperature": 0.6\n}\n',
    "tokenizer.json": '{"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0}}}\n',
    "tokenizer_config.json": '{"eos_token": "<|im_end|>"}\n',
    "merges.txt": "#version: 0.2\na b\n",
    "LICENSE": "Apache License 2.0 (test copy)\n",
    "README.md": "# tiny test model\n",
    "chat_template.jinja": "{% for m in messages %}{{ m.content }}{% endfor %}\n",
    "extra/notes.txt": "a file in a subdirectory\n",
}


def qwen3_specs(cfg: dict, tie: bool) -> list[tuple[str, tuple[int, ...]]]:
    h, i = cfg["hidden_size"], cfg["intermediate_size"]
    q, kv = (
        cfg["num_attention_heads"] * cfg["head_dim"],
        cfg["num_key_value_heads"] * cfg["head_dim"],
    )
    specs = [("model.embed_tokens.weight", (cfg["vocab_size"], h))]
    for n in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{n}."
        specs += [
            (p + "input_layernorm.weight", (h,)),
            (p + "mlp.down_proj.weight", (h, i)),
            (p + "mlp.gate_proj.weight", (i, h)),
            (p + "mlp.up_proj.weight", (i, h)),
            (p + "post_attention_layernorm.weight", (h,)),
            (p + "self_attn.k_norm.weight", (cfg["head_dim"],)),
            (p + "self_attn.k_proj.weight", (kv, h)),
            (p + "self_attn.o_proj.weight", (h, q)),
            (p + "self_attn.q_norm.weight", (cfg["head_dim"],)),
            (p + "self_attn.q_proj.weight", (q, h)),
            (p + "self_attn.v_proj.weight", (kv, h)),
        ]
    specs.append(("model.norm.weight", (h,)))
    if not tie:
        specs.append(("lm_head.weight", (cfg["vocab_size"], h)))
    return specs


def write_safetensors(path: str, tensors: list[tuple[str, str, tuple[int, ...], bytes]]) -> None:
    """Write a safetensors file from (name, dtype, shape, raw bytes), in that order."""
    header, _ = encode_header([(n, d, s) for n, d, s, _ in tensors], {"format": "pt"})
    with open(path, "wb") as fh:
        fh.write(header)
        for *_, raw in tensors:
            fh.write(raw)


def write_bf16_model(
    out_dir: str, shards: int = 2, seed: int = 0, tie: bool = False, cfg: dict | None = None
) -> str:
    """A Qwen3-shaped BF16 model with random weights, config, index and other files."""
    cfg = {**TINY, **(cfg or {})}
    rng = np.random.default_rng(seed)
    specs = qwen3_specs(cfg, tie)
    os.makedirs(out_dir)
    groups = [specs[k::shards] for k in range(shards)] if shards > 1 else [specs]
    weight_map = {}
    for k, group in enumerate(groups, start=1):
        name = f"model-{k:05d}-of-{shards:05d}.safetensors" if shards > 1 else "model.safetensors"
        tensors = []
        for tname, shape in group:
            if tname.endswith("norm.weight"):
                values = 1.0 + 0.1 * rng.standard_normal(shape)
            else:
                values = 0.02 * rng.standard_normal(shape)
                if tname.endswith("proj.weight"):  # a few outliers, as in trained weights
                    flat = values.reshape(-1)
                    flat[rng.integers(0, flat.size, 8)] *= 20
            raw = values.astype(np.float32).astype(ml_dtypes.bfloat16).tobytes()
            tensors.append((tname, "BF16", shape, raw))
            weight_map[tname] = name
        write_safetensors(os.path.join(out_dir, name), tensors)
    config = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_act": "silu",
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000,
        "tie_word_embeddings": tie,
        "torch_dtype": "bfloat16",
        **cfg,
    }
    _write_json(os.path.join(out_dir, "config.json"), config)
    if shards > 1:
        total = sum(2 * int(np.prod(s)) for _, s in specs)
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        _write_json(os.path.join(out_dir, "model.safetensors.index.json"), index)
    for rel, text in OTHER_FILES.items():
        os.makedirs(os.path.dirname(os.path.join(out_dir, rel)), exist_ok=True)
        with open(os.path.join(out_dir, rel), "w", encoding="utf-8") as fh:
            fh.write(text)
    return out_dir


def _write_json(path: str, doc: dict) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)


_CACHE: dict[tuple, str] = {}
_ROOT = tempfile.mkdtemp(prefix="fp8-test-models-")
atexit.register(shutil.rmtree, _ROOT, True)


def fp8_template(scale_dtype: str = "BF16", shards: int = 2, tie: bool = False) -> str:
    """A quantized FP8 model directory shared by the session; copy it before changing it."""
    key = (scale_dtype, shards, tie)
    if key not in _CACHE:
        base = os.path.join(_ROOT, f"{scale_dtype}-{shards}-{tie}")
        write_bf16_model(base + "-bf16", shards=shards, tie=tie)
        quantize_checkpoint(base + "-bf16", base + "-fp8", scale_dtype=scale_dtype)
        _CACHE[key] = base
    return _CACHE[key] + "-fp8"


def bf16_template(shards: int = 2) -> str:
    fp8_template("BF16", shards)
    return _CACHE[("BF16", shards, False)] + "-bf16"


def copy_model(template: str, dest: str) -> str:
    shutil.copytree(template, dest)
    return dest


def read_tensors(model_dir: str) -> dict[str, tuple[str, tuple[int, ...], bytes]]:
    """Every tensor of a model directory as name -> (dtype, shape, raw bytes)."""
    layout = read_weight_layout(model_dir)
    out = {}
    for shard, info in layout.tensors():
        with open(os.path.join(model_dir, shard), "rb") as fh:
            fh.seek(layout.headers[shard].data_offset + info.begin)
            out[info.name] = (info.dtype, info.shape, fh.read(info.nbytes))
    return out


def rewrite_shard(model_dir: str, shard: str, edit) -> None:
    """Rewrite one shard after ``edit(list of [name, dtype, shape, raw])`` changed it."""
    layout = read_weight_layout(model_dir)
    path = os.path.join(model_dir, shard)
    tensors = []
    with open(path, "rb") as fh:
        for info in layout.headers[shard].tensors.values():
            fh.seek(layout.headers[shard].data_offset + info.begin)
            tensors.append([info.name, info.dtype, info.shape, fh.read(info.nbytes)])
    edit(tensors)
    write_safetensors(path, [tuple(t) for t in tensors])


# Tests of the helpers themselves: the templates must be what the converter tests assume.


def test_template_has_published_fp8_layout_with_partial_tiles():
    tensors = read_tensors(fp8_template("F16"))
    q = tensors["model.layers.0.mlp.down_proj.weight"]
    s = tensors["model.layers.0.mlp.down_proj.weight_scale_inv"]
    assert q[0] == "F8_E4M3" and q[1] == (200, 328)
    assert s[0] == "F16" and s[1] == (2, 3)  # ceil(200/128), ceil(328/128): edge tiles
    assert tensors["model.embed_tokens.weight"][0] == "BF16"
    assert len(tensors) == 2 + 2 * (11 + 7) + 1  # embed, lm_head, layers, norm
    with open(os.path.join(fp8_template("F16"), "config.json")) as fh:
        qc = json.load(fh)["quantization_config"]
    assert qc == {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    }


def test_templates_load_with_the_safetensors_library():
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file

    state = load_file(os.path.join(fp8_template(), "model-00001-of-00002.safetensors"))
    fp8 = [n for n, t in state.items() if t.dtype == torch.float8_e4m3fn]
    assert fp8 and all(n + "_scale_inv" in state or n.endswith("_scale_inv") for n in fp8)
