"""Byte-level tokenizer with Qwen3's chat special tokens, for the emulator's tiny model.

Ids 0..255 are the raw bytes of UTF-8 text; the special tokens follow them. The model
directory carries a Hugging Face ``tokenizer.json`` (a byte-level BPE with the 256 byte
symbols at ids 0..255 and no merges), so transformers and vLLM can load the same files;
this module reads it with the standard library and checks that it has exactly that form.

The chat template follows Qwen3's (``tokenizer_config.json`` of Qwen/Qwen3-8B, revision
895c8d171bc03c30e113cd7a28c02494b5e068b7, line 230): ``<|im_start|>{role}\\n{content}
<|im_end|>\\n`` per message, ``<|im_start|>assistant\\n`` as the generation prompt, and an
empty ``<think>\\n\\n</think>\\n\\n`` after it when ``enable_thinking`` is false. Tools are
not supported.
"""

from __future__ import annotations

import codecs
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ascend_deploy.errors import InputError

TOKENIZER_FILE = "tokenizer.json"
GENERATION_CONFIG = "generation_config.json"
# Qwen3's special token names (Qwen/Qwen3-8B tokenizer_config.json "added_tokens_decoder").
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>")
# Qwen3 marks <think> and </think> "special": false, so skip_special_tokens keeps them.
NOT_SKIPPED = ("<think>", "</think>")
NUM_BYTES = 256


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table used by byte-level BPE.

    Printable Latin-1 bytes map to themselves; the other 68 bytes map to U+0100 onwards in
    byte order (GPT-2 ``encoder.py``, also the Hugging Face ``tokenizers`` ByteLevel
    pre-tokenizer), e.g. space -> "Ġ", newline -> "Ċ".
    """
    keep = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table: dict[int, str] = {}
    extra = 0
    for b in range(NUM_BYTES):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(NUM_BYTES + extra)
            extra += 1
    return table


@dataclass
class IncrementalDecoder:
    """Turn token ids into text one id at a time, holding back incomplete UTF-8 sequences.

    ``feed(id)`` returns the text that is complete so far (possibly ""); ``flush()``
    returns what is left, with U+FFFD for a sequence that never completed.
    """

    tokenizer: ByteTokenizer
    skip_special_tokens: bool = False

    def __post_init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token_id: int) -> str:
        tok = self.tokenizer
        if 0 <= token_id < NUM_BYTES:
            return self._utf8.decode(bytes((token_id,)))
        text = self._utf8.decode(b"", final=True)  # a special token ends any open sequence
        self._utf8.reset()
        if not (self.skip_special_tokens and token_id in tok.skipped_ids):
            text += tok.id_to_token(token_id)
        return text

    def flush(self) -> str:
        text = self._utf8.decode(b"", final=True)
        self._utf8.reset()
        return text


class ByteTokenizer:
    """UTF-8 bytes as ids 0..255 plus named special tokens."""

    def __init__(
        self,
        special_tokens: dict[str, int],
        eos_token_ids: Sequence[int],
        skipped: Iterable[str] | None = None,
    ) -> None:
        """``skipped``: the names ``skip_special_tokens`` drops (default: all but
        ``<think>``/``</think>``)."""
        self.special_tokens = dict(special_tokens)
        if skipped is None:
            skipped = [n for n in self.special_tokens if n not in NOT_SKIPPED]
        self.skipped_ids = {self.special_tokens[n] for n in skipped}
        self._special_by_id = {i: s for s, i in self.special_tokens.items()}
        self.vocab_size = NUM_BYTES + len(self.special_tokens)
        self.eos_token_ids = list(eos_token_ids)
        # Longest first, so a name that is a prefix of another cannot shadow it.
        names = sorted(self.special_tokens, key=len, reverse=True)
        self._special_re = re.compile("(" + "|".join(re.escape(n) for n in names) + ")")
        self._byte_symbols = bytes_to_unicode()

    # -- ids <-> text ----------------------------------------------------------------------
    def encode(self, text: str, allow_special: bool = True) -> list[int]:
        """UTF-8 bytes of ``text``; special token names become their ids if allowed."""
        if not allow_special:
            return list(text.encode("utf-8"))
        ids: list[int] = []
        for i, part in enumerate(self._special_re.split(text)):
            if i % 2:
                ids.append(self.special_tokens[part])
            elif part:
                ids.extend(part.encode("utf-8"))
        return ids

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """Text of ``ids``; invalid or incomplete UTF-8 becomes U+FFFD."""
        dec = self.incremental_decoder(skip_special_tokens)
        out = [dec.feed(int(i)) for i in ids]
        out.append(dec.flush())
        return "".join(out)

    def incremental_decoder(self, skip_special_tokens: bool = False) -> IncrementalDecoder:
        return IncrementalDecoder(self, skip_special_tokens)

    def id_to_token(self, token_id: int) -> str:
        """The vocabulary entry: a special token's name or the byte-level BPE symbol."""
        if 0 <= token_id < NUM_BYTES:
            return self._byte_symbols[token_id]
        if token_id in self._special_by_id:
            return self._special_by_id[token_id]
        raise InputError(
            f"token id {token_id} is outside the vocabulary (0..{self.vocab_size - 1})"
        )

    def token_bytes(self, token_id: int) -> bytes:
        """The raw bytes a token stands for (a special token: its UTF-8 name)."""
        if 0 <= token_id < NUM_BYTES:
            return bytes((token_id,))
        return self.id_to_token(token_id).encode("utf-8")

    def is_special(self, token_id: int) -> bool:
        return token_id in self._special_by_id

    # -- chat ------------------------------------------------------------------------------
    def apply_chat_template(
        self,
        messages: Sequence[dict],
        add_generation_prompt: bool = True,
        enable_thinking: bool = True,
    ) -> str:
        """Qwen3's chat format as text (see the module docstring for the source)."""
        msgs = [_normalise_message(i, m) for i, m in enumerate(messages)]
        if not msgs:
            raise InputError("chat request has no messages")
        last_query = len(msgs) - 1
        for i in range(len(msgs) - 1, -1, -1):
            role, content, _ = msgs[i]
            if role == "user" and not (
                content.startswith("<tool_response>") and content.endswith("</tool_response>")
            ):
                last_query = i
                break
        out: list[str] = []
        for i, (role, content, reasoning) in enumerate(msgs):
            if role in ("user", "system"):
                out.append(f"<|im_start|>{role}\n{content}<|im_end|>\n")
            elif role == "assistant":
                if reasoning is None and "</think>" in content:
                    head = content.partition("</think>")[0]
                    reasoning = head.rstrip("\n").split("<think>")[-1].lstrip("\n")
                    content = content.split("</think>")[-1].lstrip("\n")
                reasoning = reasoning or ""
                is_last = i == len(msgs) - 1
                if i > last_query and (is_last or reasoning):
                    out.append(
                        f"<|im_start|>assistant\n<think>\n{reasoning.strip(chr(10))}\n</think>\n\n"
                        f"{content.lstrip(chr(10))}<|im_end|>\n"
                    )
                else:
                    out.append(f"<|im_start|>assistant\n{content}<|im_end|>\n")
            else:  # "tool": Qwen3 wraps tool results in a user turn
                out.append(
                    f"<|im_start|>user\n<tool_response>\n{content}\n</tool_response><|im_end|>\n"
                )
        if add_generation_prompt:
            out.append("<|im_start|>assistant\n")
            if not enable_thinking:
                out.append("<think>\n\n</think>\n\n")
        return "".join(out)


