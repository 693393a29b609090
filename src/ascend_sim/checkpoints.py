"""Write synthetic Qwen3 dense checkpoints (BF16 or block-FP8) in the Hugging Face layout.

Used by the unit tests, the converter benchmark, the simulator and the Ansible scenarios.
The tensor names, shapes and dtypes are those of the real Qwen3 checkpoints; the values
are synthetic.

``data="sparse"`` writes the safetensors headers and extends each file over its data with
``truncate`` (a hole: no disk blocks, no time), so a full Qwen3-4B layout costs nothing.
It needs the standard library only, and every value reads back as zero (FP8 zero, scale
zero). ``data="random"`` fills FP8 weights with random bytes other than the NaN codes
0x7F/0xFF, BF16 tensors with finite values of realistic magnitude and scales with
positive finite values; it imports numpy (and ml_dtypes for BF16/F16 scales) lazily.

Architecture sources (real config.json files, copied into public repositories):
  * Qwen3-0.6B: verbatim config in a public model report (code index id 62516112186) and
    a Rust test fixture (id 55067907171); tie_word_embeddings true.
  * Qwen3-1.7B: shape and tie from public shape tables (docs/sources.md) and a transformers-5
    dump of the config (code index id 70262832084): 2048/6144/28 layers/16:8 heads, tied.
  * Qwen3-4B, 8B, 14B, 32B: verbatim configs collected in citsjtu2020/LLM-Prof
    ``sglang/Model_Config.md``; 4B also in DiffSynth-Studio. 8B/14B/32B have an lm_head.
  * FP8 ``quantization_config`` (same for every Qwen3 dense FP8 repo): the model cards.
  * Tensor names and per-layer FP8 treatment: docs/sources.md (block-FP8 checkpoints).
"""

from __future__ import annotations

import json
import math
import os
import struct
from typing import Any

# Fields shared by every Qwen3 dense config.json (HF configs; LLM-Prof Model_Config.md).
_COMMON: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "initializer_range": 0.02,
    "max_position_embeddings": 40960,
    "model_type": "qwen3",
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}


def _arch(hidden: int, inter: int, layers: int, heads: int, kv: int, tie: bool) -> dict:
    cfg = dict(_COMMON)
    cfg.update(
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        max_window_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        tie_word_embeddings=tie,
    )
    return dict(sorted(cfg.items()))


# name -> the model's config.json (BF16 release; the FP8 release adds quantization_config)
QWEN3_ARCHS: dict[str, dict] = {
    "qwen3-0.6b": _arch(1024, 3072, 28, 16, 8, True),
    "qwen3-1.7b": _arch(2048, 6144, 28, 16, 8, True),
    "qwen3-4b": _arch(2560, 9728, 36, 32, 8, True),
    "qwen3-8b": _arch(4096, 12288, 36, 32, 8, False),
    "qwen3-14b": _arch(5120, 17408, 40, 40, 8, False),
    "qwen3-32b": _arch(5120, 25600, 64, 64, 8, False),
}

# The rope_scaling Qwen's model cards give for contexts up to 131,072 tokens ("Processing Long
# Texts": YaRN, factor 4 over the native 32,768). vLLM derives max_model_len 131072 from it.
QWEN3_YARN_ROPE_SCALING: dict[str, Any] = {
    "rope_type": "yarn",
    "factor": 4.0,
    "original_max_position_embeddings": 32768,
}


def with_yarn(arch: str) -> dict:
    """The config of Qwen3 ``arch`` with YaRN enabled as the model card says."""
    return {**resolve_arch(arch), "rope_scaling": dict(QWEN3_YARN_ROPE_SCALING)}


FP8_QUANTIZATION_CONFIG: dict[str, Any] = {
    "activation_scheme": "dynamic",
    "fmt": "e4m3",
    "quant_method": "fp8",
    "weight_block_size": [128, 128],
}

GENERATION_CONFIG: dict[str, Any] = {  # the defaults the Qwen3 model cards state
    "bos_token_id": 151643,
    "do_sample": True,
    "eos_token_id": [151645, 151643],
    "pad_token_id": 151643,
    "temperature": 0.6,
    "top_k": 20,
    "top_p": 0.95,
    "transformers_version": "4.51.0",
}

