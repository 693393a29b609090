"""Precision alignment: served top-k distributions against a CPU reference of the same weights.

For a few fixed prompts the reference (``transformers`` + ``torch`` on the CPU, float32, from
the BF16 directory the service loads) computes the next-token distribution; the same token ids
go to the service's ``/v1/completions`` with ``logprobs: 5`` and ``max_tokens: 1``. For each
prompt, over the reference's top-5 tokens:

* the largest absolute logprob difference (a token the service does not rank in its top-5 is
  given the service's 5th logprob, so the difference is a lower bound);
* the KL divergence KL(reference || served) of the two distributions coarsened to those five
  tokens plus one bucket for everything else (coarsening never increases KL, so this bounds the
  full divergence from below);
* whether the top-1 tokens agree (a flip is allowed only where the reference's top-2 margin is
  within the logprob tolerance).

Tolerance, from BF16: its unit roundoff is u = 2^-8 (8 significant bits). A forward pass rounds
at each of the 2L+1 residual stages (attention and MLP of L layers, the LM head); independent
relative errors of size u add up like a random walk, so a logit z moves by at most
eps = u x sqrt(2L + 1) x max|z| (max over the reference logits of that prompt). A log-softmax
moves by at most twice the largest logit error: logprob tolerance 2 eps. KL of two softmaxes
whose logits differ by d is about Var_p(d) / 2 <= (2 eps)^2 / 2: KL tolerance 2 eps^2. A service
that computes in BF16 (or better) stays inside; a wrong weight, quantization path or kernel
moves whole distributions and does not. ``tolerance`` overrides the logprob tolerance (the KL
tolerance is then tolerance^2 / 2). torch/transformers are imported only here, lazily (the
host-side package stays standard library).
"""

from __future__ import annotations

import math
from typing import Any

from .http_client import BadResponse, Client

CHAT_PROMPTS = [
    "What is the capital of France?",
    "What is 12 + 7?",
    "Write a Python function that returns the square of x.",
]
RAW_PROMPTS = ["The capital of France is"]
TOP = 5
BF16_UNIT_ROUNDOFF = 2.0**-8
_FLOOR = 1e-12


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


def bf16_tolerances(max_abs_logit: float, layers: int) -> tuple[float, float]:
    """(logprob tolerance, KL tolerance) for one prompt; see the module docstring."""
    eps = BF16_UNIT_ROUNDOFF * math.sqrt(2 * layers + 1) * max_abs_logit
    return 2 * eps, 2 * eps * eps


def compare_top(ref_top: list[tuple[str, float]], served_top: dict[str, float]) -> dict:
    """Differences between the reference's top-k (text, logprob) and the served top-k dict."""
    floor_lp = min(served_top.values())
    served_top = {t: lp for t, lp in served_top.items() if "\ufffd" not in t}
    diffs, p, q = [], [], []
    for text, ref_lp in ref_top:
        served_lp = served_top.get(text, floor_lp)
        diffs.append(abs(served_lp - ref_lp))
        p.append(math.exp(ref_lp))
        q.append(math.exp(served_lp))
    p.append(max(_FLOOR, 1.0 - sum(p)))
    q.append(max(_FLOOR, 1.0 - sum(q)))
    kl = sum(pi * math.log(pi / max(qi, _FLOOR)) for pi, qi in zip(p, q, strict=True))
    served_best = max(served_top.items(), key=lambda kv: kv[1])[0]
    return {
        "abs_diff": max(diffs),
        "kl": max(0.0, kl),
        "in_served_top": sum(1 for t, _ in ref_top if t in served_top),
        "top1_agree": served_best == ref_top[0][0],
    }


def judge(rows: list[dict], tolerance: float | None = None) -> dict[str, Any]:
    """Summary and verdict over the compared rows (those with ``abs_diff``)."""
    compared = [r for r in rows if "abs_diff" in r]
    if not compared:
        raise BadResponse("no prompt had unambiguous top tokens to compare")
    bad = []
    for r in compared:
        lp_tol, kl_tol = r["lp_tolerance"], r["kl_tolerance"]
        if tolerance is not None:
            lp_tol, kl_tol = tolerance, tolerance * tolerance / 2
        flip_ok = r["reference_margin"] <= lp_tol
        r["ok"] = r["abs_diff"] <= lp_tol and r["kl"] <= kl_tol and (r["top1_agree"] or flip_ok)
        if not r["ok"]:
            bad.append(r["prompt"])
    return {
        "prompts": len(compared),
        "max_abs_diff": max(r["abs_diff"] for r in compared),
        "max_kl": max(r["kl"] for r in compared),
        "lp_tolerance": tolerance
        if tolerance is not None
        else min(r["lp_tolerance"] for r in compared),
        "kl_tolerance": tolerance * tolerance / 2
        if tolerance is not None
        else min(r["kl_tolerance"] for r in compared),
        "top1_agree": sum(1 for r in compared if r["top1_agree"]),
        "failed_prompts": bad,
        "ok": not bad,
        "rows": rows,
    }


def compare_logprobs(
    client: Client, model: str | None, reference_dir: str, tolerance: float | None = None
) -> dict[str, Any]:
    """Compare the service with the CPU reference; ImportError without torch/transformers."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(reference_dir)
    net = AutoModelForCausalLM.from_pretrained(reference_dir, dtype=torch.float32)
    net.eval()
    cfg = getattr(net.config, "text_config", None) or net.config
    layers = int(getattr(cfg, "num_hidden_layers", 1) or 1)
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
        if not all(isinstance(v, (int, float)) for v in served_top.values()):
            raise BadResponse("/v1/completions returned non-numeric top_logprobs")
        lp_tol, kl_tol = bf16_tolerances(float(logits.abs().max()), layers)
        row: dict[str, Any] = {
            "prompt": text,
            "prompt_tokens": len(ids),
            "reference_top": ref_top,
            "served_top": sorted(served_top.items(), key=lambda kv: -kv[1])[:TOP],
            "reference_margin": ref_top[0][1] - ref_top[1][1],
            "lp_tolerance": lp_tol,
            "kl_tolerance": kl_tol,
        }
        # Partial UTF-8 tokens all read U+FFFD (and two ids can share a text): the served dict
        # keyed by text cannot say which id such a logprob belongs to, so those tokens are left
        # out (their mass joins the "rest" bucket); without an unambiguous top-1, the prompt.
        texts = [t for t, _ in ref_top]
        clear = [(t, lp) for t, lp in ref_top if texts.count(t) == 1 and "\ufffd" not in t]
        if not clear or clear[0] != ref_top[0]:
            row["skipped"] = "ambiguous top-1 token text"
        else:
            row["compared_tokens"] = len(clear)
            row.update(compare_top(clear, served_top))
        rows.append(row)
    return judge(rows, tolerance)
