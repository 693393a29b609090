"""``kv_cache``: KV-cache usage and preemptions from ``/metrics`` during the concurrency
burst; a burst at the planned concurrency that preempts means the KV cache is too small
(pitfall 6)."""

from __future__ import annotations

from ..context import CheckResult, Context
from ..responses import PREEMPTION_METRIC, kv_usage

NAME = "kv_cache"


def run(ctx: Context) -> CheckResult | None:
    burst = ctx.burst
    if burst is None:
        return None  # no burst ran (the concurrency check was not selected)
    kv = CheckResult(NAME)
    if burst.before is None or burst.after is None:
        kv.detail = "/metrics not available: KV-cache usage not checked"
        return kv
    usage_now = kv_usage(burst.after)
    peak_usage = max(burst.peak + ([usage_now] if usage_now is not None else []), default=None)
    preempted = burst.after.get(PREEMPTION_METRIC, 0.0) - burst.before.get(PREEMPTION_METRIC, 0.0)
    ctx.performance["kv_cache_usage_peak"] = peak_usage
    ctx.performance["preemptions"] = preempted
    kv.ok = preempted <= 0
    kv.data.update(kv_cache_usage_peak=peak_usage, preemptions=preempted)
    peak_txt = "unknown" if peak_usage is None else f"{peak_usage:.0%}"
    n = burst.concurrency
    if kv.ok:
        kv.detail = f"peak KV-cache usage {peak_txt} at {n} concurrent requests, no preemption"
    else:
        kv.detail = (
            f"KV cache exhausted at {n} concurrent requests of "
            f"{ctx.opts.burst_tokens} tokens: "
            f"{preempted:.0f} preemption(s), peak usage {peak_txt} (pitfall 6). Fix: lower "
            "vllm_service_max_num_seqs or vllm_service_max_model_len, or give the cache more "
            "memory (vllm_service_gpu_memory_utilization, more NPUs)"
        )
    return kv
