"""Reading what a served endpoint answered: thinking blocks, logprobs, Prometheus metrics."""

from __future__ import annotations

import math
import re
from typing import Any

EXCERPT = 300
KV_USAGE_METRICS = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
PREEMPTION_METRIC = "vllm:num_preemptions_total"
_METRIC_RE = re.compile(
    r"^(?P<name>vllm:[A-Za-z_:]+)(?:\{[^}]*\})?\s+(?P<value>[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
    r"(?:[eE][-+]?\d+)?|NaN|[-+]?Inf)\s*(?:\d+)?$",
    re.M,
)


def excerpt(text: str | None, n: int = EXCERPT) -> str:
    text = text or ""
    return text if len(text) <= n else text[: n - 3] + "..."


def fmt(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def split_thinking(message: dict[str, Any]) -> tuple[str, str]:
    """(reasoning, answer) of a chat message: ``reasoning_content`` from vLLM's reasoning
    parser, or a ``<think>...</think>`` block at the start of ``content``. The answer is
    returned as served (whitespace kept, so a run of newlines can be reported as such)."""
    content = message.get("content") or ""
    reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    if "</think>" in content:
        before, _, after = content.partition("</think>")
        reasoning = (reasoning + before.replace("<think>", "", 1)).strip()
        content = after
    elif content.lstrip().startswith("<think>"):
        reasoning = (reasoning + content.lstrip()[len("<think>") :]).strip()
        content = ""
    return reasoning.strip(), content


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {name: value}; counters summed over labels, usage gauges maxed."""
    out: dict[str, float] = {}
    for m in _METRIC_RE.finditer(text):
        name = m.group("name")
        try:
            value = float(m.group("value"))
        except ValueError:
            continue
        if name in KV_USAGE_METRICS:
            out[name] = max(out.get(name, 0.0), value)
        else:
            out[name] = out.get(name, 0.0) + value
    return out


def kv_usage(metrics: dict[str, float]) -> float | None:
    for name in KV_USAGE_METRICS:
        if name in metrics:
            return metrics[name]
    return None


def logprob_values(choice: dict[str, Any]) -> list[Any]:
    """Every logprob of a choice (sampled tokens and their top alternatives)."""
    lp = choice.get("logprobs")
    if not isinstance(lp, dict):
        return []
    values: list[Any] = []
    for entry in lp.get("content") or []:
        if isinstance(entry, dict):
            values.append(entry.get("logprob"))
            values += [
                t.get("logprob") for t in entry.get("top_logprobs") or [] if isinstance(t, dict)
            ]
    return values
