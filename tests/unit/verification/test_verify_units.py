"""Each check of `verify` on its own (verification/checks/<check>.py), against the emulated
vLLM-Ascend OpenAI server serving the trained tiny Qwen3 (real processes, HTTP on 127.0.0.1)."""

from __future__ import annotations

import json
import socket

import pytest

from ascend_deploy.verification.checks import (
    DEFAULT_CHECKS,
    concurrency,
    first_request,
    kv_cache,
    max_length,
    precision,
    readiness,
    smoke,
    streaming,
    suite,
)
from ascend_deploy.verification.context import Context, Options
from ascend_deploy.verification.verifier import Verifier
from ascend_sim.vllm_emulator.sandbox import Emulator, emulator_env, make_root, write_row

NAME = "qwen3-tiny"
MAX_LEN = 2048


@pytest.fixture(scope="module")
def emu(tmp_path_factory, tiny_bf16):
    tmp = tmp_path_factory.mktemp("served")
    env = emulator_env(make_root(str(tmp / "root")), write_row(str(tmp / "row.json"), "v0.23.0"))
    args = [tiny_bf16, "--host", "127.0.0.1", "--port", "0", "--served-model-name", NAME,
            "--enforce-eager", "--max-model-len", str(MAX_LEN)]  # fmt: skip
    with Emulator(args, env).start() as e:
        assert e.ready, e.output()
        yield e


def context(url: str, **kw) -> Context:
    base = {"url": url, "ready_timeout": 20, "request_timeout": 60, "concurrency": 2,
            "burst_tokens": 16}  # fmt: skip
    return Context(Options(**{**base, **kw}))


def free_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_the_default_checks_are_the_report_order():
    assert [u.NAME for u in DEFAULT_CHECKS] == [
        "readiness", "first_request", "smoke", "suite", "streaming", "concurrency", "kv_cache",
        "max_length", "precision",
    ]  # fmt: skip


def test_readiness_finds_the_served_model_and_its_length(emu):
    ctx = context(emu.url)
    res = readiness.run(ctx)
    assert res.ok and res.data["attempts"] == 1, res
    assert ctx.model == NAME and not ctx.stop
    assert ctx.server["max_model_len"] == MAX_LEN and ctx.server["version"]
    wrong = context(emu.url, model="qwen3-other")
    res = readiness.run(wrong)
    assert res.ok is False and wrong.stop
    assert f"the service serves ['{NAME}'], not the expected model 'qwen3-other'" in res.detail


def test_first_request_keeps_the_answer_and_stops_the_run_when_nothing_answers(emu):
    ctx = context(emu.url, model=NAME)
    res = first_request.run(ctx)
    assert res.ok and res.detail.startswith("answered in") and not ctx.stop
    assert "Paris" in ctx.smoke_reply["answer"] and ctx.smoke_reply["completion_tokens"] > 0
    gone = context(free_url(), model=NAME)
    res = first_request.run(gone)
    assert res.ok is False and gone.stop
    assert "failed its first request" in res.detail and "/health no longer answers" in res.detail


def test_smoke_asks_itself_or_reads_the_first_answer(emu):
    ctx = context(emu.url, model=NAME)
    res = smoke.run(ctx)  # no first request ran: smoke sends its own
    assert res.ok and "'What is the capital of France?' -> " in res.detail and "Paris" in res.detail
    first_request.run(ctx)
    assert smoke.run(ctx).data["case"] is ctx.smoke_reply


def test_suite_reports_each_case_and_the_failed_ones(emu, tmp_path):
    path = tmp_path / "suite.json"
    path.write_text(json.dumps({"name": "two", "cases": [
        {"id": "paris", "prompt": "What is the capital of France?", "enable_thinking": False,
         "expect_any": ["Paris"]},
        {"id": "london", "prompt": "What is the capital of France?", "enable_thinking": False,
         "expect_any": ["London"]},
    ]}))  # fmt: skip
    ctx = context(emu.url, model=NAME, suite=str(path))
    res = suite.run(ctx)
    assert res.ok is False and not ctx.stop
    assert res.detail == "1/2 cases passed; failed: london (answer mentions none of ['London'])"
    assert [c["id"] for c in ctx.cases] == ["paris", "london"] and ctx.cases[0]["ok"]
    assert res.data["suite"] == "two"


def test_streaming_ends_with_done_and_measures_the_first_token(emu):
    res = streaming.run(context(emu.url, model=NAME))
    assert res.ok, res
    assert "chunks ending with [DONE]" in res.detail and res.data["ttft_s"] > 0


def test_concurrency_then_kv_cache_read_one_burst(emu):
    ctx = context(emu.url, model=NAME, concurrency=3)
    assert kv_cache.run(ctx) is None  # no burst yet
    res = concurrency.run(ctx)
    assert res.ok and res.detail.startswith("3/3 concurrent streamed requests succeeded"), res
    assert ctx.performance["requests_ok"] == 3 and ctx.performance["ttft_s"]["p50"] > 0
    assert ctx.burst and ctx.burst.before is not None and ctx.burst.after is not None
    kv = kv_cache.run(ctx)
    assert kv.ok and kv.data["preemptions"] == 0, kv
    assert "no preemption" in kv.detail and ctx.performance["preemptions"] == 0


def test_max_length_fills_the_planned_length_without_readiness(emu):
    res = max_length.run(context(emu.url, model=NAME, expect_max_model_len=MAX_LEN))
    assert res.ok, res
    assert res.data["max_model_len"] == MAX_LEN and MAX_LEN - 100 < res.data["total"] <= MAX_LEN
    off = max_length.run(context(emu.url, model=NAME, expect_max_model_len=MAX_LEN,
                                 max_len_probe=False))  # fmt: skip
    assert off.ok is None and off.detail == "skipped (disabled)"


def test_precision_runs_only_with_a_reference(emu, tiny_bf16):
    assert precision.run(context(emu.url, model=NAME)) is None
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    res = precision.run(context(emu.url, model=NAME, reference_model=tiny_bf16))
    assert res.ok, res
    assert res.data["precision"]["max_abs_diff"] < 1e-3


def test_the_verifier_runs_only_the_selected_checks_in_order(emu):
    report = Verifier(Options(url=emu.url, ready_timeout=20), (readiness, streaming, smoke)).run()
    assert [c["name"] for c in report["checks"]] == ["readiness", "streaming", "smoke"]
    assert report["ok"] and report["model"] == NAME and report["cases"] == []
    stopped = Verifier(Options(url=free_url(), ready_timeout=1), (readiness, suite)).run()
    assert [(c["name"], c["status"]) for c in stopped["checks"]] == [
        ("readiness", "fail"), ("suite", "skipped"),
    ]  # fmt: skip
