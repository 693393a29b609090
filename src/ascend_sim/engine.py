"""A numpy forward pass for Qwen3 dense checkpoints: the emulator's "NPU".

It computes exactly what transformers' ``Qwen3ForCausalLM`` computes (float32 math):
token embedding, per layer ``x += o_proj(attn(rope(q_norm(q)), rope(k_norm(k)), v))`` after
``input_layernorm`` and ``x += down(silu(gate(h)) * up(h))`` after
``post_attention_layernorm``, a final RMSNorm and the (tied) LM head. Attention is causal
grouped-query attention; RoPE uses the rotate-half convention of transformers'
``apply_rotary_pos_emb``. Decoding keeps a KV cache.

Weights are memory-mapped and converted to float32 the first time a tensor is used, so
loading only reads headers. Only BF16, F16 and F32 weights run; block-FP8 (``F8_E4M3``)
tensors are refused, as Atlas A2/A3 have no FP8 compute (convert them to BF16 first).
numpy only: no torch, no ml_dtypes (BF16 is widened with a 16-bit shift).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from ascend_deploy.errors import InputError
from ascend_deploy.model.files import (
    MODELSLIM_DESCRIPTION,
    load_config,
    read_json_file,
    read_weight_layout,
)
from ascend_deploy.model.safetensors_header import TensorInfo

RUNNABLE_DTYPES = ("BF16", "F16", "F32")
FP8_DTYPES = ("F8_E4M3", "F8_E5M2")
PREFILL_CHUNK = 256  # query rows per attention block: bounds memory for long prompts
REQUIRED_CONFIG = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
)


def _config_int(config: dict, key: str, path: str) -> int:
    value = config.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise InputError(f"{path}: '{key}' must be a positive integer, got {value!r}")
    return value


@dataclass(frozen=True)
class Dims:
    """The architecture numbers the forward pass needs, read from config.json."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    eps: float
    rope_theta: float
    max_positions: int
    tied: bool

    @classmethod
    def from_config(cls, config: dict, path: str) -> Dims:
        for key in REQUIRED_CONFIG:
            _config_int(config, key, path)
        heads = config["num_attention_heads"]
        kv = config["num_key_value_heads"]
        if heads % kv:
            raise InputError(
                f"{path}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}"
            )
        head_dim = config.get("head_dim") or config["hidden_size"] // heads
        rope = config.get("rope_parameters") or {}
        theta = config.get("rope_theta", rope.get("rope_theta", 10000.0))
        scaling = config.get("rope_scaling") or {}
        kind = scaling.get("rope_type", scaling.get("type", "default")) if scaling else "default"
        if kind != "default" or rope.get("rope_type", "default") != "default":
            raise InputError(f"{path}: RoPE scaling {kind!r} is not supported by the emulator")
        return cls(
            hidden=config["hidden_size"],
            intermediate=config["intermediate_size"],
            layers=config["num_hidden_layers"],
            heads=heads,
            kv_heads=kv,
            head_dim=int(head_dim),
            vocab=config["vocab_size"],
            eps=float(config.get("rms_norm_eps", 1e-6)),
            rope_theta=float(theta),
            max_positions=int(config.get("max_position_embeddings", 40960)),
            tied=bool(config.get("tie_word_embeddings", False)),
        )

    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        h, d, q, kv = self.hidden, self.head_dim, self.heads, self.kv_heads
        shapes: dict[str, tuple[int, ...]] = {
            "model.embed_tokens.weight": (self.vocab, h),
            "model.norm.weight": (h,),
        }
        if not self.tied:
            shapes["lm_head.weight"] = (self.vocab, h)
        for i in range(self.layers):
            p = f"model.layers.{i}."
            shapes.update(
                {
                    p + "input_layernorm.weight": (h,),
                    p + "post_attention_layernorm.weight": (h,),
                    p + "self_attn.q_proj.weight": (q * d, h),
                    p + "self_attn.k_proj.weight": (kv * d, h),
                    p + "self_attn.v_proj.weight": (kv * d, h),
                    p + "self_attn.o_proj.weight": (h, q * d),
                    p + "self_attn.q_norm.weight": (d,),
                    p + "self_attn.k_norm.weight": (d,),
                    p + "mlp.gate_proj.weight": (self.intermediate, h),
                    p + "mlp.up_proj.weight": (self.intermediate, h),
                    p + "mlp.down_proj.weight": (h, self.intermediate),
                }
            )
        return shapes


