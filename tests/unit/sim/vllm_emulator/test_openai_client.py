"""The emulated vLLM through the official ``openai`` Python client (127.0.0.1, free port)."""

from __future__ import annotations

import pytest

openai = pytest.importorskip("openai")


KEY = "sk-openai-client-test"


@pytest.fixture(scope="module")
def client(openai_server):
    emu = openai_server(
        "v0.11.0", "--served-model-name", "tiny", "--api-key", KEY, "--max-model-len", "256",
        "--reasoning-parser", "qwen3",
    )  # fmt: skip
    return openai.OpenAI(base_url=f"{emu.url}/v1", api_key=KEY, max_retries=0, timeout=60)


def test_models_list(client):
    assert [m.id for m in client.models.list().data] == ["tiny"]


def test_chat_completion(client):
    r = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        max_tokens=5,
        temperature=0,
        logprobs=True,
        top_logprobs=2,
        extra_body={"ignore_eos": True, "chat_template_kwargs": {"enable_thinking": False}},
    )
    assert r.object == "chat.completion" and r.model == "tiny"
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 5
    assert len(r.choices[0].logprobs.content) == 5
    assert len(r.choices[0].logprobs.content[0].top_logprobs) == 2


def test_chat_streaming(client):
    stream = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=4,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].usage.completion_tokens == 4


def test_completion(client):
    r = client.completions.create(
        model="tiny", prompt="Hello", max_tokens=3, temperature=0, extra_body={"ignore_eos": True}
    )
    assert r.object == "text_completion"
    assert r.usage.prompt_tokens == 5 and r.usage.completion_tokens == 3


def test_wrong_key_is_authentication_error(client):
    bad = openai.OpenAI(base_url=str(client.base_url), api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as exc:
        bad.models.list()
    assert exc.value.status_code == 401


def test_too_long_is_bad_request(client):
    with pytest.raises(openai.BadRequestError) as exc:
        client.completions.create(model="tiny", prompt="z" * 300, max_tokens=1)
    assert exc.value.status_code == 400
    assert "This model's maximum context length is 256 tokens." in exc.value.message
