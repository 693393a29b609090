"""Make tests/data/tiny-qwen3-fp8-hd64: the trained tiny model with head_dim 64, as block FP8.

vLLM's CPU attention before 0.27 rejects head_dim 48 ("Unsupported CPU attention
configuration"), so the real-engine image, pinned to the paired vLLM 0.23.0, serves this copy:
the FP8 test model converted to BF16 with the bundle's converter, its heads widened by
``ascend_sim.head_padding.pad_head_dim`` (same function, rope_theta re-based), then quantized
back to the Qwen3-FP8 layout with ``ascend_deploy.fp8.quantize.quantize_checkpoint``. The tool
stops with an error unless the converted result answers every verification question.
Deterministic: running it again gives the same bytes (tests/unit/sim/test_head_padding.py).

    .venv/bin/python tools/make_tiny_hd64.py --out tests/data/tiny-qwen3-fp8-hd64
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "src"))

from make_tiny_w8a8 import cli  # noqa: E402  (this directory is on sys.path)

from ascend_deploy.fp8.convert import convert_checkpoint  # noqa: E402
from ascend_deploy.fp8.quantize import quantize_checkpoint  # noqa: E402
from ascend_sim.engine import load_model  # noqa: E402
from ascend_sim.head_padding import pad_head_dim  # noqa: E402
from ascend_sim.tokenizer import load_tokenizer  # noqa: E402

HEAD_DIM = 64
README = """# tiny-qwen3-fp8-hd64

The tiny test model of `../tiny-qwen3-fp8` with head_dim 64 instead of 48, for the real vLLM
engine image: vLLM's CPU attention before 0.27 serves head sizes 32, 64, 80, 96, 112, 128, ...
and the image is pinned to vLLM 0.23.0 (the vLLM paired with vllm-ascend v0.23.0). Made by
`tools/make_tiny_hd64.py`: FP8 -> BF16 with `ascend-deploy convert`, heads widened by
`ascend_sim.head_padding.pad_head_dim` (the same function: each head's RoPE halves moved
apart with zeros between them, `rope_theta` 1e6 -> 1e6^(64/48) = 1e8 so that every used
frequency is unchanged, k_norm scaled by sqrt(48/64) for the attention scale, zero value
rows), then block-FP8 quantized again (`quantize_checkpoint`, 128x128, BF16 scales).

Architecture: as `../tiny-qwen3-fp8` but head_dim 64 and rope_theta 1e8; KV cache 1,024
bytes per token in BF16 (2 layers x 2 KV heads x 64 x 2 x 2 bytes). Its converted weights
answer every verification question (the tool checks that before it finishes).
"""


def _answers(model_dir: str, questions: list[dict]) -> list[str]:
    model, tok = load_model(model_dir), load_tokenizer(model_dir)
    out = []
    for q in questions:
        prompt = tok.apply_chat_template(q["messages"], True, q.get("enable_thinking", True))
        ids = [t for t, _, _ in model.generate(tok.encode(prompt), q["max_tokens"])]
        out.append(tok.decode(ids, skip_special_tokens=True))
    return out


def make(fp8_dir: str, questions_path: str, out_dir: str) -> dict:
    """Write the head_dim-64 FP8 copy of ``fp8_dir`` into ``out_dir``; check its answers."""
    with open(questions_path, encoding="utf-8") as fh:
        questions = json.load(fh)
    with tempfile.TemporaryDirectory(prefix="tiny-hd64-") as tmp:
        bf16, wide, check = (os.path.join(tmp, n) for n in ("bf16", "wide", "check"))
        convert_checkpoint(fp8_dir, bf16)
        pad_head_dim(bf16, wide, HEAD_DIM)
        summary = quantize_checkpoint(wide, out_dir)
        convert_checkpoint(out_dir, check)
        expected = _answers(bf16, questions)
        got = _answers(check, questions)
    wrong = [q["id"] for q, a, b in zip(questions, expected, got, strict=True) if a != b]
    if wrong:
        raise SystemExit(f"make_tiny_hd64: answers changed for {', '.join(wrong)}")
    with open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8") as fh:
        fh.write(README)
    return {**summary, "answers_equal": len(questions)}


def main() -> int:
    return cli(make, __doc__ or "")


if __name__ == "__main__":
    raise SystemExit(main())
