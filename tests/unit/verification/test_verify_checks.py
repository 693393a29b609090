"""Pure parts of verify: garbage detection, thinking split, metrics, percentiles, suites."""

from __future__ import annotations

import json
import math
import sys

import pytest
from conftest import DATA

from ascend_deploy.errors import InputError
from ascend_deploy.verification.garbage import bad_logprobs, detect
from ascend_deploy.verification.responses import parse_metrics, percentile, split_thinking
from ascend_deploy.verification.suite import DEFAULT_SUITE, load_suite

# What the tiny model was trained to answer (tools/train_tiny_qwen3.py) and what a real Qwen3
# answers: none of it may be called garbage.
GOOD = [
    "The capital of France is Paris.",
    "12 + 7 = 19.",
    "6 * 7 = 42.",
    "Hello",
    "谢谢",
    "你好",
    "OK",
    "42",
    "```python\ndef square(x):\n    return x * x\n```",
    "巴黎是法国的首都，也是法国最大的城市。",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "Paris is the capital and largest city of France. With an estimated population of "
    "2,102,650 residents in January 2023 in an area of more than 105 km2, Paris is the "
    "fourth-most populous city in the European Union.",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
]
GARBAGE = [
    # vllm-ascend issue #883: a W8A8 checkpoint served without --quantization ascend
    ('\n)),)_)))...."."."."."' + "." * 200, "repeated text"),
    ("nan nan nan nan nan", "NaN text"),
    ("Par\ufffd\ufffds \ufffd", "U+FFFD"),
    ("\n" * 20, "whitespace only"),
    ("", "empty content"),
    ("the the the the the the the the the the", "repeated text"),
    ("#$%^&*@~`|\\<>{}#$%^&*@~", "token soup"),
    ("xkcdqwrtz bnmplkjhgf zxcvbnmlkj qwrtypsdf ghjklzxcv bnmqwrtps", "not pronounceable"),
    ("\x01\x02\x03abc", "control characters"),
]


@pytest.mark.parametrize("text", GOOD)
def test_correct_answers_are_not_garbage(text):
    assert detect(text) == []


@pytest.mark.parametrize("text, reason", GARBAGE)
def test_garbage_is_named(text, reason):
    reasons = detect(text)
    assert any(reason in r for r in reasons), reasons


def test_thinking_only_is_not_empty_and_loops_in_thinking_are_found():
    assert detect("", reasoning="Let me think.") == []
    assert any("reasoning" in r for r in detect("Paris", reasoning="hmm " * 40))


def test_bad_logprobs():
    assert bad_logprobs([-0.1, -2.0, None]) == []
    assert bad_logprobs([math.nan, -1.0])[0].startswith("1 non-finite")
    assert "positive" in bad_logprobs([0.5])[0]
    # the server's JSON may carry NaN/Infinity literals (Python's json writes them)
    values = json.loads("[NaN, -Infinity, -0.5]")
    assert "2 non-finite" in bad_logprobs(values)[0]


@pytest.mark.parametrize(
    "message, expected",
    [
        ({"content": "Paris"}, ("", "Paris")),
        ({"reasoning_content": "think", "content": "\n\nParis"}, ("think", "\n\nParis")),
        ({"content": "<think>\nplan\n</think>\n\nParis"}, ("plan", "\n\nParis")),
        ({"content": "plan</think>Paris"}, ("plan", "Paris")),  # template opened the block
        ({"content": "<think>\nunfinished"}, ("unfinished", "")),
        ({"content": None, "reasoning_content": None}, ("", "")),
    ],
)
def test_split_thinking(message, expected):
    assert split_thinking(message) == expected


def test_parse_metrics_both_kv_names_and_labels():
    text = """# HELP vllm:kv_cache_usage_perc KV-cache usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.75
vllm:num_preemptions_total{engine="0",model_name="m"} 3.0
vllm:num_preemptions_total{engine="1",model_name="m"} 2.0
vllm:gpu_cache_usage_perc{model_name="m"} 1.5e-1
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 7.0
"""
    m = parse_metrics(text)
    assert m["vllm:kv_cache_usage_perc"] == 0.75
    assert m["vllm:num_preemptions_total"] == 5.0
    assert m["vllm:gpu_cache_usage_perc"] == 0.15


