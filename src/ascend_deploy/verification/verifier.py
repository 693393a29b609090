"""Prove a running vLLM(-Ascend) deployment answers correctly before it takes traffic.

Checks, in order (each one a named entry of the report):

1. ``readiness``: ``/health`` answers 200, then ``/v1/models`` lists the model; retried with
   exponential backoff until the timeout (a slow start is normal, minutes for big models).
2. ``first_request``: one real request, since a ready service can still die on its first
   one (graph capture of a new shape, a kernel fault: the log then explains it).
3. ``smoke``: "What is the capital of France?" at temperature 0 must mention Paris.
4. ``suite``: every case of the suite (keywords on the answer with the Qwen3 thinking block
   removed; thinking present when asked), each answer checked for garbage (pitfall 7).
5. ``streaming``: the smoke question as SSE; chunks end with ``data: [DONE]``.
6. ``concurrency``: N simultaneous streamed requests all succeed; time to first token and
   tokens per second (p50/p95) are recorded.
7. ``kv_cache``: KV-cache usage and preemptions from ``/metrics`` during that burst; a burst
   at the planned concurrency that preempts means the KV cache is too small (pitfall 6).
8. ``max_length``: a request that fills the planned ``max_model_len`` is served.
9. ``precision`` (optional): served top-5 logprobs and their KL divergence against a CPU
   reference, within tolerances derived from BF16 rounding (``verify_precision``).

Standard library only; runs on the controller or on the host.
"""

from __future__ import annotations

import concurrent.futures
import datetime as _dt
import math
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from . import garbage
from .http_client import (
    BadResponse,
    Client,
    Disconnected,
    HttpStatus,
    RequestFailed,
    Timeout,
    Unreachable,
)
from .suite import Case, load_suite, suite_from_doc

# Errors after which no further request is sent: the service is gone or stalled (each
# request would only wait out its own deadline again).
GONE = ("Disconnected", "Unreachable", "Timeout")
SMOKE_PROMPT = "What is the capital of France?"
SMOKE_EXPECT = "Paris"
EXCERPT = 300
# Filler of the long prompts: the sentence the tiny model was trained with.
FILLER = "This sentence is filler text that makes the prompt longer. "
KV_USAGE_METRICS = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
PREEMPTION_METRIC = "vllm:num_preemptions_total"
_METRIC_RE = re.compile(
    r"^(?P<name>vllm:[A-Za-z_:]+)(?:\{[^}]*\})?\s+(?P<value>[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
    r"(?:[eE][-+]?\d+)?|NaN|[-+]?Inf)\s*(?:\d+)?$",
    re.M,
)


@dataclass
class Options:
    url: str
    api_key: str | None = None
    model: str | None = None
    suite: str | None = None
    suite_doc: Any = None  # an already parsed suite (the Ansible module gets the content)
    concurrency: int = 4
    ready_timeout: float = 600.0
    request_timeout: float = 300.0
    burst_tokens: int = 128
    max_len_probe: bool = True
    expect_max_model_len: int | None = None
    reference_model: str | None = None
    precision_tolerance: float | None = None  # None: derived from BF16 (verify_precision)


@dataclass
class Check:
    name: str
    ok: bool | None = None  # None = skipped
    detail: str = ""
    seconds: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        status = "skipped" if self.ok is None else ("pass" if self.ok else "fail")
        out = {
            "name": self.name,
            "status": status,
            "ok": self.ok,
            "detail": self.detail,
            "seconds": round(self.seconds, 3),
        }
        out.update(self.data)
        return out


def excerpt(text: str | None, n: int = EXCERPT) -> str:
    text = text or ""
    return text if len(text) <= n else text[: n - 3] + "..."


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


def _logprob_values(choice: dict[str, Any]) -> list[Any]:
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


