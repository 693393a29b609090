"""The emulator's byte-level tokenizer on the committed tiny model's tokenizer files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import TINY_FP8

from ascend_deploy.errors import InputError
from ascend_sim.tokenizer import SPECIAL_TOKENS, bytes_to_unicode, load_tokenizer

MODEL = TINY_FP8


def test_special_token_ids_follow_the_bytes(tok):
    assert [tok.encode(name) for name in SPECIAL_TOKENS] == [[256], [257], [258], [259], [260]]
    assert tok.vocab_size == 261
    assert tok.eos_token_ids == [258, 256]  # generation_config.json: <|im_end|>, <|endoftext|>
    assert tok.id_to_token(258) == "<|im_end|>"
    assert tok.id_to_token(ord("a")) == "a"
    assert tok.id_to_token(ord(" ")) == "Ġ" and tok.id_to_token(ord("\n")) == "Ċ"
    with pytest.raises(InputError, match="outside the vocabulary"):
        tok.id_to_token(261)


@pytest.mark.parametrize(
    "text",
    ["Hello, world!", "你好，世界", "谢谢 Thank you 🙂", "tab\tnew\nline", "", "ü\x00\x7f"],
)
def test_round_trip(tok, text):
    ids = tok.encode(text)
    assert ids == list(text.encode("utf-8"))
    assert tok.decode(ids) == text


def test_special_tokens_inside_text(tok):
    ids = tok.encode("<|im_start|>user\n你好<|im_end|>")
    assert ids == [257, *b"user\n", *"你好".encode(), 258]
    assert tok.decode(ids) == "<|im_start|>user\n你好<|im_end|>"
    assert tok.decode(ids, skip_special_tokens=True) == "user\n你好"
    # Like Qwen3 (added_tokens "special": false), <think> and </think> are kept.
    think = tok.encode("<think>\nx\n</think>\n\nOK<|im_end|>")
    assert tok.decode(think, skip_special_tokens=True) == "<think>\nx\n</think>\n\nOK"
    # Without special-token parsing the names are plain bytes.
    assert tok.encode("<think>", allow_special=False) == list(b"<think>")


def test_incremental_decoder_holds_partial_utf8(tok):
    ids = tok.encode("你好!")
    assert len(ids) == 7  # two 3-byte characters and "!"
    dec = tok.incremental_decoder()
    pieces = [dec.feed(i) for i in ids]
    assert pieces == ["", "", "你", "", "", "好", "!"]
    assert dec.flush() == ""


def test_incremental_decoder_special_token_ends_a_broken_sequence(tok):
    dec = tok.incremental_decoder()
    first_two = "谢".encode()[:2]
    assert [dec.feed(b) for b in first_two] == ["", ""]
    assert dec.feed(258) == "\ufffd<|im_end|>"
    dec2 = tok.incremental_decoder(skip_special_tokens=True)
    dec2.feed(first_two[0])
    assert dec2.feed(258) == "\ufffd"
    dec3 = tok.incremental_decoder()
    dec3.feed(first_two[0])
    assert dec3.flush() == "\ufffd"
    assert tok.decode([0xE4, 0xBD]) == "\ufffd"  # truncated 3-byte sequence
    assert tok.decode([0xFF]) == "\ufffd"  # never valid in UTF-8


def test_chat_template_thinking_on_and_off(tok):
    msgs = [{"role": "user", "content": "What is 12 + 7?"}]
    on = tok.apply_chat_template(msgs, add_generation_prompt=True, enable_thinking=True)
    off = tok.apply_chat_template(msgs, add_generation_prompt=True, enable_thinking=False)
    assert on == "<|im_start|>user\nWhat is 12 + 7?<|im_end|>\n<|im_start|>assistant\n"
    assert off == on + "<think>\n\n</think>\n\n"
    assert tok.apply_chat_template(msgs, add_generation_prompt=False) == (
        "<|im_start|>user\nWhat is 12 + 7?<|im_end|>\n"
    )


def test_chat_template_system_and_history(tok):
    msgs = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<think>\nold reasoning\n</think>\n\nHello"},
        {"role": "user", "content": [{"type": "text", "text": "Again"}]},
    ]
    text = tok.apply_chat_template(msgs)
    # Qwen3 drops the reasoning of turns before the last user query.
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello<|im_end|>\n"
        "<|im_start|>user\nAgain<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    # ...but keeps it for an assistant turn after the last query.
    tail = tok.apply_chat_template(
        [
            {"role": "user", "content": "Q"},
            {"role": "assistant", "content": "A", "reasoning_content": "r"},
        ],
        add_generation_prompt=False,
    )
    assert tail.endswith("<|im_start|>assistant\n<think>\nr\n</think>\n\nA<|im_end|>\n")


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        ([], "no messages"),
        (["hello"], r"messages\[0\] must be an object"),
        ([{"role": "robot", "content": "x"}], "robot"),
        ([{"role": "user", "content": 5}], "content must be a string"),
        ([{"role": "user", "content": [{"type": "image_url"}]}], "only text parts"),
    ],
)
def test_chat_template_rejects_bad_messages(tok, messages, match):
    with pytest.raises(InputError, match=match):
        tok.apply_chat_template(messages)


def _copy_tokenizer(tmp_path: Path) -> Path:
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(MODEL / name, tmp_path / name)
    return tmp_path


def test_bad_tokenizer_files(tmp_path):
    with pytest.raises(InputError, match=r"tokenizer\.json: tokenizer file not found"):
        load_tokenizer(str(tmp_path))
    (tmp_path / "tokenizer.json").write_bytes(b"\x00\xff garbage")
    with pytest.raises(InputError, match=r"tokenizer\.json: tokenizer file is not valid JSON"):
        load_tokenizer(str(tmp_path))
    (tmp_path / "tokenizer.json").write_text("[]")
    with pytest.raises(InputError, match="must be a JSON object"):
        load_tokenizer(str(tmp_path))
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(InputError, match=r"not a Hugging Face tokenizer\.json"):
        load_tokenizer(str(tmp_path))


def test_non_byte_level_vocabulary_is_refused(tmp_path):
    d = _copy_tokenizer(tmp_path)
    doc = json.loads((d / "tokenizer.json").read_text())
    doc["model"]["merges"] = ["Ġ t"]
    (d / "tokenizer.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match="only runs byte-level tokenizers"):
        load_tokenizer(str(d))
    doc["model"]["merges"] = []
    sym = bytes_to_unicode()
    doc["model"]["vocab"][sym[65]], doc["model"]["vocab"][sym[66]] = 66, 65
    (d / "tokenizer.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match="byte 65 is not at id 65"):
        load_tokenizer(str(d))


def test_missing_special_token_and_bad_eos(tmp_path):
    d = _copy_tokenizer(tmp_path)
    doc = json.loads((d / "tokenizer.json").read_text())
    doc["added_tokens"] = [t for t in doc["added_tokens"] if t["content"] != "<|im_end|>"]
    (d / "tokenizer.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"<\|im_end\|> are missing"):
        load_tokenizer(str(d))
    d2 = tmp_path / "two"
    d2.mkdir()
    _copy_tokenizer(d2)
    (d2 / "generation_config.json").write_text('{"eos_token_id": "x"}')
    with pytest.raises(InputError, match=r"generation_config\.json: eos_token_id"):
        load_tokenizer(str(d2))