def test_percentile_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([float(i) for i in range(1, 101)], 95) == 95.0


def test_default_suite_covers_the_required_kinds_without_pyyaml(monkeypatch):
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml -> ImportError
    name, cases = load_suite()
    assert name == "default" and len(cases) >= 7
    kinds = {c.kind for c in cases}
    assert {"knowledge", "arithmetic, thinking on", "arithmetic, thinking off",
            "translation zh->en", "translation en->zh", "code", "instruction following",
            "long prompt"} <= kinds  # fmt: skip
    think = [c for c in cases if c.chat_template_kwargs.get("enable_thinking")]
    assert think and all(c.expect_reasoning for c in think)
    long = next(c for c in cases if c.kind == "long prompt")
    assert len(long.prompt) > 2500


def test_default_suite_matches_the_tiny_model_questions():
    questions = {q["id"]: q for q in json.loads((DATA / "verification-questions.json").read_text())}
    _, cases = load_suite(DEFAULT_SUITE)
    for c in cases:
        q = questions[c.id]
        assert c.messages == q["messages"], c.id
        assert c.chat_template_kwargs["enable_thinking"] == q["enable_thinking"]
        assert c.max_tokens == q["max_tokens"]
        for key in ("expect_any", "expect_all"):
            assert getattr(c, key) == q.get(key, []), c.id


def test_questions_file_itself_is_a_valid_suite():
    name, cases = load_suite(str(DATA / "verification-questions.json"))
    assert len(cases) >= 20 and name == "verification-questions.json"


def test_block_yaml_with_pyyaml(tmp_path):
    pytest.importorskip("yaml")
    p = tmp_path / "s.yaml"
    p.write_text(
        "name: mine\ncases:\n  - id: one\n    prompt: What is 2 + 3?\n"
        "    expect_any: ['5']\n    enable_thinking: false\n    system: Be brief.\n"
    )
    name, (case,) = load_suite(str(p))
    assert name == "mine"
    assert case.messages[0] == {"role": "system", "content": "Be brief."}
    assert case.chat_template_kwargs == {"enable_thinking": False}
    assert case.check("It is 5.") == [] and case.check("4") == ["mentions none of ['5']"]


@pytest.mark.parametrize(
    "content, needle",
    [
        ("", "empty"),
        ("\x00\x01", "binary"),
        ("[1, 2", "invalid YAML"),
        ('{"cases": []}', "non-empty list"),
        ('[{"prompt": "x", "expect_any": "y"}]', "needs a non-empty string 'id'"),
        ('[{"id": "a", "prompt": "x"}]', "give at least one of"),
        ('[{"id": "a", "prompt": "x", "expect_any": 5}]', "'expect_any' must be"),
        ('[{"id": "a", "prompt": "x", "expect_any": "y", "max_tokens": 0}]', "max_tokens"),
        ('[{"id": "a", "prompt": "x", "expect_any": "y", "colour": 1}]', "unknown field"),
        (
            '[{"id": "a", "prompt": "x", "expect_any": "y"}, {"id": "a", "prompt": "z", '
            '"expect_any": "y"}]',
            "duplicate case id",
        ),
        ('[{"id": "a", "messages": [{"role": "user"}], "expect_any": "y"}]', "'messages'"),
    ],
)
def test_bad_suites_name_file_and_problem(tmp_path, content, needle):
    p = tmp_path / "suite.yaml"
    p.write_bytes(content.encode())
    with pytest.raises(InputError, match=needle) as info:
        load_suite(str(p))
    assert str(p) in str(info.value)


def test_missing_suite(tmp_path):
    with pytest.raises(InputError, match="suite file not found"):
        load_suite(str(tmp_path / "nope.yaml"))
    with pytest.raises(InputError, match="is a directory"):
        load_suite(str(tmp_path))