class Verifier:
    """Runs the checks against one endpoint and builds the report."""

    def __init__(self, opts: Options):
        self.opts = opts
        self.client = Client(opts.url, opts.api_key, timeout=opts.request_timeout)
        self.model: str | None = opts.model
        self.server: dict[str, Any] = {"url": self.client.base}
        self.checks: list[Check] = []
        self.cases: list[dict[str, Any]] = []
        self.performance: dict[str, Any] = {}
        self.failures: list[str] = []
        if opts.suite_doc is not None:
            self.suite_name, self.suite = suite_from_doc(opts.suite_doc, opts.suite or "suite")
        else:
            self.suite_name, self.suite = load_suite(opts.suite)

    # -- helpers ------------------------------------------------------------------------------
    def _add(self, check: Check) -> Check:
        self.checks.append(check)
        if check.ok is False:
            self.failures.append(f"{check.name}: {check.detail}")
        return check

    def chat_body(self, case: Case, logprobs: bool = True) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": case.messages,
            "max_tokens": case.max_tokens,
            "temperature": case.temperature,
        }
        if case.chat_template_kwargs:
            body["chat_template_kwargs"] = case.chat_template_kwargs
        if logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = 1
        return body

    def _alive(self) -> str:
        try:
            status, _ = self.client.get("/health", timeout=5)
            return f"/health still answers {status}"
        except RequestFailed as exc:
            return f"/health no longer answers ({exc})"

    # -- 1. readiness -------------------------------------------------------------------------
    def readiness(self) -> Check:
        check = Check("readiness")
        t0 = time.monotonic()
        deadline = t0 + self.opts.ready_timeout
        delay = 0.5
        attempts = 0
        last = "no attempt"
        while True:
            attempts += 1
            left = deadline - time.monotonic()
            try:
                status, _ = self.client.get("/health", timeout=max(1.0, min(10.0, left)))
                if status != 200:
                    raise HttpStatus(status, "not healthy", "/health")
                models = self.client.get_json("/v1/models", timeout=max(1.0, min(10.0, left)))
                if not isinstance(models, dict) or not isinstance(models.get("data"), list):
                    raise BadResponse("/v1/models is not an OpenAI model list")
                names = [m.get("id") for m in models["data"] if isinstance(m, dict)]
                if not names:
                    raise BadResponse("/v1/models lists no model")
                if self.model is None:
                    self.model = names[0]
                if self.model not in names:
                    check.ok = False
                    check.detail = (
                        f"the service serves {names}, not the expected model {self.model!r}; "
                        "fix --model / vllm_service_served_model_name"
                    )
                    break
                entry = next(
                    m for m in models["data"] if isinstance(m, dict) and m.get("id") == self.model
                )
                self.server.update(
                    models=names,
                    max_model_len=entry.get("max_model_len"),
                    root=entry.get("root"),
                )
                check.ok = True
                check.detail = f"healthy and serving {self.model!r} after {attempts} attempt(s)"
                break
            except HttpStatus as exc:
                if exc.status in (401, 403):
                    check.ok = False
                    check.detail = (
                        f"HTTP {exc.status} from {exc.path} ({exc.message}): the API key is "
                        "missing or wrong; pass the service's key in VLLM_API_KEY or "
                        "--api-key-file (bundle: vllm_service_api_key)"
                    )
                    break
                last = str(exc)
            except RequestFailed as exc:
                last = str(exc)
            if time.monotonic() + delay > deadline:
                check.ok = False
                check.detail = (
                    f"not ready after {self.opts.ready_timeout:.0f} s ({attempts} attempts); "
                    f"last: {last}"
                )
                break
            time.sleep(delay)
            delay = min(delay * 2, 10.0)
        check.seconds = time.monotonic() - t0
        check.data["attempts"] = attempts
        if check.ok:
            try:
                version = self.client.get_json("/version", timeout=10)
                self.server["version"] = (
                    version.get("version") if isinstance(version, dict) else None
                )
            except RequestFailed:
                self.server["version"] = None
        return self._add(check)

    # -- 2./3. first request and smoke --------------------------------------------------------
    def ask(self, case: Case) -> dict[str, Any]:
        """Run one case (non-streamed); the case record of the report."""
        rec: dict[str, Any] = {
            "id": case.id,
            "kind": case.kind,
            "prompt": excerpt(case.prompt, 200),
            "prompt_chars": len(case.prompt),
            "enable_thinking": case.chat_template_kwargs.get("enable_thinking"),
        }
        t0 = time.monotonic()
        try:
            doc = self.client.post_json("/v1/chat/completions", self.chat_body(case))
        except RequestFailed as exc:
            rec.update(ok=False, why=[str(exc)], seconds=round(time.monotonic() - t0, 3))
            rec["error_type"] = type(exc).__name__
            return rec
        rec["seconds"] = round(time.monotonic() - t0, 3)
        why: list[str] = []
        try:
            choice = doc["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            rec.update(ok=False, why=[f"malformed response: {excerpt(str(doc), 200)}"])
            return rec
        reasoning, answer = split_thinking(message)
        usage = doc.get("usage") or {}
        rec.update(
            answer=excerpt(answer.strip()),
            reasoning=excerpt(reasoning, 200) if reasoning else None,
            finish_reason=choice.get("finish_reason"),
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
        )
        junk = garbage.detect(answer, reasoning) + garbage.bad_logprobs(_logprob_values(choice))
        if junk:
            why += [f"garbage: {j}" for j in junk]
            rec["garbage"] = junk
        why += [f"answer {w}" for w in case.check(answer.strip())]
        if case.expect_reasoning and not reasoning:
            why.append("no thinking block although thinking mode was on")
        rec["ok"] = not why
        rec["why"] = why
        return rec

    def first_request_and_smoke(self) -> bool:
        smoke = Case(
            id="smoke",
            messages=[{"role": "user", "content": SMOKE_PROMPT}],
            max_tokens=64,
            chat_template_kwargs={"enable_thinking": False},
            expect_any=[SMOKE_EXPECT],
            kind="smoke",
        )
        rec = self.ask(smoke)
        first = Check("first_request", seconds=rec.get("seconds", 0.0))
        if rec.get("error_type") in ("Disconnected", "Unreachable", "Timeout", "BadResponse"):
            first.ok = False
            first.detail = (
                f"the service was ready but failed its first request: {rec['why'][0]}; "
                f"{self._alive()}. Read the container log (ascend-deploy diagnose)"
            )
            self._add(first)
            return False
        if rec.get("error_type") == "HttpStatus":
            first.ok = False
            first.detail = f"the first request was refused: {rec['why'][0]}"
            self._add(first)
            return False
        first.ok = True
        first.detail = f"answered in {rec['seconds']:.2f} s"
        self._add(first)
        check = Check("smoke", seconds=rec.get("seconds", 0.0))
        check.ok = rec["ok"]
        check.detail = (
            f"{SMOKE_PROMPT!r} -> {excerpt(rec.get('answer'), 120)!r}"
            if rec["ok"]
            else f"{SMOKE_PROMPT!r} -> {excerpt(rec.get('answer'), 120)!r}: {'; '.join(rec['why'])}"
        )
        check.data["case"] = rec
        self._add(check)
        return True

    # -- 4. suite -----------------------------------------------------------------------------
    def run_suite(self) -> None:
        t0 = time.monotonic()
        for case in self.suite:
            rec = self.ask(case)
            self.cases.append(rec)
            if rec.get("error_type") in GONE:
                break  # the service is gone or stalled; the remaining cases would repeat that
        failed = [c for c in self.cases if not c["ok"]]
        check = Check("suite", seconds=time.monotonic() - t0)
        check.ok = not failed and len(self.cases) == len(self.suite)
        check.detail = f"{len(self.cases) - len(failed)}/{len(self.suite)} cases passed"
        if failed:
            check.detail += "; failed: " + "; ".join(
                f"{c['id']} ({'; '.join(c['why'])[:200]})" for c in failed[:5]
            )
        if len(self.cases) < len(self.suite):
            check.detail += "; the service stopped answering (in time); the rest was not run"
        check.data["suite"] = self.suite_name
        self._add(check)

    # -- 5./6. streaming and concurrency ------------------------------------------------------
    def stream_one(self, body: dict[str, Any]) -> dict[str, Any]:
        t0 = time.monotonic()
        first = None
        text, reasoning = [], []
        chunks = 0
        usage: dict[str, Any] = {}
        finish = None
        try:
            for ts, event in self.client.stream(
                "/v1/chat/completions", dict(body, stream_options={"include_usage": True})
            ):
                if event == "[DONE]":
                    break
                if not isinstance(event, dict):
                    raise BadResponse(f"SSE event is not a JSON object: {excerpt(str(event), 80)}")
                chunks += 1
                if event.get("usage"):
                    usage = event["usage"]
                for choice in event.get("choices") or []:
                    delta = choice.get("delta") or {}
                    piece = delta.get("content") or ""
                    rpiece = delta.get("reasoning_content") or delta.get("reasoning") or ""
                    if (piece or rpiece) and first is None:
                        first = ts
                    text.append(piece)
                    reasoning.append(rpiece)
                    finish = choice.get("finish_reason") or finish
        except RequestFailed as exc:
            return {"ok": False, "error": str(exc), "error_type": type(exc).__name__}
        except (AttributeError, TypeError) as exc:
            error = f"malformed stream event ({exc})"
            return {"ok": False, "error": error, "error_type": "BadResponse"}
        end = time.monotonic()
        r, answer = split_thinking(
            {"content": "".join(text), "reasoning_content": "".join(reasoning)}
        )
        tokens = usage.get("completion_tokens") or chunks
        decode_s = end - first if first is not None else None
        return {
            "ok": True,
            "answer": answer.strip(),
            "raw_answer": answer,
            "reasoning": r,
            "chunks": chunks,
            "finish_reason": finish,
            "completion_tokens": tokens,
            "ttft_s": (first - t0) if first is not None else None,
            "seconds": end - t0,
            "tokens_per_s": (tokens - 1) / decode_s if decode_s and tokens > 1 else None,
        }

    def streaming(self) -> None:
        case = Case(
            id="stream",
            messages=[{"role": "user", "content": SMOKE_PROMPT}],
            max_tokens=64,
            chat_template_kwargs={"enable_thinking": False},
            expect_any=[SMOKE_EXPECT],
        )
        res = self.stream_one(self.chat_body(case, logprobs=False))
        check = Check("streaming", seconds=res.get("seconds", 0.0))
        if not res["ok"]:
            check.ok = False
            check.detail = res["error"]
        else:
            why = case.check(res["answer"]) + garbage.detect(res["raw_answer"], res["reasoning"])
            check.ok = not why
            check.detail = (
                f"{res['chunks']} chunks ending with [DONE], first token after "
                f"{res['ttft_s'] or 0:.3f} s"
                + (
                    ""
                    if check.ok
                    else f"; answer {excerpt(res['answer'], 120)!r}: {'; '.join(why)}"
                )
            )
            check.data["ttft_s"] = res["ttft_s"]
        self._add(check)

    def metrics(self) -> dict[str, float] | None:
        try:
            status, body = self.client.get("/metrics", timeout=10)
        except RequestFailed:
            return None
        if status != 200:
            return None
        return parse_metrics(body.decode("utf-8", errors="replace"))

    def concurrency(self) -> None:
        n = self.opts.concurrency
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": SMOKE_PROMPT}],
            "max_tokens": self.opts.burst_tokens,
            "temperature": 0,
            # A load test needs a fixed output length (vLLM's ignore_eos sampling parameter).
            "ignore_eos": True,
            "chat_template_kwargs": {"enable_thinking": False},
        }
        before = self.metrics()
        peak: list[float] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.2):
                m = self.metrics()
                u = kv_usage(m) if m else None
                if u is not None:
                    peak.append(u)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
            results = list(pool.map(lambda _i: self.stream_one(body), range(n)))
        wall = time.monotonic() - t0
        stop.set()
        sampler.join(5)
        after = self.metrics()
        ok = [r for r in results if r["ok"]]
        short = [
            r
            for r in ok
            if r["completion_tokens"] < self.opts.burst_tokens and r["finish_reason"] != "length"
        ]
        failed = [r for r in results if not r["ok"]]
        ttft = [r["ttft_s"] for r in ok if r["ttft_s"] is not None]
        tps = [r["tokens_per_s"] for r in ok if r["tokens_per_s"] is not None]
        total_tokens = sum(r["completion_tokens"] for r in ok)
        self.performance = {
            "concurrency": n,
            "requests_ok": len(ok),
            "requests_failed": len(failed),
            "max_tokens": self.opts.burst_tokens,
            "ttft_s": {"p50": percentile(ttft, 50), "p95": percentile(ttft, 95)},
            "tokens_per_s": {"p50": percentile(tps, 50), "p95": percentile(tps, 95)},
            "aggregate_tokens_per_s": total_tokens / wall if wall > 0 else None,
            "wall_s": wall,
        }
        check = Check("concurrency", seconds=wall)
        check.ok = not failed
        check.detail = (
            f"{len(ok)}/{n} concurrent streamed requests succeeded; TTFT p50 "
            f"{_fmt(percentile(ttft, 50))} s p95 {_fmt(percentile(ttft, 95))} s; "
            f"{_fmt(percentile(tps, 50))} tokens/s per request (p50)"
        )
        if failed:
            check.detail += "; errors: " + "; ".join(sorted({r["error"] for r in failed})[:3])
        if short:
            check.detail += f"; {len(short)} stopped early"
        self._add(check)

        kv = Check("kv_cache")
        if before is None or after is None:
            kv.detail = "/metrics not available: KV-cache usage not checked"
            self._add(kv)
            return
        usage_now = kv_usage(after)
        peak_usage = max(peak + ([usage_now] if usage_now is not None else []), default=None)
        preempted = after.get(PREEMPTION_METRIC, 0.0) - before.get(PREEMPTION_METRIC, 0.0)
        self.performance["kv_cache_usage_peak"] = peak_usage
        self.performance["preemptions"] = preempted
        kv.ok = preempted <= 0
        kv.data.update(kv_cache_usage_peak=peak_usage, preemptions=preempted)
        peak_txt = "unknown" if peak_usage is None else f"{peak_usage:.0%}"
        if kv.ok:
            kv.detail = f"peak KV-cache usage {peak_txt} at {n} concurrent requests, no preemption"
        else:
            kv.detail = (
                f"KV cache exhausted at {n} concurrent requests of "
                f"{self.opts.burst_tokens} tokens: "
                f"{preempted:.0f} preemption(s), peak usage {peak_txt} (pitfall 6). Fix: lower "
                "vllm_service_max_num_seqs or vllm_service_max_model_len, or give the cache more "
                "memory (vllm_service_gpu_memory_utilization, more NPUs)"
            )
        self._add(kv)

    # -- 8. maximum length --------------------------------------------------------------------
    def _prompt_tokens(self, repeat: int) -> int:
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": FILLER * repeat + "\n\nReply with OK."}],
            "max_tokens": 1,
            "temperature": 0,
            "chat_template_kwargs": {"enable_thinking": False},
        }
        doc = self.client.post_json("/v1/chat/completions", body)
        return int(doc["usage"]["prompt_tokens"])

    def max_length(self) -> None:
        check = Check("max_length")
        served = self.server.get("max_model_len")
        planned = self.opts.expect_max_model_len
        if planned and served and int(served) != planned:
            check.ok = False
            check.detail = (
                f"the service runs with max_model_len {served}, the plan says {planned}: it was "
                "started with other arguments than planned"
            )
            self._add(check)
            return
        limit = int(served or planned or 0)
        if not self.opts.max_len_probe or limit <= 0:
            check.detail = "skipped (" + ("disabled" if limit else "max_model_len unknown") + ")"
            self._add(check)
            return
        t0 = time.monotonic()
        out_tokens = 8
        try:
            p1, p5 = self._prompt_tokens(1), self._prompt_tokens(5)
            per = max((p5 - p1) / 4, 1e-6)
            base = p1 - per
            repeat = max(1, int((limit - out_tokens - base) // per))
            used = None
            for _ in range(4):
                body = {
                    "model": self.model,
                    "messages": [
                        {"role": "user", "content": FILLER * repeat + "\n\nReply with OK."}
                    ],
                    "max_tokens": out_tokens,
                    "temperature": 0,
                    "chat_template_kwargs": {"enable_thinking": False},
                }
                try:
                    doc = self.client.post_json("/v1/chat/completions", body)
                except HttpStatus as exc:
                    if exc.status == 400 and "context length" in exc.message:
                        repeat -= max(1, math.ceil(2 / per))
                        continue
                    raise
                used = doc["usage"]
                break
            if used is None:
                raise BadResponse("could not size a prompt that fits max_model_len")
            total = used["prompt_tokens"] + used.get("completion_tokens", 0)
            check.ok = True
            check.detail = (
                f"a {used['prompt_tokens']}-token prompt (+{out_tokens} output) fits the "
                f"max_model_len of {limit} and was served"
            )
            check.data.update(prompt_tokens=used["prompt_tokens"], max_model_len=limit, total=total)
        except (Disconnected, Unreachable, Timeout) as exc:
            check.ok = False
            check.detail = (
                f"a request at the maximum length ({limit} tokens) failed: {exc}; {self._alive()}"
            )
        except (RequestFailed, KeyError, TypeError, ValueError) as exc:
            check.ok = False
            check.detail = f"a request at the maximum length ({limit} tokens) failed: {exc}"
        check.seconds = time.monotonic() - t0
        self._add(check)

    # -- 9. precision -------------------------------------------------------------------------
    def precision(self) -> None:
        if not self.opts.reference_model:
            return
        from .precision import compare_logprobs

        t0 = time.monotonic()
        check = Check("precision")
        try:
            res = compare_logprobs(
                self.client, self.model, self.opts.reference_model, self.opts.precision_tolerance
            )
        except ImportError as exc:
            check.detail = f"skipped: the CPU reference needs torch and transformers ({exc})"
            self._add(check)
            return
        except RequestFailed as exc:
            check.ok = False
            check.detail = f"precision requests failed: {exc}"
            self._add(check)
            return
        check.seconds = time.monotonic() - t0
        check.ok = res["ok"]
        check.detail = (
            f"top-5 logprobs over {res['prompts']} prompts: largest difference "
            f"{res['max_abs_diff']:.4f} (tolerance {res['lp_tolerance']:.4f}), largest KL "
            f"{res['max_kl']:.2e} (tolerance {res['kl_tolerance']:.2e}); top-1 agrees on "
            f"{res['top1_agree']}/{res['prompts']}"
            + (f"; outside on: {'; '.join(res['failed_prompts'])}" if res["failed_prompts"] else "")
        )
        check.data["precision"] = res
        self._add(check)

    # -- all ----------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        started = _dt.datetime.now(_dt.timezone.utc)
        t0 = time.monotonic()
        steps = ("first_request", "suite", "streaming", "concurrency", "max_length")
        if self.readiness().ok and self.first_request_and_smoke():
            self.run_suite()
            if self.cases and self.cases[-1].get("error_type") in GONE:
                pass  # nothing more can pass
            else:
                self.streaming()
                self.concurrency()
                self.max_length()
                self.precision()
        done = {c.name for c in self.checks}
        for name in steps:
            if name not in done and not (name == "first_request" and "readiness" not in done):
                self.checks.append(Check(name, None, "not run: an earlier check failed"))
        ok = (
            bool(self.checks)
            and all(c.ok is not False for c in self.checks)
            and any(c.name == "smoke" and c.ok for c in self.checks)
        )
        return {
            "ok": ok,
            "url": self.client.base,
            "model": self.model,
            "suite": self.suite_name,
            "started": started.isoformat(timespec="seconds"),
            "seconds": round(time.monotonic() - t0, 3),
            "server": self.server,
            "checks": [c.as_dict() for c in self.checks],
            "cases": self.cases,
            "performance": self.performance,
            "failures": self.failures,
        }


def _fmt(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def run_verify(opts: Options) -> dict[str, Any]:
    return Verifier(opts).run()


def render_markdown(report: dict[str, Any]) -> str:
    """The Markdown summary written next to the JSON report."""
    verdict = "PASS" if report["ok"] else "FAIL"
    srv = report.get("server") or {}
    lines = [
        f"# Verification {verdict}: {report.get('model') or '?'} at {report['url']}",
        "",
        f"- Started {report['started']}, took {report['seconds']:.1f} s; suite `{report['suite']}`",
        f"- Server: vLLM {srv.get('version') or '?'}, "
        f"max_model_len {srv.get('max_model_len') or '?'}",
        "",
        "| Check | Result | Detail |",
        "|---|---|---|",
    ]
    for c in report["checks"]:
        detail = str(c["detail"]).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {c['name']} | {c['status']} | {detail} |")
    if report["cases"]:
        lines += ["", "## Cases", "", "| Case | Result | Answer | Why |", "|---|---|---|---|"]
        for c in report["cases"]:
            ans = excerpt(c.get("answer") or "", 80).replace("|", "\\|").replace("\n", " ")
            why = "; ".join(c.get("why") or []).replace("|", "\\|")
            lines.append(f"| {c['id']} | {'pass' if c['ok'] else 'fail'} | {ans} | {why} |")
    perf = report.get("performance") or {}
    if perf:
        lines += [
            "",
            "## Performance",
            "",
            f"- {perf['concurrency']} concurrent requests x {perf['max_tokens']} tokens: "
            f"{perf['requests_ok']} ok, {perf['requests_failed']} failed",
            f"- Time to first token: p50 {_fmt(perf['ttft_s']['p50'])} s, "
            f"p95 {_fmt(perf['ttft_s']['p95'])} s",
            f"- Tokens per second per request: p50 {_fmt(perf['tokens_per_s']['p50'], 1)}, "
            f"p95 {_fmt(perf['tokens_per_s']['p95'], 1)}; aggregate "
            f"{_fmt(perf.get('aggregate_tokens_per_s'), 1)}",
        ]
        if "kv_cache_usage_peak" in perf:
            peak = perf["kv_cache_usage_peak"]
            lines.append(
                f"- KV cache: peak usage {'-' if peak is None else f'{peak:.0%}'}, "
                f"preemptions {perf['preemptions']:.0f}"
            )
    if report["failures"]:
        lines += ["", "## Failures", ""] + [f"- {f}" for f in report["failures"]]
    return "\n".join(lines) + "\n"


def render_human(report: dict[str, Any]) -> str:
    out = [
        f"verify {report['url']} ({report.get('model') or '?'}): "
        + ("PASS" if report["ok"] else "FAIL")
    ]
    for c in report["checks"]:
        mark = {"pass": "ok  ", "fail": "FAIL", "skipped": "skip"}[c["status"]]
        out.append(f"  {mark} {c['name']:<14} {c['detail']}")
    for c in report["cases"]:
        if not c["ok"]:
            out.append(f"       case {c['id']}: {'; '.join(c['why'])}")
    return "\n".join(out)
