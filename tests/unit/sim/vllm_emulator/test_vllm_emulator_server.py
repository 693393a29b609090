"""OpenAI-compatible serving of the emulated vLLM over raw HTTP (127.0.0.1, free port).

A tiny random-weight Qwen3 checkpoint is served by the real emulator process; these tests
check the protocol (shapes, streaming, errors, auth, metrics, KV enforcement), not answers.
"""

from __future__ import annotations

import http.client
import json
import re
import threading

import pytest

from ascend_deploy.model.files import load_config, read_weight_layout
from ascend_sim.vllm_emulator import messages as M
from ascend_sim.vllm_emulator.memory import utilization_for_blocks
from ascend_sim.vllm_emulator.sandbox import (
    Emulator,
    default_state,
    emulator_env,
    make_root,
    write_row,
)
from ascend_sim.vllm_emulator.sandbox import write_tiny_random_model as tiny_model
from ascend_sim.vllm_emulator.server import ReasoningSplitter

KEY = "sk-emulator-test"


@pytest.fixture(scope="module")
def served(openai_server):
    return openai_server(
        "v0.23.0", "--served-model-name", "tiny", "alias", "--reasoning-parser", "qwen3",
        "--api-key", KEY, "--max-model-len", "512",
    )  # fmt: skip


def request(emu, method, path, body=None, key=KEY, raw: bytes | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=60)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, body=data, headers=headers)
    resp = conn.getresponse()
    payload = resp.read()
    conn.close()
    return resp.status, resp.getheader("content-type"), payload


def jpost(emu, path, body, key=KEY):
    status, _, payload = request(emu, "POST", path, body, key)
    return status, json.loads(payload)


