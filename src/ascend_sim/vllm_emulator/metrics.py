"""Prometheus text exposition with vLLM's metric names.

Names and types follow vLLM's "Production Metrics" page
(https://docs.vllm.ai/en/stable/usage/metrics/ and the v0.5-v0.9 pages): gauges
``vllm:num_requests_running`` / ``vllm:num_requests_waiting`` / KV-cache usage (see
versions.kv_usage_metric_names), counters ``vllm:prompt_tokens_total``,
``vllm:generation_tokens_total``, ``vllm:request_success_total{finished_reason}``,
``vllm:num_preemptions_total``, histograms ``vllm:time_to_first_token_seconds``,
``vllm:e2e_request_latency_seconds``, ``vllm:request_prompt_tokens``,
``vllm:request_generation_tokens``, and the ``vllm:cache_config_info`` info gauge.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field

# Bucket bounds used by vLLM for these histograms (vllm/v1/metrics/loggers.py).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
               60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000)


@dataclass
class Histogram:
    bounds: tuple
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * len(self.bounds)

    def observe(self, value: float) -> None:
        i = bisect.bisect_left(self.bounds, value)
        if i < len(self.counts):
            self.counts[i] += 1
        self.total += value
        self.n += 1


def _fmt(value: float) -> str:
    return repr(float(value))


def escape_label_value(value: str) -> str:
    """A label value as the text format writes it: backslash, double quote and newline escaped.

    https://prometheus.io/docs/instrumenting/exposition_formats/#text-format-details
    """
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Metrics:
    """Counters the scheduler and server update; ``render()`` gives the /metrics body."""

    def __init__(self, model_name: str, kv_names: list[str], cache_info: dict[str, str]):
        self.model_name = model_name
        self.kv_names = kv_names
        self.cache_info = cache_info
        self.lock = threading.Lock()
        self.running = 0
        self.waiting = 0
        self.kv_usage = 0.0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.preemptions = 0
        self.success: dict[str, int] = {"stop": 0, "length": 0, "abort": 0}
        self.ttft = Histogram(TTFT_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)
        self.req_prompt = Histogram(TOKEN_BUCKETS)
        self.req_gen = Histogram(TOKEN_BUCKETS)

    def finished(self, reason: str, prompt: int, generated: int, e2e_s: float) -> None:
        with self.lock:
            self.success[reason] = self.success.get(reason, 0) + 1
            self.e2e.observe(e2e_s)
            self.req_prompt.observe(prompt)
            self.req_gen.observe(generated)

    def render(self) -> str:
        lab = f'model_name="{escape_label_value(self.model_name)}"'
        out: list[str] = []

        def metric(name: str, kind: str, help_text: str, lines: list[str]) -> None:
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")
            out.extend(lines)

        def hist(name: str, help_text: str, h: Histogram) -> None:
            lines = []
            cum = 0
            for bound, c in zip(h.bounds, h.counts, strict=True):
                cum += c
                lines.append(f'{name}_bucket{{le="{_fmt(bound)}",{lab}}} {_fmt(cum)}')
            lines.append(f'{name}_bucket{{le="+Inf",{lab}}} {_fmt(h.n)}')
            lines.append(f"{name}_count{{{lab}}} {_fmt(h.n)}")
            lines.append(f"{name}_sum{{{lab}}} {_fmt(h.total)}")
            metric(name, "histogram", help_text, lines)

        with self.lock:
            info = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in self.cache_info.items())
            metric(
                "vllm:cache_config_info",
                "gauge",
                "Information of the LLMEngine CacheConfig",
                [f"vllm:cache_config_info{{{info}}} 1.0"],
            )
            metric(
                "vllm:num_requests_running",
                "gauge",
                "Number of requests in model execution batches.",
                [f"vllm:num_requests_running{{{lab}}} {_fmt(self.running)}"],
            )
            metric(
                "vllm:num_requests_waiting",
                "gauge",
                "Number of requests waiting to be processed.",
                [f"vllm:num_requests_waiting{{{lab}}} {_fmt(self.waiting)}"],
            )
            for name in self.kv_names:
                metric(
                    name,
                    "gauge",
                    "KV-cache usage. 1 means 100 percent usage.",
                    [f"{name}{{{lab}}} {_fmt(self.kv_usage)}"],
                )
            metric(
                "vllm:num_preemptions_total",
                "counter",
                "Cumulative number of preemption from the engine.",
                [f"vllm:num_preemptions_total{{{lab}}} {_fmt(self.preemptions)}"],
            )
            metric(
                "vllm:prompt_tokens_total",
                "counter",
                "Number of prefill tokens processed.",
                [f"vllm:prompt_tokens_total{{{lab}}} {_fmt(self.prompt_tokens)}"],
            )
            metric(
                "vllm:generation_tokens_total",
                "counter",
                "Number of generation tokens processed.",
                [f"vllm:generation_tokens_total{{{lab}}} {_fmt(self.generation_tokens)}"],
            )
            metric(
                "vllm:request_success_total",
                "counter",
                "Count of successfully processed requests.",
                [
                    f'vllm:request_success_total{{finished_reason="{r}",{lab}}} {_fmt(c)}'
                    for r, c in sorted(self.success.items())
                ],
            )
            hist(
                "vllm:time_to_first_token_seconds",
                "Histogram of time to first token in seconds.",
                self.ttft,
            )
            hist(
                "vllm:e2e_request_latency_seconds",
                "Histogram of e2e request latency in seconds.",
                self.e2e,
            )
            hist(
                "vllm:request_prompt_tokens",
                "Number of prefill tokens processed.",
                self.req_prompt,
            )
            hist(
                "vllm:request_generation_tokens",
                "Number of generation tokens processed.",
                self.req_gen,
            )
        return "\n".join(out) + "\n"
