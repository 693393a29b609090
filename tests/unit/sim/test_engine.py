"""The numpy Qwen3 engine on the committed tiny FP8 model and checkpoints derived from it.

The committed model is block-FP8 (the Qwen3-FP8 layout). The engine must refuse it; the
BF16 checkpoint from ``ascend_deploy.fp8.convert`` must answer every verification
question under greedy decoding; a wrong conversion that casts FP8 to BF16 without the
scales must answer garbage.
"""

from __future__ import annotations

import json
import math
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, TINY_FP8

from ascend_deploy.errors import InputError
from ascend_deploy.model.safetensors_header import read_header
from ascend_sim.engine import load_model

MODEL = TINY_FP8
QUESTIONS = json.loads((DATA / "verification-questions.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def model(tiny_bf16):
    return load_model(str(tiny_bf16))


def _write_safetensors(path: Path, tensors: dict[str, tuple[str, tuple, bytes]]) -> None:
    """A plain safetensors writer (dtype name, shape, raw little-endian bytes)."""
    header, offset = {}, 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        offset += len(raw)
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(blob)) + blob)
        for _, _, raw in tensors.values():
            fh.write(raw)


def _fp8_to_float(raw: bytes) -> np.ndarray:
    """float8_e4m3fn bytes to float32 (1 sign, 4 exponent bits with bias 7, 3 mantissa)."""
    b = np.frombuffer(raw, dtype=np.uint8).astype(np.int32)
    sign = np.where(b & 0x80, -1.0, 1.0)
    exp = (b >> 3) & 0xF
    man = (b & 0x7).astype(np.float64)
    val = np.where(exp == 0, man / 8 * 2.0**-6, (1 + man / 8) * 2.0 ** (exp - 7))
    val = np.where((b & 0x7F) == 0x7F, np.nan, val)
    return (sign * val).astype(np.float32)


def _to_bf16_bytes(x: np.ndarray) -> bytes:
    """Round float32 to BF16 (nearest even) and return the raw 16-bit values."""
    bits = x.astype(np.float32).view(np.uint32)
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)
    return (rounded >> 16).astype("<u2").tobytes()


@pytest.fixture(scope="module")
def scales_ignored_dir(tmp_path_factory) -> Path:
    """The classic broken conversion: FP8 cast to BF16, *_scale_inv dropped, no scaling."""
    dst = tmp_path_factory.mktemp("tiny") / "scales-ignored"
    dst.mkdir()
    index = json.loads((MODEL / "model.safetensors.index.json").read_text())
    for shard in sorted(set(index["weight_map"].values())):
        header = read_header(MODEL / shard)
        raw = (MODEL / shard).read_bytes()
        out = {}
        for name, info in header.tensors.items():
            data = raw[header.data_offset + info.begin : header.data_offset + info.end]
            if name.endswith("_scale_inv"):
                continue
            if info.dtype == "F8_E4M3":
                out[name] = ("BF16", info.shape, _to_bf16_bytes(_fp8_to_float(data)))
            else:
                out[name] = (info.dtype, info.shape, data)
        _write_safetensors(dst / shard, out)
    index["weight_map"] = {
        k: v for k, v in index["weight_map"].items() if not k.endswith("_scale_inv")
    }
    (dst / "model.safetensors.index.json").write_text(json.dumps(index))
    config = json.loads((MODEL / "config.json").read_text())
    config.pop("quantization_config")
    (dst / "config.json").write_text(json.dumps(config))
    return dst


def _answer(model, tok, question: dict) -> str:
    prompt = tok.apply_chat_template(
        question["messages"],
        add_generation_prompt=True,
        enable_thinking=question["enable_thinking"],
    )
    ids = [t for t, _, _ in model.generate(tok.encode(prompt), question["max_tokens"])]
    return tok.decode(ids, skip_special_tokens=True)