def sse(emu, path, body):
    status, ctype, payload = request(emu, "POST", path, body)
    assert status == 200
    assert ctype.startswith("text/event-stream")
    events = [e for e in payload.decode().split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    return [json.loads(e[6:]) for e in events[:-1]]


def chat(content="Hi", **kw):
    return {"model": "tiny", "messages": [{"role": "user", "content": content}], **kw}


def test_health_and_version_are_open(served):
    assert request(served, "GET", "/health", key=None)[0] == 200
    status, _, body = request(served, "GET", "/version", key=None)
    assert (status, json.loads(body)) == (200, {"version": "0.23.0"})


def test_models_lists_every_served_name(served):
    status, _, body = request(served, "GET", "/v1/models")
    doc = json.loads(body)
    assert status == 200 and doc["object"] == "list"
    assert [m["id"] for m in doc["data"]] == ["tiny", "alias"]
    assert all(m["owned_by"] == "vllm" and m["max_model_len"] == 512 for m in doc["data"])


def test_api_key_enforced_on_v1(served):
    status, _, body = request(served, "GET", "/v1/models", key=None)
    assert (status, json.loads(body)) == (401, {"error": "Unauthorized"})
    status, body = jpost(served, "/v1/chat/completions", chat(), key="wrong")
    assert (status, body) == (401, {"error": "Unauthorized"})
    assert request(served, "GET", "/metrics", key=None)[0] == 200


def test_chat_completion_shape_usage_and_logprobs(served):
    status, doc = jpost(
        served,
        "/v1/chat/completions",
        chat(max_tokens=6, temperature=0, logprobs=True, top_logprobs=3, ignore_eos=True),
    )
    assert status == 200, doc
    assert re.fullmatch(r"chatcmpl-[0-9a-f]{32}", doc["id"])
    assert doc["object"] == "chat.completion" and doc["model"] == "tiny"
    choice = doc["choices"][0]
    assert choice["finish_reason"] == "length" and choice["stop_reason"] is None
    assert set(choice["message"]) == {"role", "content", "reasoning_content", "tool_calls"}
    lps = choice["logprobs"]["content"]
    assert len(lps) == 6
    for entry in lps:
        assert len(entry["top_logprobs"]) == 3
        assert entry["top_logprobs"][0]["logprob"] >= entry["top_logprobs"][-1]["logprob"]
        assert entry["logprob"] <= 0 and isinstance(entry["bytes"], list)
    usage = doc["usage"]
    assert usage["completion_tokens"] == 6
    assert usage["total_tokens"] == usage["prompt_tokens"] + 6
    # The byte-level prompt through Qwen3's template: "<|im_start|>user\nHi<|im_end|>\n"
    # "<|im_start|>assistant\n" = 1+5+2+1+1 + 1+10 tokens.
    assert usage["prompt_tokens"] == 21


def test_greedy_is_deterministic_and_model_alias_works(served):
    body = chat(max_tokens=8, temperature=0, ignore_eos=True)
    a = jpost(served, "/v1/chat/completions", body)[1]["choices"][0]["message"]
    body["model"] = "alias"
    b = jpost(served, "/v1/chat/completions", body)[1]["choices"][0]["message"]
    assert a == b


def test_enable_thinking_false_adds_the_empty_think_block(served):
    on = jpost(served, "/v1/chat/completions", chat(max_tokens=1))[1]["usage"]["prompt_tokens"]
    off = jpost(
        served,
        "/v1/chat/completions",
        chat(max_tokens=1, chat_template_kwargs={"enable_thinking": False}),
    )[1]["usage"]["prompt_tokens"]
    # "<think>\n\n</think>\n\n" = <think> + 2 bytes + </think> + 2 bytes
    assert off - on == 6


def test_chat_streaming_sse(served):
    events = sse(
        served,
        "/v1/chat/completions",
        chat(
            max_tokens=5,
            temperature=0,
            ignore_eos=True,
            stream=True,
            stream_options={"include_usage": True},
        ),
    )
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(e["object"] == "chat.completion.chunk" for e in events)
    assert len({e["id"] for e in events}) == 1
    finals = [e for e in events if e["choices"] and e["choices"][0]["finish_reason"]]
    assert [f["choices"][0]["finish_reason"] for f in finals] == ["length"]
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 5
    streamed = "".join(
        e["choices"][0]["delta"].get("content", "")
        + e["choices"][0]["delta"].get("reasoning_content", "")
        for e in events
        if e["choices"]
    )
    whole = jpost(
        served, "/v1/chat/completions", chat(max_tokens=5, temperature=0, ignore_eos=True)
    )
    msg = whole[1]["choices"][0]["message"]
    assert streamed == (msg["reasoning_content"] or "") + (msg["content"] or "")


def test_completions_with_logprobs_and_stream(served):
    status, doc = jpost(
        served,
        "/v1/completions",
        {
            "model": "tiny",
            "prompt": "Hello",
            "max_tokens": 4,
            "temperature": 0,
            "logprobs": 2,
            "ignore_eos": True,
        },
    )
    assert status == 200 and doc["object"] == "text_completion"
    assert re.fullmatch(r"cmpl-[0-9a-f]{32}", doc["id"])
    lp = doc["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 4
    assert doc["usage"] == {
        "prompt_tokens": 5,
        "total_tokens": 9,
        "completion_tokens": 4,
        "prompt_tokens_details": None,
    }
    events = sse(
        served,
        "/v1/completions",
        {"model": "tiny", "prompt": [72, 105], "max_tokens": 3, "stream": True, "ignore_eos": True},
    )
    assert events[-1]["choices"][0]["finish_reason"] == "length"


def test_stop_string_ends_generation(served):
    first = jpost(
        served,
        "/v1/completions",
        {"prompt": "ab", "max_tokens": 6, "temperature": 0, "ignore_eos": True},
    )[1]["choices"][0]["text"]
    stop = first[2:4] if len(first) >= 4 else None
    if not stop or not stop.strip("\ufffd"):
        pytest.skip("random model produced no usable stop string")
    doc = jpost(
        served,
        "/v1/completions",
        {"prompt": "ab", "max_tokens": 6, "temperature": 0, "ignore_eos": True, "stop": [stop]},
    )[1]["choices"][0]
    assert doc["finish_reason"] == "stop" and doc["stop_reason"] == stop
    assert doc["text"] == first[: first.index(stop)]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            chat(max_tokens=600),
            M.CONTEXT_TOO_LONG.format(max_len=512, total=621, prompt=21, completion=600),
        ),
        (chat("x" * 600), M.INPUT_TOO_LONG.format(max_len=512, prompt=619)),
        (chat(max_tokens=0), "max_tokens must be at least 1, got 0."),
        (chat(temperature="hot"), "'temperature' must be a number, got 'hot'"),
        (
            {"model": "tiny", "messages": []},
            "'messages' must be a non-empty list of message objects",
        ),
        (chat(top_logprobs=2), "when using `top_logprobs`, `logprobs` must be set to true."),
    ],
)
def test_bad_requests_get_vllm_400(served, body, message):
    status, doc = jpost(served, "/v1/chat/completions", body)
    assert status == 400
    assert doc == {
        "object": "error",
        "message": message,
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }


def test_invalid_json_and_unknown_model(served):
    status, _, payload = request(served, "POST", "/v1/chat/completions", raw=b"{not json")
    doc = json.loads(payload)
    assert status == 400 and doc["type"] == "BadRequestError"
    assert doc["message"].startswith("request body is not valid JSON")
    status, doc = jpost(served, "/v1/chat/completions", {**chat(), "model": "gpt-4"})
    assert status == 404
    assert doc["message"] == "The model `gpt-4` does not exist." and doc["type"] == "NotFoundError"


