"""``concurrency``: N simultaneous streamed requests all succeed; time to first token and
tokens per second (p50/p95) are recorded. /metrics is read before and after the burst and
sampled while it runs, for the ``kv_cache`` check."""

from __future__ import annotations

import concurrent.futures
import threading
import time

from ..context import SMOKE_PROMPT, Burst, CheckResult, Context
from ..responses import fmt, kv_usage, percentile

NAME = "concurrency"


def run(ctx: Context) -> CheckResult:
    n = ctx.opts.concurrency
    body = {
        "model": ctx.model,
        "messages": [{"role": "user", "content": SMOKE_PROMPT}],
        "max_tokens": ctx.opts.burst_tokens,
        "temperature": 0,
        # A load test needs a fixed output length (vLLM's ignore_eos sampling parameter).
        "ignore_eos": True,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    before = ctx.metrics()
    peak: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.2):
            m = ctx.metrics()
            u = kv_usage(m) if m else None
            if u is not None:
                peak.append(u)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
        results = list(pool.map(lambda _i: ctx.stream_one(body), range(n)))
    wall = time.monotonic() - t0
    stop.set()
    sampler.join(5)
    ctx.burst = Burst(n, before, ctx.metrics(), peak)
    ok = [r for r in results if r["ok"]]
    short = [
        r
        for r in ok
        if r["completion_tokens"] < ctx.opts.burst_tokens and r["finish_reason"] != "length"
    ]
    failed = [r for r in results if not r["ok"]]
    ttft = [r["ttft_s"] for r in ok if r["ttft_s"] is not None]
    tps = [r["tokens_per_s"] for r in ok if r["tokens_per_s"] is not None]
    total_tokens = sum(r["completion_tokens"] for r in ok)
    ctx.performance = {
        "concurrency": n,
        "requests_ok": len(ok),
        "requests_failed": len(failed),
        "max_tokens": ctx.opts.burst_tokens,
        "ttft_s": {"p50": percentile(ttft, 50), "p95": percentile(ttft, 95)},
        "tokens_per_s": {"p50": percentile(tps, 50), "p95": percentile(tps, 95)},
        "aggregate_tokens_per_s": total_tokens / wall if wall > 0 else None,
        "wall_s": wall,
    }
    check = CheckResult(NAME, seconds=wall)
    check.ok = not failed
    check.detail = (
        f"{len(ok)}/{n} concurrent streamed requests succeeded; TTFT p50 "
        f"{fmt(percentile(ttft, 50))} s p95 {fmt(percentile(ttft, 95))} s; "
        f"{fmt(percentile(tps, 50))} tokens/s per request (p50)"
    )
    if failed:
        check.detail += "; errors: " + "; ".join(sorted({r["error"] for r in failed})[:3])
    if short:
        check.detail += f"; {len(short)} stopped early"
    return check