def _passes(question: dict, answer: str) -> bool:
    """The verification rule: with thinking on, the answer is the text after ``</think>``."""
    if question["enable_thinking"]:
        if "</think>" not in answer:
            return False
        answer = answer.split("</think>", 1)[1]
    if "expect_exact" in question and answer.strip() != question["expect_exact"]:
        return False
    if "expect_any" in question and not any(s in answer for s in question["expect_any"]):
        return False
    return all(s in answer for s in question.get("expect_all", []))


def test_fp8_checkpoint_is_refused():
    with pytest.raises(InputError) as err:
        load_model(str(MODEL))
    msg = str(err.value)
    assert "F8_E4M3" in msg and "no FP8" in msg and "convert" in msg
    assert str(MODEL) in msg and "\n" not in msg


def test_loading_reads_no_tensor_data(tiny_bf16):
    m = load_model(str(tiny_bf16))
    assert m.weights.loaded() == []
    m.logits([1, 2, 3])
    assert "model.embed_tokens.weight" in m.weights.loaded()


def test_question_set_shape():
    ids = [q["id"] for q in QUESTIONS]
    assert len(ids) == len(set(ids))
    assert any(q["enable_thinking"] for q in QUESTIONS) and any(
        not q["enable_thinking"] for q in QUESTIONS
    )
    for q in QUESTIONS:
        assert q["messages"] and q["max_tokens"] > 0
        assert "expect_any" in q or "expect_all" in q


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q["id"])
def test_converted_model_answers(model, tok, question):
    answer = _answer(model, tok, question)
    assert _passes(question, answer), answer
    if question["enable_thinking"]:
        assert answer.startswith("<think>\n") and "\n</think>\n\n" in answer
    else:
        assert "<think>" not in answer


def test_thinking_tokens_are_single_special_tokens(model, tok):
    q = next(q for q in QUESTIONS if q["enable_thinking"])
    prompt = tok.apply_chat_template(q["messages"], enable_thinking=True)
    ids = [t for t, _, _ in model.generate(tok.encode(prompt), q["max_tokens"])]
    assert ids[0] == 259 and 260 in ids and ids[-1] == 258  # <think> ... </think> ... <|im_end|>


def test_scales_ignored_conversion_answers_garbage(scales_ignored_dir, model, tok):
    broken = load_model(str(scales_ignored_dir))
    good_answers = 0
    for question in QUESTIONS:
        answer = _answer(broken, tok, question)
        good_answers += _passes(question, answer)
        assert answer != _answer(model, tok, question)
    assert good_answers == 0


def test_kv_cache_decoding_matches_full_forward(model, tok):
    prompt = tok.encode(tok.apply_chat_template([{"role": "user", "content": "What is 6 * 7?"}]))
    steps = list(model.generate(prompt, 12, stop_ids=[], logprobs=3))
    generated = [t for t, _, _ in steps]
    full = model.logits(prompt + generated).astype(np.float64)
    for i, (token, logprob, top) in enumerate(steps):
        row = full[len(prompt) - 1 + i]
        ref = row - row.max() - math.log(np.exp(row - row.max()).sum())
        assert token == int(np.argmax(row))
        assert logprob == pytest.approx(ref[token], abs=1e-4)
        assert [t for t, _ in top] == list(np.argsort(-ref, kind="stable")[:3])
        assert top[0][1] >= top[1][1] >= top[2][1]


def test_stop_ids_and_max_tokens(model, tok):
    prompt = tok.encode(
        tok.apply_chat_template(
            [{"role": "user", "content": "Reply with exactly the word OK."}], enable_thinking=False
        )
    )
    out = [t for t, _, _ in model.generate(prompt, 50)]
    assert out[-1] == 258 and out.count(258) == 1  # stops after <|im_end|> by default
    ignore = [t for t, _, _ in model.generate(prompt, 10, stop_ids=[])]
    assert len(ignore) == 10
    assert list(model.generate(prompt, 0)) == []


