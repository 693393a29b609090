"""Precision alignment: the numpy engine against transformers on the same converted weights.

Needs the ``train`` extra (torch, transformers); skipped without it. The committed FP8
model is converted to BF16 with ``ascend_deploy.fp8.convert`` and loaded by both sides in
float32, so the only differences are float32 summation order.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import DATA, TINY_FP8

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ascend_sim.engine import load_model  # noqa: E402

MODEL = TINY_FP8
QUESTIONS = json.loads((DATA / "verification-questions.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def hf_model(tiny_bf16):
    torch.set_num_threads(1)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(tiny_bf16), dtype=torch.float32)
    return model.eval()


@pytest.fixture(scope="module")
def np_model(tiny_bf16):
    return load_model(str(tiny_bf16))


def _hf_logits(model, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0].numpy()


def test_transformers_reads_the_config_as_qwen3(hf_model):
    cfg = hf_model.config
    assert type(hf_model).__name__ == "Qwen3ForCausalLM"
    assert cfg.tie_word_embeddings and cfg.num_key_value_heads * 2 == cfg.num_attention_heads
    assert cfg.rope_parameters["rope_theta"] == 1e6


@pytest.mark.parametrize("question", QUESTIONS[:3] + QUESTIONS[-1:], ids=lambda q: q["id"])
def test_logits_match_transformers(hf_model, np_model, tok, question):
    prompt = tok.apply_chat_template(question["messages"], enable_thinking=True)
    ids = tok.encode(prompt + "<think>\nSome reasoning 你好.\n</think>\n\n")
    ours = np_model.logits(ids)
    ref = _hf_logits(hf_model, ids)
    assert ours.shape == ref.shape == (len(ids), 261)
    assert np.abs(ours - ref).max() < 1e-3 * max(1.0, np.abs(ref).max())
    assert np.array_equal(ours.argmax(axis=1), ref.argmax(axis=1))


def test_greedy_generation_matches_transformers(hf_model, np_model, tok):
    for question in QUESTIONS[:4]:
        thinking = question["enable_thinking"]
        text = tok.apply_chat_template(question["messages"], enable_thinking=thinking)
        ids = tok.encode(text)
        ours = [t for t, _, _ in np_model.generate(ids, question["max_tokens"])]
        with torch.no_grad():
            out = hf_model.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=question["max_tokens"],
                do_sample=False,
                eos_token_id=[258, 256],
                pad_token_id=256,
            )
        assert ours == out[0, len(ids) :].tolist()


def test_hf_tokenizer_agrees(tok):
    hf = transformers.AutoTokenizer.from_pretrained(str(MODEL))
    text = "<|im_start|>user\n你好, Ascend! 🙂<|im_end|>\n<think>\n</think>"
    assert hf.encode(text, add_special_tokens=False) == tok.encode(text)
    assert hf.decode(tok.encode(text)) == text
    for thinking in (True, False):
        msgs = [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Translate to Chinese: Thank you"},
        ]
        rendered = hf.apply_chat_template(
            msgs, tokenize=False, add_generation_prompt=True, enable_thinking=thinking
        )
        assert rendered == tok.apply_chat_template(msgs, enable_thinking=thinking)