class LazyWeights:
    """Memory-mapped tensors, widened to float32 on first use and then cached."""

    def __init__(self, model_dir: str, where: dict[str, tuple[str, int, TensorInfo]]) -> None:
        self.model_dir = model_dir
        self._where = where  # name -> (shard path, data offset, info)
        self._maps: dict[str, np.memmap] = {}
        self._cache: dict[str, np.ndarray] = {}

    def loaded(self) -> list[str]:
        return sorted(self._cache)

    def __getitem__(self, name: str) -> np.ndarray:
        arr = self._cache.get(name)
        if arr is None:
            arr = self._read(name)
            self._cache[name] = arr
        return arr

    def _read(self, name: str) -> np.ndarray:
        path, offset, info = self._where[name]
        mm = self._maps.get(path)
        if mm is None:
            mm = np.memmap(path, dtype=np.uint8, mode="r")
            self._maps[path] = mm
        raw = mm[offset + info.begin : offset + info.end]
        if info.dtype == "BF16":
            bits = raw.view("<u2").astype(np.uint32) << 16
            out = bits.view(np.float32)
        elif info.dtype == "F16":
            out = raw.view("<f2").astype(np.float32)
        elif info.dtype == "F32":
            out = np.array(raw.view("<f4"), dtype=np.float32)
        elif info.dtype in ("I8", "I32"):  # ModelSlim W8A8 integers (exact in float32)
            out = raw.view("<i1" if info.dtype == "I8" else "<i4").astype(np.float32)
        else:  # refused at load time; never reinterpret other bytes as floats
            raise InputError(f"{path}: tensor {name!r} has dtype {info.dtype}, cannot run it")
        return out.reshape(info.shape)


class W8A8Linear:
    """A ModelSlim static-W8A8 projection, computed as vllm-ascend's ``npu_quant_matmul``.

    ``x @ layer``: the activation is quantized per tensor, ``x_q = clip(round(x /
    input_scale + input_offset), -128, 127)``, and the output is ``(x_q @ weight.T +
    quant_bias) * deq_scale`` (vllm_ascend/quantization/methods/w8a8_static.py). The int8
    products are summed in float32, exact for these sizes.
    """

    __array_ufunc__ = None  # numpy hands ``x @ self`` to __rmatmul__

    def __init__(self, weights: LazyWeights, prefix: str) -> None:
        self.weight_t = np.ascontiguousarray(weights[prefix + ".weight"].T)
        self.input_scale = np.float32(weights[prefix + ".input_scale"].reshape(-1)[0])
        self.input_offset = np.float32(weights[prefix + ".input_offset"].reshape(-1)[0])
        self.deq_scale = weights[prefix + ".deq_scale"].reshape(-1)
        self.quant_bias = weights[prefix + ".quant_bias"].reshape(-1)

    def __rmatmul__(self, x: np.ndarray) -> np.ndarray:
        xq = np.clip(np.rint(x / self.input_scale + self.input_offset), -128, 127)
        return ((xq.astype(np.float32) @ self.weight_t) + self.quant_bias) * self.deq_scale


W8A8_PARTS = ("input_scale", "input_offset", "deq_scale", "quant_bias")


