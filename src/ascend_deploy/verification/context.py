"""What the checks share: the options, one result type and the run's context (the client,
the served model, the cases and performance so far) with the request helpers they use."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import garbage
from .http_client import BadResponse, Client, RequestFailed
from .responses import excerpt, logprob_values, parse_metrics, split_thinking
from .suite import Case, load_suite, suite_from_doc

# Errors after which no further request is sent: the service is gone or stalled (each
# request would only wait out its own deadline again).
GONE = ("Disconnected", "Unreachable", "Timeout")
SMOKE_PROMPT = "What is the capital of France?"
SMOKE_EXPECT = "Paris"


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
    # Called with one line while a check waits (readiness: what it waits for, every few
    # seconds, with the bound); the CLI prints it on stderr. None: silent (the Ansible module).
    progress: Callable[[str], None] | None = None
    progress_every_s: float = 5.0


@dataclass
class CheckResult:
    """One named entry of the report."""

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


@dataclass
class Burst:
    """The concurrency burst as the KV-cache check reads it: /metrics before, after and the
    usage samples taken while it ran."""

    concurrency: int
    before: dict[str, float] | None
    after: dict[str, float] | None
    peak: list[float]


def smoke_case(case_id: str = "smoke", kind: str = "smoke") -> Case:
    return Case(
        id=case_id,
        messages=[{"role": "user", "content": SMOKE_PROMPT}],
        max_tokens=64,
        chat_template_kwargs={"enable_thinking": False},
        expect_any=[SMOKE_EXPECT],
        kind=kind,
    )


class Context:
    """State shared by the checks of one run against one endpoint."""

    def __init__(self, opts: Options):
        self.opts = opts
        self.client = Client(opts.url, opts.api_key, timeout=opts.request_timeout)
        self.model: str | None = opts.model
        self.server: dict[str, Any] = {"url": self.client.base}
        self.cases: list[dict[str, Any]] = []
        self.performance: dict[str, Any] = {}
        self.smoke_reply: dict[str, Any] | None = None  # the first request's case record
        self.burst: Burst | None = None
        self.stop = False  # set by a check after which no further check can pass
        if opts.suite_doc is not None:
            self.suite_name, self.suite = suite_from_doc(opts.suite_doc, opts.suite or "suite")
        else:
            self.suite_name, self.suite = load_suite(opts.suite)

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

    def alive(self) -> str:
        try:
            status, _ = self.client.get("/health", timeout=5)
            return f"/health still answers {status}"
        except RequestFailed as exc:
            return f"/health no longer answers ({exc})"

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
        junk = garbage.detect(answer, reasoning) + garbage.bad_logprobs(logprob_values(choice))
        if junk:
            why += [f"garbage: {j}" for j in junk]
            rec["garbage"] = junk
        why += [f"answer {w}" for w in case.check(answer.strip())]
        if case.expect_reasoning and not reasoning:
            why.append("no thinking block although thinking mode was on")
        rec["ok"] = not why
        rec["why"] = why
        return rec

    def stream_one(self, body: dict[str, Any]) -> dict[str, Any]:
        """One streamed request: answer, chunks, time to first token and tokens per second."""
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

    def metrics(self) -> dict[str, float] | None:
        """The parsed /metrics, None when the service does not expose them."""
        try:
            status, body = self.client.get("/metrics", timeout=10)
        except RequestFailed:
            return None
        if status != 200:
            return None
        return parse_metrics(body.decode("utf-8", errors="replace"))


class CheckUnit(Protocol):
    """A module under ``checks/``: the check's name and the function that runs it."""

    NAME: str

    def run(self, ctx: Context) -> CheckResult | None: ...