TOKENIZER_CONFIG: dict[str, Any] = {
    "bos_token": None,
    "clean_up_tokenization_spaces": False,
    "eos_token": "<|im_end|>",
    "model_max_length": 131072,
    "pad_token": "<|endoftext|>",
    "split_special_tokens": False,
    "tokenizer_class": "Qwen2Tokenizer",
    "unk_token": None,
}

_SIZES = {"F8_E4M3": 1, "BF16": 2, "F16": 2, "F32": 4}
SCALE_DTYPES = ("BF16", "F16", "F32")
# HF save_pretrained splits at max_shard_size; 4 GB keeps the FP8 4B model in 2 shards.
DEFAULT_SHARD_BYTES = 4_000_000_000
_CHUNK_ELEMENTS = 1 << 24  # random data is generated and written in chunks of this size

TensorSpec = tuple[str, str, tuple[int, ...]]


def resolve_arch(arch: str | dict, layers: int | None = None) -> dict:
    """The config dict for ``arch`` (a QWEN3_ARCHS name or a config dict), ``layers`` applied."""
    if isinstance(arch, str):
        key = arch.lower()
        if key not in QWEN3_ARCHS:
            raise ValueError(f"unknown architecture {arch!r}; known: {', '.join(QWEN3_ARCHS)}")
        cfg = dict(QWEN3_ARCHS[key])
    elif isinstance(arch, dict):
        cfg = dict(arch)
    else:
        raise TypeError(f"arch must be a name or a config dict, got {type(arch).__name__}")
    if layers is not None:
        if not isinstance(layers, int) or isinstance(layers, bool) or layers < 1:
            raise ValueError(f"layers must be a positive integer, got {layers!r}")
        cfg["num_hidden_layers"] = layers
        cfg["max_window_layers"] = layers
    return cfg


def qwen3_tensors(arch: dict, fp8_block: tuple[int, int] | None) -> list[TensorSpec]:
    """Every tensor of a Qwen3 dense checkpoint as (name, safetensors dtype, shape).

    With ``fp8_block`` the seven linear weights of each layer are F8_E4M3 and each gets a
    ``weight_scale_inv`` of shape [ceil(out/bo), ceil(in/bi)] (dtype "BF16" here; the
    writer substitutes the requested scale dtype). Order: embeddings, layer by layer,
    final norm, lm_head (only when the embeddings are not tied).
    """
    hidden = arch["hidden_size"]
    inter = arch["intermediate_size"]
    heads = arch["num_attention_heads"]
    kv = arch.get("num_key_value_heads", heads)
    head_dim = arch.get("head_dim") or hidden // heads
    vocab = arch["vocab_size"]
    linear_dtype = "F8_E4M3" if fp8_block else "BF16"
    out: list[TensorSpec] = [("model.embed_tokens.weight", "BF16", (vocab, hidden))]
    linears = [
        ("self_attn.q_proj", (heads * head_dim, hidden)),
        ("self_attn.k_proj", (kv * head_dim, hidden)),
        ("self_attn.v_proj", (kv * head_dim, hidden)),
        ("self_attn.o_proj", (hidden, heads * head_dim)),
        ("mlp.gate_proj", (inter, hidden)),
        ("mlp.up_proj", (inter, hidden)),
        ("mlp.down_proj", (hidden, inter)),
    ]
    for i in range(arch["num_hidden_layers"]):
        p = f"model.layers.{i}."
        layer: list[TensorSpec] = [
            (p + "input_layernorm.weight", "BF16", (hidden,)),
            (p + "post_attention_layernorm.weight", "BF16", (hidden,)),
            (p + "self_attn.q_norm.weight", "BF16", (head_dim,)),
            (p + "self_attn.k_norm.weight", "BF16", (head_dim,)),
        ]
        for module, shape in linears:
            layer.append((f"{p}{module}.weight", linear_dtype, shape))
            if fp8_block:
                bo, bi = fp8_block
                scale = (math.ceil(shape[0] / bo), math.ceil(shape[1] / bi))
                layer.append((f"{p}{module}.weight_scale_inv", "BF16", scale))
        out.extend(sorted(layer))
    out.append(("model.norm.weight", "BF16", (hidden,)))
    if not arch.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", "BF16", (vocab, hidden)))
    return out


def _nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    return math.prod(shape) * _SIZES[dtype]


def _split_shards(specs: list[TensorSpec], shard_bytes: int) -> list[list[TensorSpec]]:
    shards: list[list[TensorSpec]] = [[]]
    size = 0
    for spec in specs:
        n = _nbytes(spec[1], spec[2])
        if shards[-1] and size + n > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(spec)
        size += n
    return shards


