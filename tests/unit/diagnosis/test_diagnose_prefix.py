"""Issue 25: line prefixes nobody listed are found from the log itself, and an allocation failure
is read in the context of what the log was doing (graph capture).

Real inputs: excerpts of tests/data/diagnose/real/ as posted (their own unknown prefixes: a
Russian journal date, an HTML colour tag, grep's file name before CANN plog lines), and the same
excerpts behind the prefixes collectors put before every line (Go's log package
``2026/12/03 12:00:01.123456``, ``kubectl logs --prefix`` ``[pod/NAME/CONTAINER]``, a syslog tag
without a date, a time of day, an epoch stamp, numbered lines of a paste).
"""

from __future__ import annotations

import sys

import pytest
from conftest import DATA, REPO

from ascend_deploy.diagnosis import prefix
from ascend_deploy.diagnosis.engine import Diagnoser, diagnose_lines, diagnose_text, normalise

sys.path.insert(0, str(REPO / "tools"))
import diagnose_corpus as dc

REAL = DATA / "diagnose" / "real"


def _lines(name: str) -> list[str]:
    return [line.rstrip("\n") for line in dc.parse_case(name, (REAL / name).read_text()).body]


@pytest.mark.parametrize(
    "name, needle, message",
    [
        # journalctl in a Russian locale: "авг 12 10:00:01 llm python3[123]: "
        ("none_journal_ru_startup_1cat237.log", "Supported tasks", None),
        # a chat UI's HTML colour tag before each process prefix
        ("none_routes_html_colour_ragflow11166.log", "Route: /docs,", None),
        # `grep -r` over plog files: "plog-123_456.log:[INFO] "
        ("p1_cann_driver_241_title_cn_5468.log", "[INFO]", None),
    ],
)
def test_a_prefix_of_real_excerpts_is_found_and_removed(name, needle, message):
    lines = _lines(name)
    line = next(x for x in lines if needle in x)
    rx = prefix.detect(lines, normalise)
    assert rx is not None
    plain, _level = normalise(line)
    stripped, _level = normalise(line, rx)
    assert len(stripped) < len(plain) and plain.endswith(stripped)
    assert not rx.match(stripped)


def test_known_headers_are_left_to_the_normaliser():
    # vLLM's own header on every line (a traceback under it): no prefix of its own to find, and
    # never the first words of the messages ("File", "Engine 000:")
    for name in (
        "p7_deq_scale_v073_3177.log",
        "p6_kv_usage_95_pr21809.log",
        "p7_deq_scale_keyerror_310p_11368.log",
    ):
        assert prefix.detect(_lines(name), normalise) is None, name


PREFIXES = {
    "go_log": lambda i: f"2026/12/03 12:{i % 60:02d}:{i * 7 % 60:02d}.{i * 1234 % 10**6:06d} ",
    "kubectl_prefix": lambda i: "[pod/vllm-ascend-0/vllm] ",
    "syslog_tag": lambda i: f"node-3 vllm-serve[{4000 + i % 3}]: ",
    "time_of_day": lambda i: f"[12:{i % 60:02d}:{i * 7 % 60:02d}] ",
    "epoch": lambda i: f"{1733224801 + i}.{i * 37 % 1000:03d} ",
    "line_numbers": lambda i: f"{i + 1:>4}: ",
}
# Every third excerpt of the corpus with at least two lines (a one-line report has no prefix
# common to its lines).
SAMPLE = [c for c in dc.open_cases() if sum(1 for x in c.body if x.strip()) >= 2][::3]


@pytest.mark.parametrize("kind", sorted(PREFIXES))
def test_real_excerpts_behind_a_collectors_prefix_keep_their_diagnosis(kind):
    add = PREFIXES[kind]
    changed = []
    for case in SAMPLE:
        body = [line.rstrip("\n") for line in case.body]
        want = dc.predicted(diagnose_text("\n".join(body) + "\n"))
        text = "\n".join(add(i) + line for i, line in enumerate(body)) + "\n"
        got = dc.predicted(diagnose_text(text))
        if got != want:
            changed.append(f"{case.name}: {want} -> {got}")
    assert not changed, changed


def test_the_level_in_a_prefix_is_kept():
    # LLaMA-Factory / transformers: "[LEVEL|...] ... >> "
    msg, level = normalise(
        "[WARNING|configuration_utils.py:733] 2024-06-12 10:12:16,522 >> "
        "NPU out of memory. Tried to allocate 2.00 GiB"
    )
    assert (msg, level) == ("NPU out of memory. Tried to allocate 2.00 GiB", "warning")
    lines = [
        f"ERROR|{i} svc-a | Worker {i} failed to start" if i % 2 else f"INFO|{i} svc-a | step {i}"
        for i in range(10)
    ]
    rx = prefix.detect(lines, normalise)
    assert rx is not None
    assert normalise(lines[1], rx) == ("Worker 1 failed to start", "error")
    assert normalise(lines[2], rx) == ("step 2", "info")


