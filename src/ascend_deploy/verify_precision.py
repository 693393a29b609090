"""Precision alignment: served top-token logprobs against a CPU reference of the same weights.

For a few fixed prompts the reference (``transformers`` + ``torch`` on the CPU, float32, from
the BF16 directory the service loads) computes the next-token log-probabilities; the same
token ids go to the service's ``/v1/completions`` with ``logprobs`` and ``max_tokens: 1``.
Reported: the largest absolute difference between the two logprobs of the reference's top
token (a lower bound when the service does not rank that token in its top-k) and whether the
top-1 tokens agree. A wrong quantization path or broken kernels shows up as large
differences long before answers are visibly wrong. torch/transformers are imported only
here, lazily (the host-side package stays standard library).
"""

from __future__ import annotations

from typing import Any

from .verify_http import BadResponse, Client

CHAT_PROMPTS = [
    "What is the capital of France?",
    "What is 12 + 7?",
    "Write a Python function that returns the square of x.",
]
RAW_PROMPTS = ["The capital of France is"]
TOP = 5


def _prompt_ids(tok: Any) -> list[tuple[str, list[int]]]:
    out = []
    for text in CHAT_PROMPTS:
        msgs = [{"role": "user", "content": text}]
        try:
            ids = tok.apply_chat_template(
                msgs, add_generation_prompt=True, enable_thinking=False, tokenize=True
            )
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
        except (ValueError, TypeError, AttributeError):
            ids = tok(text)["input_ids"]
        out.append((text, [int(i) for i in ids]))
    for text in RAW_PROMPTS:
        out.append((text, [int(i) for i in tok(text)["input_ids"]]))
    return out


def compare_logprobs(client: Client, model: str | None, reference_dir: str) -> dict[str, Any]:
    """Compare the service with the CPU reference; ImportError without torch/transformers."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(reference_dir)
    net = AutoModelForCausalLM.from_pretrained(reference_dir, dtype=torch.float32)
    net.eval()
    rows = []
    for text, ids in _prompt_ids(tok):
        with torch.no_grad():
            logits = net(torch.tensor([ids])).logits[0, -1].float()
        ref = torch.log_softmax(logits, dim=-1)
        values, index = torch.topk(ref, TOP)
        ref_top = [(tok.decode([int(i)]), float(v)) for v, i in zip(values, index, strict=True)]
        doc = client.post_json(
            "/v1/completions",
            {"model": model, "prompt": ids, "max_tokens": 1, "temperature": 0, "logprobs": TOP},
        )
        try:
            served_top = doc["choices"][0]["logprobs"]["top_logprobs"][0]
        except (KeyError, IndexError, TypeError):
            raise BadResponse("/v1/completions returned no top_logprobs") from None
        if not isinstance(served_top, dict) or not served_top:
            raise BadResponse("/v1/completions returned empty top_logprobs")
        served_best = max(served_top.items(), key=lambda kv: kv[1])
        ref_text, ref_lp = ref_top[0]
        texts = [t for t, _ in ref_top]
        row: dict[str, Any] = {
            "prompt": text,
            "prompt_tokens": len(ids),
            "reference_top": ref_top[:3],
            "served_top": sorted(served_top.items(), key=lambda kv: -kv[1])[:3],
        }
        if len(set(texts)) < len(texts) or "\ufffd" in ref_text:
            # Partial UTF-8 tokens all read U+FFFD: the served dict keyed by text cannot say
            # which id a logprob belongs to, so this prompt is not comparable.
            row["skipped"] = "ambiguous token texts in the top-k"
        else:
            # The served logprob of the reference's top token; when the service does not even
            # rank it in its top-k, its k-th logprob bounds the difference from below.
            served_lp = served_top.get(ref_text)
            row["abs_diff"] = abs(
                (served_lp if served_lp is not None else min(served_top.values())) - ref_lp
            )
            row["in_served_top"] = served_lp is not None
            row["top1_agree"] = served_best[0] == ref_text
        rows.append(row)
    compared = [r for r in rows if "abs_diff" in r]
    if not compared:
        raise BadResponse("no prompt had unambiguous top tokens to compare")
    return {
        "prompts": len(compared),
        "max_abs_diff": max(r["abs_diff"] for r in compared),
        "top1_agree": sum(1 for r in compared if r["top1_agree"]),
        "rows": rows,
    }