def _header_bytes(specs: list[TensorSpec]) -> bytes:
    doc: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dtype, shape in specs:
        end = offset + _nbytes(dtype, shape)
        doc[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, end]}
        offset = end
    raw = json.dumps(doc, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # the data section starts 8-byte aligned
    return struct.pack("<Q", len(raw)) + raw


class _RandomFill:
    """Chunked generators of plausible tensor data (numpy imported only when used)."""

    def __init__(self, seed: int) -> None:
        import numpy as np

        self.np = np
        self.rng = np.random.default_rng(seed)
        # BF16 tensors (embeddings, lm_head, norms) are passed through unchanged by a
        # converter, so they are cut from two pre-generated pools at random offsets
        # instead of generating ~1 GB of fresh randomness per model.
        self._pools = {
            norm: memoryview(self._bf16_bits(2 * _CHUNK_ELEMENTS, norm)) for norm in (False, True)
        }

    def fp8(self, count: int) -> bytes:
        # Random codes; 0x7F/0xFF (NaN in e4m3fn) become 0x7E/0xFE (+-448), so none occur.
        v = self.np.frombuffer(self.rng.bytes(count), dtype=self.np.uint8).copy()
        v[(v & 0x7F) == 0x7F] ^= 1
        return v.tobytes()

    def bf16(self, count: int, norm: bool) -> memoryview:
        start = int(self.rng.integers(0, _CHUNK_ELEMENTS + 1))
        return self._pools[norm][2 * start : 2 * (start + count)]

    def _bf16_bits(self, count: int, norm: bool) -> bytes:
        np = self.np
        b = np.frombuffer(self.rng.bytes(2 * count), dtype="<u2")
        if norm:  # RMSNorm weights near 1.0: sign +, exponent 127, random low mantissa bits
            bits = (b & np.uint16(0x001F)) | np.uint16(127 << 7)
        else:  # random sign and mantissa, exponent 119..122: magnitudes 2**-8 .. 2**-4
            exp = (np.uint16(119) + ((b >> np.uint16(7)) & np.uint16(3))) << np.uint16(7)
            bits = (b & np.uint16(0x807F)) | exp
        return bits.astype("<u2").tobytes()

    def scale(self, count: int, dtype: str) -> bytes:
        np = self.np
        # amax/448 for weights of magnitude ~0.01-0.1: positive, finite, normal in F16 too.
        values = self.rng.uniform(2.0e-5, 2.0e-4, count).astype(np.float32)
        if dtype == "F32":
            return values.astype("<f4").tobytes()
        if dtype == "F16":
            return values.astype("<f2").tobytes()
        import ml_dtypes

        return values.astype(ml_dtypes.bfloat16).tobytes()


def _write_shard(path: str, specs: list[TensorSpec], data: str, filler: _RandomFill | None) -> int:
    header = _header_bytes(specs)
    total = len(header) + sum(_nbytes(d, s) for _, d, s in specs)
    with open(path, "wb") as fh:
        fh.write(header)
        if data == "sparse":
            fh.truncate(total)
            return total
        assert filler is not None
        for name, dtype, shape in specs:
            remaining = math.prod(shape)
            while remaining:
                n = min(remaining, _CHUNK_ELEMENTS)
                if dtype == "F8_E4M3":
                    fh.write(filler.fp8(n))
                elif name.endswith("_scale_inv"):
                    fh.write(filler.scale(n, dtype))
                else:
                    fh.write(filler.bf16(n, norm=name.endswith("norm.weight")))
                remaining -= n
    return total


def write_checkpoint(
    out_dir: str,
    arch: str | dict = "qwen3-4b",
    layers: int | None = None,
    fp8: bool = True,
    scale_dtype: str = "BF16",
    data: str = "random",
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    seed: int = 0,
) -> dict:
    """Write a complete model directory and return a summary of what was written.

    Files: config.json (with ``quantization_config`` when ``fp8``), generation_config.json,
    tokenizer_config.json, model.safetensors.index.json and
    ``model-0000i-of-0000N.safetensors`` shards of at most ``shard_bytes`` data bytes each
    (a single tensor larger than that gets a shard of its own).
    """
    if data not in ("random", "sparse"):
        raise ValueError(f"data must be 'random' or 'sparse', got {data!r}")
    if scale_dtype not in SCALE_DTYPES:
        raise ValueError(f"scale_dtype must be one of {SCALE_DTYPES}, got {scale_dtype!r}")
    if not isinstance(shard_bytes, int) or shard_bytes < 1:
        raise ValueError(f"shard_bytes must be a positive integer, got {shard_bytes!r}")
    cfg = resolve_arch(arch, layers)
    block = tuple(FP8_QUANTIZATION_CONFIG["weight_block_size"]) if fp8 else None
    specs = [
        (n, scale_dtype if n.endswith("_scale_inv") else d, s)
        for n, d, s in qwen3_tensors(cfg, block)  # type: ignore[arg-type]
    ]
    if fp8:
        cfg["quantization_config"] = dict(FP8_QUANTIZATION_CONFIG)
    os.makedirs(out_dir, exist_ok=True)
    write_json(os.path.join(out_dir, "config.json"), cfg)
    write_json(os.path.join(out_dir, "generation_config.json"), GENERATION_CONFIG)
    write_json(os.path.join(out_dir, "tokenizer_config.json"), TOKENIZER_CONFIG)

    groups = _split_shards(specs, shard_bytes)
    filler = _RandomFill(seed) if data == "random" else None
    weight_map: dict[str, str] = {}
    shard_names: list[str] = []
    for i, group in enumerate(groups, start=1):
        name = f"model-{i:05d}-of-{len(groups):05d}.safetensors"
        _write_shard(os.path.join(out_dir, name), group, data, filler)
        shard_names.append(name)
        weight_map.update((spec[0], name) for spec in group)
    total_size = sum(_nbytes(d, s) for _, d, s in specs)
    index = {
        "metadata": {"total_size": total_size},
        "weight_map": dict(sorted(weight_map.items())),
    }
    write_json(os.path.join(out_dir, "model.safetensors.index.json"), index)

    served = [
        (n, "BF16" if d == "F8_E4M3" else d, s) for n, d, s in specs if not n.endswith("_scale_inv")
    ]
    return {
        "out_dir": out_dir,
        "config": cfg,
        "fp8": fp8,
        "data": data,
        "shards": shard_names,
        "tensor_count": len(specs),
        "total_size": total_size,
        "served_tensor_count": len(served),
        "served_total_size": sum(_nbytes(d, s) for _, d, s in served),
    }


def write_json(path: str, doc: dict) -> None:
    """``doc`` as indented JSON with a final newline (config.json, index, descriptions)."""
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)
        fh.write("\n")