def test_a_one_line_report_with_a_stamp():
    # a bug title pasted from a terminal with its stamp (issue title of vllm#23444)
    title = "# [Bug]: Hitting close to 100% cache causes spike in waiting and kills throughput"
    for stamp in ("2026/12/03 12:00:00.000000 ", "[12:00:00] ", "1733224801.123 "):
        assert normalise(stamp + title)[0] == title


def test_lines_fed_one_by_one_find_the_prefix_too():
    body = _lines("p7_deq_scale_keyerror_310p_11368.log")
    add = PREFIXES["kubectl_prefix"]
    want = dc.predicted(diagnose_text("\n".join(body) + "\n"))
    assert dc.predicted(diagnose_lines([add(i) + x for i, x in enumerate(body)])) == want == "7"


# The CANN runtime's "Failed to apply for memory" (vllm-ascend#8393 without its capture_begin
# line, and vllm-ascend#3141 as posted).
_APPLY = [
    "(EngineCore pid=1802921) [ERROR] 2026-04-17-09:16:39 (PID:1802934, Device:0, RankID:-1) "
    "ERR00100 PTA call acl api failed",
    "(EngineCore pid=1802921) [Error]: Failed to apply for memory.",
    "(EngineCore pid=1802921)         Check the remaining storage space in the hardware "
    "environment.",
]


def test_failed_to_apply_for_memory_during_graph_capture_is_pitfall_4():
    start = (
        "(EngineCore pid=1802921) INFO 04-17 09:16:30 [acl_graph.py:1] Capturing ACL graphs "
        "(mixed prefill-decode, PIECEWISE):  40%|████      | 2/5 [00:01<00:02,  1.02it/s]"
    )
    result = diagnose_text("\n".join([start, *_APPLY]) + "\n")
    top = result["findings"][0]
    assert (top["pitfall"], top["rule"]) == (4, "graph_capture_failed")
    assert any("during graph capture: Capturing ACL graphs" in e for e in top["evidence"])


def test_failed_to_apply_for_memory_outside_capture_is_pitfall_5():
    done = (
        "(EngineCore pid=1802921) INFO 04-17 09:16:35 [model_runner_v1.py:1] Graph capturing "
        "finished in 5 secs, took 0.42 GiB"
    )
    start = "(EngineCore pid=1802921) INFO 04-17 09:16:30 [acl_graph.py:1] Capturing ACL graphs"
    for lines in (_APPLY, [start, done, *_APPLY]):
        top = diagnose_text("\n".join(lines) + "\n")["findings"][0]
        assert (top["pitfall"], top["rule"]) == (5, "npu_memory_apply_failed"), lines
    real = diagnose_text(
        "".join(
            dc.parse_case(
                "p5_sealed1_vllmascend3141.log",
                (REAL / "p5_sealed1_vllmascend3141.log").read_text(),
            ).body
        )
    )
    assert real["findings"][0]["pitfall"] == 5


def test_the_capture_scan_costs_nothing_without_capture_lines():
    d = Diagnoser(model=False)
    d.feed_text("INFO 12-03 12:00:01 [loggers.py:1] Engine 000: Running: 3 reqs\n" * 50)
    assert not d._capture


def test_out_of_memory_after_a_preemption_is_pitfall_6():
    # vLLM's scheduler warning (vllm/core/scheduler.py) says requests were running and lost
    # their KV blocks: the memory ran out under load, not at start-up
    preempted = (
        "WARNING 12-03 12:00:01 [scheduler.py:1560] Sequence group cmpl-8a1e0c2d is preempted by "
        "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can "
        "affect the end-to-end performance. Increase gpu_memory_utilization or "
        "tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption=1"
    )
    oom = (
        "ERROR 12-03 12:00:12 [engine.py:1] RuntimeError: NPU out of memory. Tried to allocate "
        "2.00 GiB (NPU 0; 60.96 GiB total capacity; 55.1 GiB already allocated)"
    )
    assert diagnose_text(f"{preempted}\n{oom}\n")["findings"][0]["pitfall"] == 6
    assert diagnose_text(f"{oom}\n")["findings"][0]["pitfall"] == 5


def test_a_prefix_the_normaliser_knows_only_the_start_of():
    # loguru's default format: the stamp is known, "LEVEL    | module:function:line - " is not
    body = _lines("p7_deq_scale_keyerror_310p_11368.log")
    lines = [
        f"2026-12-03 12:00:{i % 60:02d}.123 | {'ERROR   ' if 'Error' in x else 'INFO    '} | "
        f"launcher:run:{40 + i % 7} - {x}"
        for i, x in enumerate(body)
    ]
    rx = prefix.detect(lines, normalise)
    assert rx is not None
    at = next(i for i, x in enumerate(body) if "KeyError" in x)
    assert normalise(lines[at], rx) == (body[at], "exception")
    assert normalise(lines[at + 1], rx)[0] == normalise(body[at + 1])[0]
    assert dc.predicted(diagnose_text("\n".join(lines) + "\n")) == "7"