def test_sampling_is_seeded(model, tok):
    prompt = tok.encode("The")
    a = [t for t, _, _ in model.generate(prompt, 30, temperature=1.5, seed=7, stop_ids=[])]
    b = [t for t, _, _ in model.generate(prompt, 30, temperature=1.5, seed=7, stop_ids=[])]
    c = [t for t, _, _ in model.generate(prompt, 30, temperature=1.5, seed=8, stop_ids=[])]
    greedy = [t for t, _, _ in model.generate(prompt, 30, stop_ids=[])]
    assert a == b and a != c and a != greedy
    # top_p this small keeps only the most likely token: same as greedy.
    nucleus = [
        t
        for t, _, _ in model.generate(prompt, 30, temperature=1.0, top_p=1e-9, seed=3, stop_ids=[])
    ]
    assert nucleus == greedy


def test_bad_generation_arguments(model):
    with pytest.raises(InputError, match="prompt is empty"):
        list(model.generate([], 5))
    with pytest.raises(InputError, match="token id 999 outside the vocabulary"):
        model.logits([1, 999])
    with pytest.raises(InputError, match="temperature"):
        list(model.generate([1], 5, temperature=-1))
    with pytest.raises(InputError, match="top_p"):
        list(model.generate([1], 5, top_p=0))
    too_long = [65] * (model.dims.max_positions + 1)
    with pytest.raises(InputError, match="max_position_embeddings"):
        model.logits(too_long)


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_bad_model_directories(tiny_bf16, tmp_path):
    with pytest.raises(InputError, match="model directory not found"):
        load_model(str(tmp_path / "nope"))
    d = _copy(tiny_bf16, tmp_path / "garbage-config")
    (d / "config.json").write_bytes(b"\x89PNG\x00\x01")
    with pytest.raises(InputError, match=r"config\.json: config\.json is not valid JSON"):
        load_model(str(d))
    (d / "config.json").write_text("")
    with pytest.raises(InputError, match=r"config\.json is empty"):
        load_model(str(d))

    d = _copy(tiny_bf16, tmp_path / "llama")
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "model_type": "llama"}))
    with pytest.raises(InputError, match="model_type 'llama' is not supported"):
        load_model(str(d))
    (d / "config.json").write_text(json.dumps({**cfg, "hidden_size": "160"}))
    with pytest.raises(InputError, match="'hidden_size' must be a positive integer"):
        load_model(str(d))
    (d / "config.json").write_text(json.dumps({**cfg, "hidden_size": 192}))
    with pytest.raises(
        InputError, match=r"has shape \[261, 160\], but config.json implies \[261, 192\]"
    ):
        load_model(str(d))
    (d / "config.json").write_text(
        json.dumps({**cfg, "num_hidden_layers": cfg["num_hidden_layers"] + 1})
    )
    with pytest.raises(InputError, match="is missing from the checkpoint"):
        load_model(str(d))

    d = _copy(tiny_bf16, tmp_path / "truncated")
    shard = d / "model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-100])
    with pytest.raises(InputError, match="truncated"):
        load_model(str(d))

    d = _copy(tiny_bf16, tmp_path / "missing-shard")
    (d / "model-00001-of-00002.safetensors").unlink()
    with pytest.raises(InputError, match=r"shard listed in .* is missing"):
        load_model(str(d))


def test_f32_weights_give_the_same_logits(tiny_bf16, model, tmp_path):
    """Widening every tensor to F32 (no rounding) must not change a single logit."""
    d = _copy(tiny_bf16, tmp_path / "f32")
    for shard in sorted(d.glob("*.safetensors")):
        header = read_header(shard)
        raw = shard.read_bytes()
        out = {}
        for name, info in header.tensors.items():
            data = raw[header.data_offset + info.begin : header.data_offset + info.end]
            assert info.dtype == "BF16"
            wide = (np.frombuffer(data, "<u2").astype(np.uint32) << 16).view(np.float32)
            out[name] = ("F32", info.shape, wide.astype("<f4").tobytes())
        _write_safetensors(shard, out)
    ids = list(range(40, 140))
    assert np.array_equal(load_model(str(d)).logits(ids), model.logits(ids))