# ----------------------------------------------------------------------------- ModelSlim W8A8
# The layout msModelSlim writes for static W8A8 (the ``W8A8`` scheme vllm-ascend serves with
# --quantization ascend): per quantized linear ``<p>.weight`` int8 [out, in] (per-channel
# symmetric), ``<p>.weight_scale`` / ``<p>.weight_offset`` [out, 1], ``<p>.input_scale`` /
# ``<p>.input_offset`` [1] (static per-tensor activation quantization), ``<p>.deq_scale`` F32
# [out] (input_scale x weight_scale, the BF16 model's dtype) and ``<p>.quant_bias`` int32
# [out] (folds the activation offset: -input_offset x sum of the row's int8 weights).
# Everything else stays float ("FLOAT"), as msModelSlim does for the layers it is told to skip
# (the real description in issue #633 keeps down_proj float); the tiny test model also keeps
# o_proj float: with it quantized it answers 0 of 27 questions, with the five others 27 of 27.
# quant_model_description.json maps every tensor name to its type.
# Sources: vllm-ascend vllm_ascend/quantization/methods/w8a8_static.py (get_weight,
# get_pertensor_param, get_perchannel_param, npu_quant_matmul); the description of a real
# msModelSlim W8A8 Qwen2.5 checkpoint in vllm-project/vllm-ascend issue #633; file names in
# docs/source/tutorials (quant_model_weight_w8a8.safetensors).
MODELSLIM_W8A8_FILE = "quant_model_weight_w8a8.safetensors"
W8A8_WEIGHT_QMAX = 127  # symmetric per-channel int8 weights: codes -127..127
W8A8_ACT_LEVELS = 255  # asymmetric per-tensor int8 activations: 256 codes, 255 steps
MODELSLIM_W8A8_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
W8A8_FLOAT16_REFUSAL = (
    "W8A8 for float16 models (310P) needs deq_scale as packed int64, which this converter does "
    "not write (it writes the float32 [out] deq_scale of bfloat16 models); serve the FP16 "
    "conversion (ascend-deploy convert --dtype float16) unquantized"
)