@dataclass
class KVCache:
    """Per-layer keys and values, ``[kv_heads, positions, head_dim]``, grown by doubling."""

    layers: int
    kv_heads: int
    head_dim: int
    length: int = 0
    keys: list[np.ndarray] = field(default_factory=list)
    values: list[np.ndarray] = field(default_factory=list)

    def append(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Store ``k``/``v`` (``[kv_heads, n, head_dim]``) after ``length``; return all so far."""
        n = k.shape[1]
        end = self.length + n
        if len(self.keys) <= layer:
            cap = max(64, end)
            shape = (self.kv_heads, cap, self.head_dim)
            self.keys.append(np.zeros(shape, np.float32))
            self.values.append(np.zeros(shape, np.float32))
        if self.keys[layer].shape[1] < end:
            cap = max(end, 2 * self.keys[layer].shape[1])
            for store in (self.keys, self.values):
                grown = np.zeros((self.kv_heads, cap, self.head_dim), np.float32)
                grown[:, : self.length] = store[layer][:, : self.length]
                store[layer] = grown
        self.keys[layer][:, self.length : end] = k
        self.values[layer][:, self.length : end] = v
        return self.keys[layer][:, :end], self.values[layer][:, :end]


def _rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    var = np.mean(np.square(x), axis=-1, keepdims=True)
    return (x / np.sqrt(var + np.float32(eps))) * weight


def _silu(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # exp(-x) -> inf for x << 0 gives the right limit, -0
        return x / (np.float32(1.0) + np.exp(-x))


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    z = logits.astype(np.float64)
    z = z - z.max()
    return z - np.log(np.exp(z).sum())


class Qwen3Model:
    """A loaded model: ``logits(ids)`` for a full pass, ``generate(...)`` with a KV cache."""

    def __init__(self, model_dir: str, config: dict, dims: Dims, weights: LazyWeights) -> None:
        self.model_dir = model_dir
        self.config = config
        self.dims = dims
        self.weights = weights
        d = dims.head_dim
        # transformers' default RoPE: inv_freq = 1 / theta^(2i/d), in float32.
        exps = np.arange(0, d, 2, dtype=np.float32) / np.float32(d)
        self._inv_freq = (np.float32(1.0) / (np.float32(dims.rope_theta) ** exps)).astype(
            np.float32
        )
        eos = config.get("eos_token_id")
        self.eos_token_ids = [eos] if isinstance(eos, int) else list(eos or [])
        self.w8a8: set[str] = set()  # projection weights served through W8A8Linear

    # -- the forward pass ------------------------------------------------------------------
    def _w(self, name: str) -> np.ndarray:
        return self.weights[name]

    def _wt(self, name: str) -> np.ndarray | W8A8Linear:
        """A projection weight transposed to ``[in, out]`` (cached) for ``x @ w``."""
        key = name + ".T"
        cache = self.weights._cache
        if key not in cache:
            if name in self.w8a8:
                cache[key] = W8A8Linear(self.weights, name[: -len(".weight")])  # type: ignore[assignment]
            else:
                cache[key] = np.ascontiguousarray(self.weights[name].T)
        return cache[key]

    def _rope(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        freqs = positions.astype(np.float32)[:, None] * self._inv_freq[None, :]
        emb = np.concatenate([freqs, freqs], axis=-1)
        return np.cos(emb), np.sin(emb)

    @staticmethod
    def _apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        half = x.shape[-1] // 2
        rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos + rotated * sin

    def _forward(self, ids: Sequence[int], cache: KVCache) -> np.ndarray:
        """Hidden states after the final norm for ``ids`` appended to ``cache``."""
        dm = self.dims
        n = len(ids)
        start = cache.length
        if start + n > dm.max_positions:
            raise InputError(
                f"sequence of {start + n} tokens exceeds the model's "
                f"max_position_embeddings {dm.max_positions}"
            )
        x = self._w("model.embed_tokens.weight")[np.asarray(ids, dtype=np.int64)]
        cos, sin = self._rope(np.arange(start, start + n))
        cos_h, sin_h = cos[None], sin[None]  # broadcast over heads: [1, n, d]
        group = dm.heads // dm.kv_heads
        scale = np.float32(dm.head_dim**-0.5)
        for layer in range(dm.layers):
            p = f"model.layers.{layer}."
            h = _rms_norm(x, self._w(p + "input_layernorm.weight"), dm.eps)
            q = (h @ self._wt(p + "self_attn.q_proj.weight")).reshape(n, dm.heads, dm.head_dim)
            k = (h @ self._wt(p + "self_attn.k_proj.weight")).reshape(n, dm.kv_heads, dm.head_dim)
            v = (h @ self._wt(p + "self_attn.v_proj.weight")).reshape(n, dm.kv_heads, dm.head_dim)
            q = _rms_norm(q, self._w(p + "self_attn.q_norm.weight"), dm.eps).transpose(1, 0, 2)
            k = _rms_norm(k, self._w(p + "self_attn.k_norm.weight"), dm.eps).transpose(1, 0, 2)
            q = self._apply_rope(q, cos_h, sin_h)
            k = self._apply_rope(k, cos_h, sin_h)
            keys, values = cache.append(layer, k, v.transpose(1, 0, 2))
            # [kv_heads, group, n, d]: query heads 0..group-1 share kv head 0 (repeat_kv).
            qg = q.reshape(dm.kv_heads, group, n, dm.head_dim)
            out = np.empty_like(qg)
            for c0 in range(0, n, PREFILL_CHUNK):
                c1 = min(n, c0 + PREFILL_CHUNK)
                visible = start + c1
                scores = np.einsum("kgqd,ktd->kgqt", qg[:, :, c0:c1], keys[:, :visible]) * scale
                # Causal: query at position start+i sees keys 0..start+i.
                qpos = np.arange(start + c0, start + c1)[:, None]
                mask = np.arange(visible)[None, :] > qpos
                scores = np.where(mask, np.float32(-np.inf), scores)
                scores = scores - scores.max(axis=-1, keepdims=True)
                probs = np.exp(scores)
                probs /= probs.sum(axis=-1, keepdims=True)
                out[:, :, c0:c1] = np.einsum("kgqt,ktd->kgqd", probs, values[:, :visible])
            attn = out.reshape(dm.heads, n, dm.head_dim).transpose(1, 0, 2).reshape(n, -1)
            x = x + attn @ self._wt(p + "self_attn.o_proj.weight")
            h = _rms_norm(x, self._w(p + "post_attention_layernorm.weight"), dm.eps)
            gate = h @ self._wt(p + "mlp.gate_proj.weight")
            up = h @ self._wt(p + "mlp.up_proj.weight")
            x = x + (_silu(gate) * up) @ self._wt(p + "mlp.down_proj.weight")
        cache.length = start + n
        return _rms_norm(x, self._w("model.norm.weight"), dm.eps)

    def _lm_head(self, hidden: np.ndarray) -> np.ndarray:
        name = "model.embed_tokens.weight" if self.dims.tied else "lm_head.weight"
        return hidden @ self._wt(name)

    def new_cache(self) -> KVCache:
        dm = self.dims
        return KVCache(dm.layers, dm.kv_heads, dm.head_dim)

    def _check_ids(self, ids: Sequence[int], what: str) -> list[int]:
        out = [int(i) for i in ids]
        if not out:
            raise InputError(f"{what} is empty")
        bad = [i for i in out if not 0 <= i < self.dims.vocab]
        if bad:
            raise InputError(
                f"{what}: token id {bad[0]} outside the vocabulary 0..{self.dims.vocab - 1}"
            )
        return out

    def logits(self, ids: Sequence[int]) -> np.ndarray:
        """Float32 logits ``[len(ids), vocab]`` of a fresh forward pass over ``ids``."""
        ids = self._check_ids(ids, "input ids")
        return self._lm_head(self._forward(ids, self.new_cache()))

    # -- decoding --------------------------------------------------------------------------
    def generate(
        self,
        prompt_ids: Sequence[int],
        max_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop_ids: Sequence[int] | None = None,
        logprobs: int | None = None,
    ) -> Iterator[tuple[int, float, list[tuple[int, float]] | None]]:
        """Yield ``(token_id, logprob, top_logprobs)`` per generated token.

        ``temperature`` 0 is greedy. ``top_p`` < 1 samples from the smallest set of tokens
        whose probability reaches ``top_p``. ``stop_ids`` (default: config ``eos_token_id``)
        end generation after the stop token is yielded; pass ``[]`` to ignore EOS.
        Logprobs are of the model's raw distribution; ``logprobs=k`` adds the top k.
        Generation also ends at ``max_position_embeddings``.
        """
        prompt = self._check_ids(prompt_ids, "prompt")
        if max_tokens < 0:
            raise InputError(f"max_tokens must be >= 0, got {max_tokens}")
        if temperature < 0 or not 0 < top_p <= 1:
            raise InputError(
                f"need temperature >= 0 and 0 < top_p <= 1 (got {temperature}, {top_p})"
            )
        stops = set(self.eos_token_ids if stop_ids is None else stop_ids)
        rng = np.random.default_rng(seed)
        cache = self.new_cache()
        hidden = self._forward(prompt, cache)[-1:]
        for _ in range(max_tokens):
            logits = self._lm_head(hidden)[0]
            logp = _log_softmax(logits)
            if temperature == 0:
                token = int(np.argmax(logits))
            else:
                token = _sample(logits, temperature, top_p, rng)
            top = None
            if logprobs:
                k = min(int(logprobs), logp.shape[0])
                best = np.argsort(-logp, kind="stable")[:k]
                top = [(int(i), float(logp[i])) for i in best]
            yield token, float(logp[token]), top
            if token in stops or cache.length >= self.dims.max_positions:
                return
            hidden = self._forward([token], cache)


def _sample(logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator) -> int:
    z = logits.astype(np.float64) / temperature
    probs = np.exp(z - z.max())
    probs /= probs.sum()
    if top_p < 1.0:
        order = np.argsort(-probs, kind="stable")
        cum = np.cumsum(probs[order])
        keep = order[: int(np.searchsorted(cum, top_p)) + 1]
        mask = np.zeros_like(probs)
        mask[keep] = probs[keep]
        probs = mask / mask.sum()
    return int(rng.choice(probs.shape[0], p=probs))


def _w8a8_names(model_dir: str, quantization: str | None) -> set[str]:
    """Projection weights the ModelSlim description marks W8A8 (only with ``ascend``)."""
    if quantization != "ascend":
        return set()
    path = os.path.join(model_dir, MODELSLIM_DESCRIPTION)
    desc = read_json_file(path, "ModelSlim quantization description")
    other = sorted({v for k, v in desc.items() if k.endswith(".weight")} - {"W8A8", "FLOAT"})
    if other:
        raise InputError(f"{path}: quant type {other[0]} is not emulated (W8A8 and FLOAT only)")
    return {k for k, v in desc.items() if k.endswith(".weight") and v == "W8A8"}


def load_model(model_dir: str, quantization: str | None = None) -> Qwen3Model:
    """Read config.json and the shard headers; map the weights (no tensor data is read).

    ``quantization="ascend"``: projections that ``quant_model_description.json`` marks
    ``W8A8`` are int8 with their ModelSlim scales and run as :class:`W8A8Linear`.
    InputError, naming the file, for: a missing or malformed config, an architecture other
    than a dense Qwen3, FP8 tensors (convert to BF16 first), a missing tensor, a tensor of
    the wrong shape or an unsupported dtype.
    """
    w8a8 = _w8a8_names(model_dir, quantization)
    config = load_config(model_dir)
    cfg_path = os.path.join(model_dir, "config.json")
    model_type = config.get("model_type")
    if model_type not in ("qwen3", "qwen2"):
        raise InputError(
            f"{cfg_path}: model_type {model_type!r} is not supported by the emulator "
            "(dense Qwen3 only)"
        )
    dims = Dims.from_config(config, cfg_path)
    layout = read_weight_layout(model_dir)
    fp8 = [(shard, info) for shard, info in layout.tensors() if info.dtype in FP8_DTYPES]
    if fp8:
        shard, info = fp8[0]
        raise InputError(
            f"{os.path.join(model_dir, shard)}: tensor {info.name!r} is {info.dtype} "
            f"({len(fp8)} FP8 tensors in the checkpoint); Ascend A2/A3 NPUs have no FP8 "
            "compute, so these weights cannot run. Convert the checkpoint to BF16 first "
            "(ascend-deploy convert SRC DST)"
        )
    where: dict[str, tuple[str, int, TensorInfo]] = {}
    for name, shape in dims.expected_shapes().items():
        shard = layout.weight_map.get(name)
        if shard is None:
            raise InputError(
                f"{model_dir}: tensor {name!r} is missing from the checkpoint "
                f"(config.json declares {dims.layers} layers)"
            )
        header = layout.headers[shard]
        info = header.tensors[name]
        path = os.path.join(model_dir, shard)
        if name in w8a8:
            for part in W8A8_PARTS:
                extra = name[: -len("weight")] + part
                if extra not in layout.weight_map:
                    raise InputError(f"{model_dir}: W8A8 tensor {extra!r} is missing")
                h = layout.headers[layout.weight_map[extra]]
                where[extra] = (
                    os.path.join(model_dir, layout.weight_map[extra]),
                    h.data_offset,
                    h.tensors[extra],
                )
            if info.dtype != "I8":
                raise InputError(f"{path}: W8A8 tensor {name!r} is {info.dtype}, expected I8")
        elif info.dtype not in RUNNABLE_DTYPES:
            raise InputError(
                f"{path}: tensor {name!r} has dtype {info.dtype}; expected one of "
                f"{', '.join(RUNNABLE_DTYPES)}"
            )
        if info.shape != shape:
            raise InputError(
                f"{path}: tensor {name!r} has shape {list(info.shape)}, but config.json "
                f"implies {list(shape)}"
            )
        where[name] = (path, header.data_offset, info)
    model = Qwen3Model(model_dir, config, dims, LazyWeights(model_dir, where))
    model.w8a8 = w8a8
    return model