def test_metrics_prometheus_text_with_vllm_names(served):
    jpost(served, "/v1/completions", {"prompt": "m", "max_tokens": 2, "ignore_eos": True})
    status, ctype, body = request(served, "GET", "/metrics", key=None)
    text = body.decode()
    assert status == 200 and ctype.startswith("text/plain")
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:num_preemptions_total",
        "vllm:time_to_first_token_seconds",
        "vllm:e2e_request_latency_seconds",
    ):
        assert f"# TYPE {name} " in text
    gen = float(
        re.search(r'^vllm:generation_tokens_total\{model_name="tiny"\} (\S+)$', text, re.M)[1]
    )
    assert gen >= 2
    assert re.search(
        r'^vllm:time_to_first_token_seconds_bucket\{le="\+Inf",model_name="tiny"\} ', text, re.M
    )
    assert "vllm:gpu_cache_usage_perc" not in text  # hidden since vLLM 0.12


def test_access_log_lines(served):
    request(served, "GET", "/health", key=None)
    assert any(
        re.search(r'INFO:     127\.0\.0\.1:\d+ - "GET /health HTTP/1\.1" 200 OK', line)
        for line in served.lines
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>\nplan\n</think>\n\nParis", ("\nplan\n", "\n\nParis")),
        ("Paris", (None, "Paris")),
        ("<think>\nunfinished", (None, "\nunfinished")),
        ("<think>x</think>", ("x", None)),
    ],
)
def test_qwen3_reasoning_split(text, expected):
    assert ReasoningSplitter.split(text) == expected
    s = ReasoningSplitter()
    pieces = [s.feed(ch) for ch in re.split(r"(<think>|</think>)", text) if ch]
    reasoning = "".join(r for r, _ in pieces)
    content = "".join(c for _, c in pieces)
    if expected[0] is not None:
        assert (reasoning, content) == (expected[0], expected[1] or "")


# -- KV capacity at run time (pitfall 6) --------------------------------------------------------
def test_kv_capacity_enforced_with_preemption(tmp_path):
    model = tiny_model(str(tmp_path / "tiny"))
    # A utilization at which the emulated card's cache holds 32 blocks of 128 tokens.
    tensors = [(i.name, i.shape, i.nbytes) for _, i in read_weight_layout(model).tensors()]
    hbm = 4000
    util = utilization_for_blocks(
        load_config(model), tensors, hbm, 0, 32, enforce_eager=True, profiling=True
    )  # the v0.23.0 row
    root = make_root(
        str(tmp_path / "root"), state=default_state(hbm_total_mb=hbm, idle_hbm_used_mb=0)
    )
    env = emulator_env(
        root, write_row(str(tmp_path / "row.json"), "v0.23.0"), ASCEND_SIM_STATS_INTERVAL="0.3"
    )
    args = [
        model,
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--enforce-eager",
        "--max-model-len",
        "1024",
        "--gpu-memory-utilization",
        str(util),
    ]
    with Emulator(args, env).start() as emu:
        assert emu.ready, emu.output()
        assert "GPU KV cache size: 4,096 tokens" in emu.output()
        # 10 x 8 blocks against 32: even when a loaded machine staggers the arrivals, more than
        # four requests run at once and the cache runs out.
        results: list = [None] * 10

        def worker(i: int) -> None:
            body = {
                "prompt": "x" * 200 + str(i),
                "max_tokens": 700,
                "ignore_eos": True,
                "temperature": 0,
            }
            results[i] = jpost(emu, "/v1/completions", body, key=None)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert all(r is not None and r[0] == 200 for r in results), results
        assert all(r[1]["usage"]["completion_tokens"] == 700 for r in results)
        out = emu.output()
        assert (
            "is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV "
            "cache space" in out
        )
        # The usage line is the stat logger's periodic sample, so its peak is timing-dependent; the
        # preemption above is the proof that the cache ran full.
        usage = [float(u) for u in re.findall(r"GPU KV cache usage: (\d+\.\d)%", out)]
        assert usage and max(usage) >= 50.0, out[-3000:]
        status, _, body = request(emu, "GET", "/metrics", key=None)
        preempt = re.search(r"^vllm:num_preemptions_total\{[^}]*\} (\S+)$", body.decode(), re.M)
        assert float(preempt[1]) >= 1
        # A prompt longer than max-model-len is refused with vLLM's 400.
        status, doc = jpost(emu, "/v1/completions", {"prompt": "y" * 1100}, key=None)
        assert status == 400
        assert doc["message"] == M.INPUT_TOO_LONG.format(max_len=1024, prompt=1100)