def _calibrate_inputs(model_dir: str, prompts: list[str], names: list[str]) -> dict:
    """Min and max of every listed projection's input over ``prompts`` (float forward pass)."""
    import numpy as np

    from .engine import load_model
    from .tokenizer import load_tokenizer

    model, tok = load_model(model_dir), load_tokenizer(model_dir)
    seen: dict[str, list[float]] = {}

    class _Probe:
        __array_ufunc__ = None  # numpy defers ``x @ probe`` to __rmatmul__

        def __init__(self, name: str, weight_t: np.ndarray) -> None:
            self.name, self.weight_t = name, weight_t

        def __rmatmul__(self, x: np.ndarray) -> np.ndarray:
            lo, hi = seen.setdefault(self.name, [0.0, 0.0])
            seen[self.name] = [min(lo, float(x.min())), max(hi, float(x.max()))]
            return x @ self.weight_t

    plain = model._wt
    wanted = set(names)
    model._wt = lambda name: _Probe(name, plain(name)) if name in wanted else plain(name)  # type: ignore[method-assign]
    for text in prompts:
        model.logits(tok.encode(text))
    return seen


def _static_activation_params(lo: float, hi: float) -> tuple:
    """Static per-tensor int8 activation scale (BF16-exact float32) and zero point for the
    calibrated input range ``[lo, hi]`` (widened to include 0)."""
    import numpy as np

    from .float_tensors import bf16_round

    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = bf16_round(np.float32(max(hi - lo, 1e-6) / W8A8_ACT_LEVELS))
    offset = np.float32(np.clip(np.rint(-128.0 - lo / scale), -128, 127))
    return np.float32(scale), offset