def _normalise_message(index: int, message: object) -> tuple[str, str, str | None]:
    """(role, content text, reasoning_content) of one chat message, or InputError."""
    if not isinstance(message, dict):
        raise InputError(f"messages[{index}] must be an object with 'role' and 'content'")
    role = message.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        raise InputError(
            f"messages[{index}].role {role!r} is not one of system, user, assistant, tool"
        )
    content = message.get("content")
    if content is None:
        content = ""
    elif isinstance(content, list):  # OpenAI content parts: keep the text parts
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise InputError(f"messages[{index}].content: only text parts are supported")
            texts.append(str(part.get("text", "")))
        content = "".join(texts)
    elif not isinstance(content, str):
        raise InputError(f"messages[{index}].content must be a string or a list of text parts")
    reasoning = message.get("reasoning_content")
    return role, content, reasoning if isinstance(reasoning, str) else None


def _read_json(path: str, what: str) -> dict:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise InputError(f"{path}: {what} not found") from None
    except (IsADirectoryError, PermissionError) as exc:
        raise InputError(f"{path}: cannot read {what} ({exc.strerror})") from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: {what} is not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: {what} must be a JSON object")
    return doc


def load_tokenizer(model_dir: str) -> ByteTokenizer:
    """Read ``tokenizer.json`` (and ``generation_config.json`` for the stop ids).

    Only the byte-level layout described in the module docstring is accepted; anything else
    (a real 151k-entry Qwen vocabulary, merges, missing special tokens) is an InputError
    naming the file, because this emulator cannot tokenize it faithfully.
    """
    path = os.path.join(model_dir, TOKENIZER_FILE)
    doc = _read_json(path, "tokenizer file")
    model = doc.get("model")
    if not isinstance(model, dict) or not isinstance(model.get("vocab"), dict):
        raise InputError(f"{path}: no 'model.vocab' object; not a Hugging Face tokenizer.json")
    symbols = bytes_to_unicode()
    vocab = model["vocab"]
    if model.get("merges") or len(vocab) != NUM_BYTES:
        raise InputError(
            f"{path}: vocabulary has {len(vocab)} entries and {len(model.get('merges') or [])} "
            f"merges; the emulator only runs byte-level tokenizers (256 byte symbols, no merges)"
        )
    for b, sym in symbols.items():
        if vocab.get(sym) != b:
            raise InputError(
                f"{path}: byte {b} is not at id {b}; not a plain byte-level vocabulary"
            )
    added = doc.get("added_tokens") or []
    special: dict[str, int] = {}
    skipped: list[str] = []
    for entry in added:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), int):
            raise InputError(f"{path}: corrupt 'added_tokens' entry {entry!r}")
        special[str(entry.get("content"))] = entry["id"]
        if entry.get("special", True):
            skipped.append(str(entry.get("content")))
    missing = [s for s in SPECIAL_TOKENS if s not in special]
    if missing:
        raise InputError(f"{path}: special tokens {', '.join(missing)} are missing")
    expected = list(range(NUM_BYTES, NUM_BYTES + len(special)))
    if sorted(special.values()) != expected:
        raise InputError(
            f"{path}: special token ids {sorted(special.values())} must follow the bytes "
            f"as {expected[0]}..{expected[-1]}"
        )
    eos = [special["<|im_end|>"], special["<|endoftext|>"]]
    gen_path = os.path.join(model_dir, GENERATION_CONFIG)
    if os.path.exists(gen_path):
        value = _read_json(gen_path, "generation config").get("eos_token_id", eos)
        eos = [value] if isinstance(value, int) else value
        if not isinstance(eos, list) or not all(isinstance(i, int) for i in eos):
            raise InputError(f"{gen_path}: eos_token_id must be an integer or a list of integers")
    return ByteTokenizer(special, eos, skipped)


def tokenizer_json(special_tokens: Sequence[str] = SPECIAL_TOKENS) -> dict:
    """The ``tokenizer.json`` document for this layout (used by the training script)."""
    symbols = bytes_to_unicode()
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": NUM_BYTES + i,
                "content": name,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": name not in NOT_SKIPPED,
            }
            for i, name in enumerate(special_tokens)
        ],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": False,
            "use_regex": False,
        },
        "post_processor": None,
        "decoder": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": False,
            "use_regex": False,
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {symbols[b]: b for b in range(NUM_BYTES)},
            "merges": [],
        },
    }