def write_modelslim_w8a8(
    src_dir: str,
    out_dir: str,
    calibration: list[str],
    projections: tuple[str, ...] = MODELSLIM_W8A8_PROJECTIONS,
    dtype: str = "bfloat16",
) -> dict:
    """Quantize the float (BF16) Qwen3 model in ``src_dir`` to a ModelSlim W8A8 directory.

    ``calibration``: prompt texts whose activations fix each static input scale and offset.
    ``dtype``: the model dtype the checkpoint is for; only bfloat16. A float16 model (310P)
    is refused, as is a source whose config or projections are float16: vllm-ascend's W8A8
    method allocates ``deq_scale`` as float32 [out] for bfloat16 models but as int64 [out]
    (a packed form) for float16 ones (``get_perchannel_param`` in
    vllm_ascend/quantization/methods/w8a8_static.py), a layout this writer does not
    produce (``W8A8_FLOAT16_REFUSAL``).
    Writes config.json (no quantization_config: ModelSlim leaves it as it is),
    ``quant_model_weight_w8a8.safetensors``, ``quant_model_description.json`` and copies the
    tokenizer and generation files. Deterministic: the same inputs give the same bytes.
    """
    import numpy as np

    from ascend_deploy.model.files import load_config, read_weight_layout

    from .float_tensors import bf16_bytes, float_bytes, read_float, write_tensor_file

    config = load_config(src_dir)
    if "quantization_config" in config:
        raise ValueError(f"{src_dir}: expected a float model, found a quantization_config")
    layout = read_weight_layout(src_dir)
    pattern = tuple(f".{p}.weight" for p in projections)
    quantized = [n for n in layout.weight_map if n.endswith(pattern)]
    f16 = [n for n in quantized if layout.headers[layout.weight_map[n]].tensors[n].dtype == "F16"]
    if dtype != "bfloat16" or "float16" in (config.get("torch_dtype"), config.get("dtype")) or f16:
        what = f"dtype {dtype!r}" if dtype != "bfloat16" else f"{src_dir} (float16)"
        raise ValueError(f"{what}: {W8A8_FLOAT16_REFUSAL}")
    ranges = _calibrate_inputs(src_dir, calibration, quantized)

    def read(name: str) -> tuple[str, np.ndarray]:
        return read_float(src_dir, layout, name)

    tensors: list[tuple[str, str, tuple[int, ...], bytes]] = []
    description: dict[str, str] = {"model_quant_type": "W8A8", "version": "1.0.0"}
    for name in sorted(layout.weight_map):
        dtype, arr = read(name)
        if name not in quantized:
            tensors.append((name, dtype, tuple(arr.shape), float_bytes(dtype, arr)))
            description[name] = "FLOAT"
            continue
        prefix = name[: -len(".weight")]
        w = arr.astype(np.float32)
        w_scale = np.maximum(np.abs(w).max(axis=1), 1e-8) / W8A8_WEIGHT_QMAX
        q = np.clip(np.rint(w / w_scale[:, None]), -W8A8_WEIGHT_QMAX, W8A8_WEIGHT_QMAX)
        q = q.astype(np.int8)
        in_scale, in_offset = _static_activation_params(*ranges[name])
        # deq_scale from the stored (BF16) input scale, as the engine quantizes with it: the
        # calibration's float32 noise (it depends on the BLAS kernel) reaches the file only
        # where a calibrated value sits on a BF16 or integer rounding step.
        deq = (in_scale * w_scale).astype(np.float32)
        bias = (-np.int64(in_offset) * q.astype(np.int64).sum(axis=1)).astype(np.int32)
        out_ch = w.shape[0]
        parts = [
            ("weight", "I8", tuple(w.shape), q.tobytes()),
            ("weight_scale", "F32", (out_ch, 1), w_scale.astype("<f4").tobytes()),
            ("weight_offset", "F32", (out_ch, 1), np.zeros(out_ch, "<f4").tobytes()),
            ("input_scale", "BF16", (1,), bf16_bytes(np.array([in_scale], np.float32))),
            ("input_offset", "BF16", (1,), bf16_bytes(np.array([in_offset], np.float32))),
            ("deq_scale", "F32", (out_ch,), deq.astype("<f4").tobytes()),
            ("quant_bias", "I32", (out_ch,), bias.astype("<i4").tobytes()),
        ]
        for suffix, dt, shape, data in parts:
            tensors.append((f"{prefix}.{suffix}", dt, shape, data))
            description[f"{prefix}.{suffix}"] = "W8A8"
    tensors.sort(key=lambda t: t[0])
    os.makedirs(out_dir, exist_ok=True)
    write_tensor_file(os.path.join(out_dir, MODELSLIM_W8A8_FILE), tensors)
    write_json(os.path.join(out_dir, "quant_model_description.json"), description)
    write_json(os.path.join(out_dir, "config.json"), config)
    for extra in ("generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        path = os.path.join(src_dir, extra)
        if os.path.isfile(path):
            with open(path, "rb") as src, open(os.path.join(out_dir, extra), "wb") as dst:
                dst.write(src.read())
    return {
        "out_dir": out_dir,
        "quantized": len(quantized),
        "tensors": len(tensors),
        "bytes": sum(len(t[3]) for t in tensors),
    }


W8A8_CALIBRATED = ("input_scale", "input_offset", "deq_scale", "quant_bias")


def w8a8_differences(expected_dir: str, made_dir: str, max_flips: int = 2) -> list[str]:
    """How the ModelSlim W8A8 directory ``made_dir`` differs from ``expected_dir`` beyond
    what the calibration's arithmetic can move; [] when it is the same checkpoint.

    Calibration runs the model forward in float32 through BLAS, whose kernel (chosen by the
    processor) decides the last bits of every sum. Only two stored values depend on those
    sums: each projection's BF16 ``input_scale`` and its integer ``input_offset``, and they
    change only where the calibrated range sits within that noise (about 1e-6 relative) of a
    rounding step. So: every other file and tensor byte for byte; ``input_scale`` within one
    BF16 step and ``input_offset`` within one integer step, at most ``max_flips`` of them in
    all (a changed quantization moves many); ``deq_scale`` and ``quant_bias`` exactly what
    the file's own scale and offset give.
    """
    import numpy as np

    problems: list[str] = []
    names = sorted(os.listdir(expected_dir))
    if sorted(os.listdir(made_dir)) != names:
        return [f"files differ: {names} vs {sorted(os.listdir(made_dir))}"]
    for name in names:
        if name != MODELSLIM_W8A8_FILE and _read(expected_dir, name) != _read(made_dir, name):
            problems.append(f"{name}: bytes differ")
    want, got = (_w8a8_tensors(d) for d in (expected_dir, made_dir))
    if {k: (v[0], v[1].shape) for k, v in want.items()} != {
        k: (v[0], v[1].shape) for k, v in got.items()
    }:
        return [*problems, f"{MODELSLIM_W8A8_FILE}: tensor names, dtypes or shapes differ"]
    flips = []
    for tname in sorted(want):
        suffix = tname.rsplit(".", 1)[-1]
        a, b = want[tname][1], got[tname][1]
        if suffix not in W8A8_CALIBRATED:
            if a.tobytes() != b.tobytes():
                problems.append(f"{tname}: bytes differ")
        elif suffix in ("input_scale", "input_offset") and a.tobytes() != b.tobytes():
            flips.append(tname)
            # a BF16 step is one unit of the bit pattern (same sign); an offset step is 1
            pair = (a.view("<u2"), b.view("<u2")) if suffix == "input_scale" else (a, b)
            values = [
                int(v.reshape(-1)[0]) if suffix == "input_scale" else float(_bf16(v)[0])
                for v in pair
            ]
            if abs(values[0] - values[1]) > 1:
                problems.append(f"{tname}: {_bf16(a)[0]} -> {_bf16(b)[0]}, more than one step")
    if len(flips) > max_flips:
        problems.append(f"{len(flips)} calibrated values moved (at most {max_flips}): {flips}")
    for tensors, where in ((want, expected_dir), (got, made_dir)):
        for tname in sorted(t for t in tensors if t.endswith(".input_scale")):
            prefix = tname[: -len(".input_scale")]
            scale = _bf16(tensors[tname][1])[0]
            offset = _bf16(tensors[f"{prefix}.input_offset"][1])[0]
            w_scale = tensors[f"{prefix}.weight_scale"][1].reshape(-1)
            codes = tensors[f"{prefix}.weight"][1].astype(np.int64)
            deq = (np.float32(scale) * w_scale).astype("<f4")
            bias = (-np.int64(offset) * codes.sum(axis=1)).astype("<i4")
            if deq.tobytes() != tensors[f"{prefix}.deq_scale"][1].tobytes():
                problems.append(f"{where}: {prefix}.deq_scale is not input_scale x weight_scale")
            if bias.tobytes() != tensors[f"{prefix}.quant_bias"][1].tobytes():
                problems.append(f"{where}: {prefix}.quant_bias is not -input_offset x sum(weight)")
    return problems


def _read(directory: str, name: str) -> bytes:
    with open(os.path.join(directory, name), "rb") as fh:
        return fh.read()


def _bf16(raw: object) -> object:
    import numpy as np

    return (np.asarray(raw).view("<u2").astype(np.uint32) << 16).view(np.float32)


def _w8a8_tensors(directory: str) -> dict:
    """Every tensor of the W8A8 weights file as (dtype, raw little-endian array)."""
    import numpy as np

    from ascend_deploy.model.safetensors_header import read_header

    path = os.path.join(directory, MODELSLIM_W8A8_FILE)
    header = read_header(path)
    raw = np.frombuffer(_read(directory, MODELSLIM_W8A8_FILE), dtype=np.uint8)
    kinds = {"I8": "<i1", "I32": "<i4", "F32": "<f4", "BF16": "<u2"}
    out = {}
    for tname, info in header.tensors.items():
        start = header.data_offset + info.begin
        data = raw[start : start + info.nbytes].view(kinds[info.dtype]).reshape(info.shape)
        out[tname] = (info.dtype, data)
    return out


def write_modelslim_description(model_dir: str, quant_type: str = "W8A8") -> dict:
    """Write a complete ``quant_model_description.json`` for the checkpoint in ``model_dir``.

    Every linear layer's weight (``ascend_deploy.model.modelslim.linear_weights``) gets
    ``quant_type``, every other tensor ``FLOAT``: the shape of a ModelSlim export that
    upstream's loader accepts, for tests that need a ModelSlim directory without its
    quantized tensors (the weights stay as they are). Returns the description.
    """
    from ascend_deploy.model.files import read_weight_layout
    from ascend_deploy.model.modelslim import linear_weights

    layout = read_weight_layout(model_dir)
    names = sorted(info.name for _shard, info in layout.tensors())
    linear = set(linear_weights((i.name, i.shape) for _s, i in layout.tensors()))
    description = {"model_quant_type": quant_type, "version": "1.0.0"}
    description.update({n: quant_type if n in linear else "FLOAT" for n in names})
    write_json(os.path.join(model_dir, "quant_model_description.json"), description)
    return description
