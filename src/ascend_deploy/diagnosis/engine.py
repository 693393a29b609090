"""Name the root cause of a failed vLLM-Ascend start (or a sick service) from its log.

The rules are data (``data/diagnose_rules.json``, format in :mod:`.diagnose_rules` and
docs/diagnose-rules.md). Lines are normalised first: ANSI colours, CR/CRLF, docker/journal/
Python-logging timestamps, worker prefixes such as ``(VllmWorker rank=0 pid=123)`` or
``[rank0]:``, CANN plog and glog headers and vLLM's ``LEVEL MM-DD HH:MM:SS [file.py:N]``
header are removed. A rule pattern may span a small window of consecutive lines (messages
wrapped by the terminal or by pasting). CANN error codes, ACL return codes and HCCL results
are looked up by code and family; exception types are classes too.

Speed: the log is read in blocks; one combined regex (every pattern, or the literals of
windowed ones, plus generic failure words) finds candidate lines, and only those lines and
their window neighbours are normalised and matched. Memory is bounded by the block size.

Ranking: causes before consequences ("EngineCore failed to start"); among causes, the rule's
specificity plus the weight of the strongest matching line. When nothing matches a log that
shows a failure, the classes are ranked by weaker evidence (exception types, code families,
keywords) and the best is reported as a guess with its confidence and the commands that
settle it. Standard library only.
"""

from __future__ import annotations

import codecs
import gzip
import io
import json
import os
import queue
import re
import select
import stat
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from ..errors import InputError, describe_path
from ..safe_open import open_regular
from ..verification import garbage
from . import features as _features
from . import prefix as _prefix
from .learned import NONE, Model, default_model
from .rules import (
    RULES_PATH,
    CodeEntry,
    Pattern,
    Rule,
    RuleSet,
    cheapest_requirements,
    choose_anchors,
    load_rules,
    parse_rules,
    requirements,
    strip_groups,
    trie_regex,
    value_trigger,
)

__all__ = [
    "RULES_PATH",
    "Diagnoser",
    "Pattern",
    "Rule",
    "RuleSet",
    "diagnose_file",
    "diagnose_lines",
    "diagnose_text",
    "iter_lines",
    "load_rules",
    "normalise",
    "parse_rules",
    "render",
]

MAX_LINE = 16384  # longer lines are split (bounded memory on logs without newlines)
BLOCK = 1 << 22  # bytes read at a time
MAX_EVIDENCE = 5
EVIDENCE_CHARS = 400
LAST_ERRORS = 10
GUESS_LINES = 200  # failure lines kept for ranking a guess
HEAD_LINES = 40  # first lines of a log the learned stage always reads (titles, prose)
SEEN_HEAD, SEEN_TAIL = 150, 250  # looked-at lines kept for the learned stage (first, last)
EXPLAIN_LINES = 3  # lines quoted as what drove a learned ranking
RANKING = 3
PREFIX_LINES = 20  # a line prefix is looked for until a block brings this many lines
DEFAULT_MAX_MB = 1024
DEFAULT_MAX_SECONDS = 120.0

LEVEL_WEIGHT = {"exception": 30, "error": 20, "warning": 10, "info": 0}

_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# docker logs -t / kubectl --timestamps: RFC 3339 stamp.
_DOCKER_TS_RE = re.compile(
    r"^\[?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?\s+"
)
# Python logging / bracketed stamps: "2025-03-26 17:01:02,816 ", "[2025-03-26 17:01:02.123] ",
# SGLang's "[2025-12-12 08:43:59 TP0] ", MindIE's "[2025-12-15 15:19:22.681+08:00] ", a paste's
# "2025-02-18 12:54 ", the US form "05/17/2024 01:30:26 - ".
_PY_TS_RE = re.compile(
    r"^\[?(?:\d{4}-\d\d-\d\d[ T]|\d\d/\d\d/\d{4} )\d\d:\d\d(?::\d\d)?(?:[.,:]\d+)?"
    r"(?:[+-]\d\d:?\d\d)?(?: (?:TP|DP|EP|PP)\d+)*\]?(?:\s+-\s+|\s*\|\s*|\s+)"
)
# Any other stamp with a time of day and seconds: "2026/12/03 12:00:01.123456 ", "[12:00:01] ",
# "03.12.2026 12:00:01 ", an epoch "1733224801.123 ".
_ANY_TS_RE = re.compile(
    r"^\[?(?:(?:\d{4}[-/.]\d\d?[-/.]\d\d?|\d\d?[-/.]\d\d?[-/.]\d{4})[ T_-]?)?"
    r"\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?(?:[ \t]+|(?<=\])|$)"
    r"|^\[?1\d{9}(?:\.\d+)?\]?[ \t]+"
)
# LLaMA-Factory / transformers: "[INFO|2024-06-12 10:12:16] llamafactory.model.loader:157 >> ",
# "[WARNING|configuration_utils.py:733] 2024-06-12 10:12:16,522 >> ".
_BAR_LEVEL_RE = re.compile(
    r"^\[(?P<b>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\|[^\]]*\][ \t]+"
    r"(?:[\w.]+:\d+ >> |\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d+)? >> )?"
)
# Quote bars and borders a paste or a terminal UI adds: "> ", "> > ", "▎", "│ ... │", "  | ".
_LEAD_BAR_RE = re.compile(r"^(?:[ \t]*(?:>|▎|[│┃║]|\|(?=[ \t]))[ \t]?)+")
_TRAIL_BOX_RE = re.compile(r"[ \t]*[│┃║][ \t]*$")
# ANSI colours whose ESC byte was lost in a paste ("[36m(RayWorker...") or shown as "^[".
_BROKEN_ANSI_RE = re.compile(r"\^\[\[[0-9;]*m|^\[[0-9;]{1,8}m")
# "[80746] [rank0]:", "[383554] [2026-...]", MindIE's "[38] [452] [server] ".
_PID_RE = re.compile(r"^\[\d+\][ \t]+|^\[(?:server|system|stdout|stderr)\][ \t]+")
# "dinov2-giant-nodes.cn-d004 [stderr] ", "[Stage-0] ERROR ...", MindIE's "[llm] [ERROR] ", a
# launcher's "[mineru] (EngineCore_DP0 pid=3052) ", "Worker_TP0 pid=2029) " (lost "(").
_HOST_STREAM_RE = re.compile(
    r"^[\w.-]+ \[(?:stderr|stdout)\][ \t]+"
    r"|^\[[\w-]+\][ \t]+(?=\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\]?[ \t]"
    r"|\([A-Za-z_][\w-]*[ ,][^()]*\bpid=)"
    r"|^[A-Za-z_][\w ]{0,40}\bpid=\d+\)[ \t]*"
)
# "modelscope - WARNING - ", "WARNING - llmtuner.model - ", "torch_npu.memory: [ERROR] [38] ",
# "ERROR | stderr | ", MindIE's "[ERROR] [http_server.cpp:163] : ", "[ERROR] [logging.py-348] : ".
_LOGGER_RE = re.compile(
    r"^(?:[\w.]+ - (?P<l1>DEBUG|INFO|WARNING|ERROR|CRITICAL) - "
    r"|(?P<l2>DEBUG|INFO|WARNING|ERROR|CRITICAL) - [\w.]+ - "
    r"|[\w.]+: \[(?P<l3>DEBUG|INFO|WARNING|ERROR|CRITICAL)\][ \t]*(?:\[\d+\][ \t]*)?"
    r"|(?P<l4>DEBUG|INFO|WARNING|ERROR|CRITICAL) \| (?:stderr|stdout) \|[ \t]?"
    r"|\[(?P<l5>DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL)\][ \t]+\[[\w.]+[:-]\d+\][ \t]*:?[ \t]*)"
)
# journalctl short format: "Nov 29 12:00:01 host unit[123]: ".
_JOURNAL_RE = re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [^\s:\[]+(?:\[\d+\])?: ")
# docker compose: "service-1  | ".
_COMPOSE_RE = re.compile(r"^(?!(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\b)[\w.-]+\s+\| ")
# Process prefixes: "(VllmWorker rank=0 pid=123) ", "(EngineCore_DP0 pid=29) ",
# "(ActorHybridWorker pid=1341, ip=172.16.6.36) ", "[rank0]: ", "[rank0]:[E324 ...] ".
_PROC_RE = re.compile(r"^(?:\((?:[A-Za-z_][\w-]*)(?:,? [\w-]+=[^()\s,]*)*\)\s*|\[rank\d+\]:\s?)")
# glog (torch C++): "[E324 19:10:36.123456 12345 ProcessGroupHCCL.cpp:123] ", short form
# "[W socket.cpp:426] ".
_GLOG_RE = re.compile(
    r"^\[?(?P<g>[IWEF])(?:\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)?(?: +\d+)? | )"
    r"[\w.-]+\.(?:cpp|cc|h|c):\d+\]\s*"
)
# CANN plog: "[ERROR] RUNTIME(1234,python):2025-03-26-17:01:02.816.428 [stream.cc:12]1234 ".
_PLOG_RE = re.compile(
    r"^\[(?P<p>ERROR|WARNING|INFO|DEBUG|EVENT|TRACE)\]\s+[A-Z][\w-]*\(\d+,[^)]*\):"
    r"\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d(?:\.\d+)*\s*(?:\[[^\]]*\]\d*\s*)?"
)
# vLLM header: "ERROR 02-07 18:18:59 [multiproc_executor.py:824] " (>= 0.7) or
# "ERROR 09-25 02:23:33 engine.py:400] " (older).
_VLLM_HDR_RE = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+"
    r"(?:\[[^\]]*\]|[\w./-]+:\d+\])\s?"
)
_UVICORN_RE = re.compile(r"^(?P<level>INFO|WARNING|ERROR|CRITICAL):\s{2,}")
# Python logging "LEVEL - " / "[LEVEL] " after a stripped timestamp.
_PYLEVEL_RE = re.compile(
    r"^(?:\[(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\]|"
    r"(?P<level2>DEBUG|INFO|WARNING|ERROR|CRITICAL) - )\s*"
)
_EXC_RE = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z][A-Za-z0-9_]*(?:Error|Exception|Exit|Interrupt|Warning))"
    r"\b(?::\s*(?P<msg>.*)|$)"
)
# An exception quoted inside a sentence, a title or backticks: "...跑报错KeyError: 'x'",
# "【BUG】：RuntimeError: NPU out of memory", "`OSError: Error no file named ...`".
_EXC_INLINE_RE = re.compile(
    r"(?:^|(?<=[\s`'\"(（【】：:，,>\]]|[^\x00-\x7f]))"
    r"(?P<type>(?:[a-z_][a-z0-9_]*\.)*[A-Z][A-Za-z0-9_]*(?:Error|Exception))(?::|：)\s*(?P<msg>\S.*)"
)
# The title of a documentation, feature or design thread: its prose talks about failures
# ("users who hit 显存不足 need ...") without reporting one; log lines quoted in it still count.
_PROPOSAL_TITLE_RE = re.compile(
    r"^#*\s*[\[【](?:Doc|Docs|Documentation|Feature|Feature Request|RFC|Proposal|Enhancement|建议)"
    r"[\]】]\s*[:：]?"
)
# A bug report's title ("# [Bug]: ...", "[Bug]:"): the person says something failed.
_BUG_TITLE_RE = re.compile(r"^#*\s*\[(?:Bug|BUG|bug)\]\s*[:：]?")
_CANN_CODE_RE = re.compile(r"^E[A-Z]\d{4}\b|^\[ERROR\]|^\[Error\]|\berror code is \d+")
_LEVELS = {
    "ERROR": "error",
    "CRITICAL": "error",
    "FATAL": "error",
    "WARNING": "warning",
    "WARN": "warning",
    "E": "error",
    "F": "error",
    "W": "warning",
}

# Error codes (schemes of diagnose_rules.json "codes").
CODE_RES: dict[str, re.Pattern[str]] = {
    # CANN: E + module character + 4 digits (EZ9999, EI0006, EL0004, E19999).
    "cann": re.compile(r"(?<![A-Za-z0-9_])(E[0-9A-Z]\d{4})(?![A-Za-z0-9_])"),
    # aclError / runtime return codes: 6 digits after the words that introduce them.
    "acl": re.compile(
        r"(?i)(?:error\s*code(?:\s+is)?|err_?code|ret(?:urn)?(?:\s*code|_?code|_?val)?|"
        r"acl\s*error|errno)\s*[:=]?\s*[\[(]?\s*(\d{6})(?!\d)"
    ),
    # HcclResult (1-24) in HCCL contexts.
    "hccl": re.compile(
        r"(?i)hccl.*?(?:error\s*code(?:\s+is)?|errno|ret(?:urn)?(?:\s*code)?|result)\s*[:=]?\s*"
        r"[\[(]?\s*(\d{1,2})(?![\d.x])"
    ),
}
_CODE_NAME_RE = re.compile(r"\b(ACL_ERROR_[A-Z0-9_]+|HCCL_E_[A-Z0-9_]+|ACLNN_ERR_[A-Z0-9_]+)\b")
# Words that make a line worth a look even when no rule names it (failure evidence).
_FAILURE_ANCHORS = (
    "Traceback", "rror", "RROR", "xception", "CRITICAL", "FATAL", "Fatal", "fail", "Fail", "FAIL",
    "crash", "stuck", "OOM", "oom", "[Bug]", "]:[E", "]:[F", "[E ", "[F ",
    "失败", "报错", "错误", "异常", "崩溃", "卡死", "卡住", "撑爆", "爆显存", "显存不足",
    "无法", "不可用", "起不来", "启动不了", "跑不起来", "挂掉", "挂了", "无响应",
    "unable", "not working", "n't work", "not work", "hangs", "hanging", "hang ", "cannot ",
    "can't ",
    "Segmentation fault", "core dumped", "Killed", "Aborted", "ACL_ERROR_", "HCCL_E_", "ACLNN_ERR_",
)  # fmt: skip
_LEVEL_WORD_RE = re.compile(r"\b(?:INFO|WARNING|WARN|DEBUG|TRACE)\b|^\s*(?:Warning|Info|Note):")
# A section heading of an issue template ("### Description of the bug | 错误描述", "## 报错信息"):
# names the section, says nothing about this log.
_TEMPLATE_HEADING_RE = re.compile(r"^\s*#{2,6}\s")
_FAIL_WORDS_RE = re.compile(
    r"(?i)\bfail|\berror\b|\bcrash(?:es|ed|ing)?\b|\bstuck\b|\bOOM\b|失败|报错|错误|异常|崩溃|卡死|卡住"
    r"|撑爆|爆显存|显存不足|无法|不可用"
    r"|\bcan(?:no|')t (?:start|run|load|serve|connect|find|bind|allocate)\b|\bunable to\b"
    r"|\bnot working\b|\bdoes(?:n't| not) work\b|\bhangs?\b|\bhanging\b"
    r"|起不来|启动不了|跑不起来|挂掉|挂了|无响应"
)
# Serving activity (a request was answered): access lines of POSTs, stats lines with running
# requests, SGLang batches. Searched with str.find per block until the first one is found.
_READY_MARKER = "Application startup complete"  # uvicorn, once the API server is up
# A class the rules list as start-up only keeps this share of its probability when the server was
# up before the first failure (it cannot be the cause then, unless the log is two runs pasted).
STARTUP_AFTER_READY = 0.05
_SERVED_MARKERS = (
    'HTTP/1.1" 200',
    'HTTP/1.0" 200',
    "Avg generation throughput: ",
    "Decode batch",
    "Prefill batch",
    "Added request ",
    "Received request ",
    "is preempted by PreemptionMode",  # vLLM: a running request lost its KV blocks
)
_SERVED_RUNNING_RE = re.compile(r"Running: [1-9]\d* reqs|generation throughput: (?!0\.0\b)\d")
# Graph capture starting (vLLM/vllm-ascend progress and log lines, SGLang, torch_npu's capture
# call) and finishing: an allocation failure in between is the capture failing (pitfall 4).
_CAPTURE_RE = re.compile(
    r"(?P<end>[Gg]raph capturing finished|Capture (?:cuda|npu|acl) graph end"
    r"|[Cc]apturing (?:CUDA|ACL|NPU) graphs? (?:finished|took))"
    r"|Capturing (?:ACL |CUDA |NPU |the model for CUDA )?graphs?\b|Capturing cudagraphs"
    r"|Capture (?:cuda|npu|acl) graph begin|capture_begin|[Gg]raph capturing\b"
)
CAPTURE_EVENTS = 64  # capture start/end lines kept (the last ones)
# A request handler on the failing stack (the failure happened while answering).
_REQUEST_CTX_MARKERS = ("serving_chat.py", "serving_completion.py", "in run_asgi", "run_event_loop")
# "X is not supported" from a person or a program without a log level (a WARNING saying so is
# usually a harmless fallback: "Pin memory is not supported on CPU").
_NOT_SUPPORTED_RE = re.compile(r"(?i)not supported|unsupported|不支持")
# A status field that reports no error ("Error Code : NA", "Single Bit Error Count : 0").
_NO_ERROR_FIELD_RE = re.compile(
    r"(?i)^[\w ()/.-]*\b(?:error|fail\w*)\b[\w ()/.-]*:\s*(?:0|NA|N/A|None|-|OK)?\s*$"
)
_CANN_CODE_GATE = r"E[0-9A-Z]\d{4}(?![A-Za-z0-9_])"
_HARD_FAIL_RE = re.compile(
    r"Segmentation fault|core dumped|\bKilled\b|\bAborted\b|\bFATAL\b|Fatal error"
)

DEFAULT_SETTLE: dict[int | None, tuple[str, ...]] = {
    1: ("npu-smi info", "ascend-deploy versions", "ascend-deploy compat check"),
    2: (
        "grep -A3 quantization_config MODEL_DIR/config.json",
        "ascend-deploy versions",
        "python -m vllm.collect_env",
    ),
    3: ("ascend-deploy procs", "npu-smi info", "ss -ltnp"),
    4: ("npu-smi info", "start once with --enforce-eager", "ascend-deploy versions"),
    5: (
        "npu-smi info",
        "npu-smi info | ascend-deploy plan --model-dir MODEL_DIR --npu-smi-file -",
        "python -m vllm.collect_env",
    ),
    6: (
        "curl -s localhost:8000/metrics | grep -E 'kv_cache_usage|num_preemptions'",
        "npu-smi info",
        "npu-smi info | ascend-deploy plan --model-dir MODEL_DIR --npu-smi-file -",
    ),
    7: (
        "ls MODEL_DIR/quant_model_description.json",
        "grep -A3 quantization_config MODEL_DIR/config.json",
        "python -m vllm.collect_env",
    ),
    8: (
        "grep -E 'num_(attention|key_value)_heads' MODEL_DIR/config.json",
        "npu-smi info | ascend-deploy plan --model-dir MODEL_DIR --npu-smi-file -",
        "python -m vllm.collect_env",
    ),
    None: ("npu-smi info", "ascend-deploy versions", "python -m vllm.collect_env"),
}


def _wrap_proof(reqs: list[list[str]] | None) -> list[list[str]] | None:
    """Anchors of a windowed pattern: up to three long words of its literals, each on its own
    (a wrap inside one word leaves the others whole); the literals when they have no long word."""
    if not reqs:
        return reqs
    words: dict[str, None] = {}
    for req in reqs:
        if len(req) != 1:
            continue
        lit = req[0]
        flag = "(?i)" if lit.startswith("(?i)") else ""
        for w in re.findall(r"[^\W_]{5,}", lit.removeprefix("(?i)")):
            words[flag + w] = None
    best = sorted(words, key=len, reverse=True)[:3]
    return [[w] for w in best] if best else reqs


def _scoped(pattern: str) -> str:
    """A leading global flag group ``(?i)`` turned into a scoped one, for joining patterns."""
    m = re.match(r"^\(\?([aiLmsux]+)\)", pattern)
    return f"(?{m.group(1)}:{pattern[m.end() :]})" if m else pattern


def normalise(line: str, prefix: re.Pattern[str] | None = None) -> tuple[str, str]:
    """(message, level) of one raw log line, with colours and prefixes removed; ``prefix``: the
    log's own line prefix (:func:`.prefix.detect`), removed first, its log level kept."""
    text = _ANSI_RE.sub("", line).replace("\x00", "").rstrip("\r\n")
    if "^[" in text or text.startswith("["):
        text = _BROKEN_ANSI_RE.sub("", text)
    level = "info"
    stated_level = False  # the line carries its own level (a program wrote it)
    if prefix is not None:
        m = prefix.match(text)
        if m:
            lv = _prefix.LEVEL_RE.search(m.group(0))
            if lv:
                level = _LEVELS.get(lv.group("level"), "info")
                stated_level = True
            text = text[m.end() :]
    boxed = False
    for _ in range(8):  # prefixes nest: bars, timestamp, compose, process, rank, glog, plog
        before = text
        m = _LEAD_BAR_RE.match(text)
        if m:
            boxed = boxed or any(ch in m.group(0) for ch in "│┃║")
            text = text[m.end() :]
        text = text.lstrip(" \t`")
        for rx in (
            _DOCKER_TS_RE,
            _PY_TS_RE,
            _ANY_TS_RE,
            _JOURNAL_RE,
            _COMPOSE_RE,
            _PROC_RE,
            _PID_RE,
        ):
            text = rx.sub("", text, count=1)
        text = _HOST_STREAM_RE.sub("", text, count=1)
        m = _GLOG_RE.match(text) or _PLOG_RE.match(text) or _BAR_LEVEL_RE.match(text)
        if m:
            level = _LEVELS.get(m.group(1), level)
            stated_level = True
            text = text[m.end() :]
        m = _LOGGER_RE.match(text)
        if m:
            hdr = next(v for v in m.groups() if v)
            level = _LEVELS.get(hdr, "info")
            stated_level = True
            text = text[m.end() :]
        if text == before:
            break
    if boxed:
        text = _TRAIL_BOX_RE.sub("", text)
    m = _VLLM_HDR_RE.match(text) or _UVICORN_RE.match(text) or _PYLEVEL_RE.match(text)
    if m:
        hdr = m.group("level") or m.groupdict().get("level2")
        level = _LEVELS.get(hdr or "", "info")
        stated_level = True
        text = text[m.end() :]
    msg = text.strip()
    if _EXC_RE.match(msg):
        level = "exception"
    elif level != "error" and (_CANN_CODE_RE.search(msg) or msg.startswith("ERROR")):
        level = "error"
    elif (level == "error" or not stated_level) and _EXC_INLINE_RE.search(msg):
        level = "exception"
    return msg, level


def exception_in(msg: str) -> re.Match[str] | None:
    """The exception (type and message) a normalised line holds, at its start or quoted inside."""
    return _EXC_RE.match(msg) or _EXC_INLINE_RE.search(msg)


def _excerpt(text: str) -> str:
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 3] + "..."


@dataclass
class _Hit:
    rule: Rule
    first: tuple[int, str] | None = None
    last: deque = field(default_factory=lambda: deque(maxlen=MAX_EVIDENCE - 1))
    count: int = 0
    level: str = "info"
    last_line: int = 0
    context: dict[str, tuple[int, str]] = field(default_factory=dict)
    peak: float | None = None
    bonus: int = 0  # specificity of a code/exception entry above the rule's own

    def add(self, lineno: int, msg: str, level: str, value: float | None) -> None:
        self.count += 1
        self.last_line = lineno
        if LEVEL_WEIGHT[level] > LEVEL_WEIGHT[self.level]:
            self.level = level
        if value is not None:
            # Threshold rules keep the worst line (highest value) as the first evidence.
            if self.peak is None or value > self.peak:
                self.peak = value
                self.first = (lineno, _excerpt(msg))
            return
        if self.first is None:
            self.first = (lineno, _excerpt(msg))
        elif self.first[1] != _excerpt(msg):
            self.last.append((lineno, _excerpt(msg)))

    @property
    def score(self) -> int:
        return max(self.rule.specificity, self.bonus) + LEVEL_WEIGHT[self.level]

    def evidence(self) -> list[str]:
        seen, out = set(), []
        items = [self.first, *self.last] if self.first else list(self.last)
        items += sorted(self.context.values())
        for _n, text in items:
            if text not in seen:
                seen.add(text)
                out.append(text)
        return out[: MAX_EVIDENCE + len(self.context)]


def _json_unescape(text: str) -> str:
    try:
        return json.loads(f'"{text}"')
    except ValueError:
        return text


# Prefilter structures per rule set (building them costs about 30 ms), keyed by id(ruleset).
_BUILT: dict[int, tuple[RuleSet, dict[str, Any]]] = {}


class _GateSet:
    """Prefilter for one set of literals: one regex per start character of their anchors (each
    has a literal prefix, which `re` searches at memchr speed; one alternation of everything is
    several times slower). ``lower``: the literals are lower case and searched in the lower-cased
    block (case-insensitive patterns). Gates of non-ASCII anchors (Chinese messages) run only on
    blocks that are not ASCII."""

    def __init__(
        self,
        by_literal: dict[str, set[int]],
        fallback_ids: frozenset[int],
        extra: list[str],
        lower: bool = False,
        targeted: list[tuple[re.Pattern[str], frozenset[int]]] | None = None,
    ):
        anchors: dict[str, set[int]] = {}
        for lit, anchor in choose_anchors(by_literal).items():
            anchors.setdefault(anchor, set()).update(by_literal[lit])
        # An anchor found also stands for the anchors that are its prefixes (the trie is greedy).
        keys = sorted(anchors)
        self.ids = {
            k: frozenset(i for j in keys if k.startswith(j) for i in anchors[j]) for k in keys
        }
        self.fallback_ids = fallback_ids
        self.lower = lower
        self.targeted = list(targeted or ())
        groups: dict[str, list[str]] = {}
        for k in keys:
            groups.setdefault(k[0], []).append(k[1:])
        gates = [(c, re.compile(re.escape(c) + trie_regex(rest))) for c, rest in groups.items()]
        self.gates = [rx for c, rx in gates if c.isascii()]
        self.gates += [re.compile(f, re.M) for f in extra]
        self.wide = [rx for c, rx in gates if not c.isascii()]
        # finditer does not report an anchor that starts inside another match of the same gate:
        # for each anchor, the same-gate anchors that can start inside it, by offset.
        self.inner: dict[str, list[tuple[int, str, bool]]] = {}
        for x in keys:
            inner = []
            for o in range(1, len(x)):
                if x[o] != x[0]:
                    continue  # other start characters are found by their own gate
                for z in groups.get(x[o], ()):
                    z = x[o] + z
                    if x[o:].startswith(z):
                        inner.append((o, z, True))
                    elif z.startswith(x[o:]):
                        inner.append((o, z, False))
            if inner:
                self.inner[x] = inner

    def scan(self, text: str, cand: dict[int, frozenset[int]]) -> None:
        """Add ``line index -> entry ids`` for every anchor found in ``text``."""
        if not self.gates and not self.wide and not self.targeted:
            return
        if self.lower:
            text = text.lower()
        for rx, tids in self.targeted:  # gated patterns: the line of each match
            pos, line = 0, 0
            for m in rx.finditer(text):
                line += text.count("\n", pos, m.start())
                pos = m.start()
                got = cand.get(line)
                cand[line] = tids if got is None else got | tids
        found: list[tuple[int, str]] = []
        inner = self.inner
        for rx in self.gates if text.isascii() else self.gates + self.wide:
            for m in rx.finditer(text):
                start, anchor = m.start(), m.group(0)
                found.append((start, anchor))
                for o, z, certain in inner.get(anchor, ()):
                    if certain or text.startswith(z, start + o):
                        found.append((start + o, z))
        found.sort()
        ids_of, fallback = self.ids, self.fallback_ids
        line_i, counted = 0, 0
        for start, anchor in found:
            line_i += text.count("\n", counted, start)
            counted = start
            ids = ids_of.get(anchor, fallback)
            got = cand.get(line_i)
            cand[line_i] = ids if got is None or got is ids else got | ids


_DEFAULT_RULES: list[Any] = [None, None]  # (mtime, RuleSet) of the packaged rules file


def default_rules() -> RuleSet:
    """The packaged rules, parsed once per process (again when the file changes)."""
    mtime = os.stat(RULES_PATH).st_mtime_ns
    if _DEFAULT_RULES[0] != mtime:
        _DEFAULT_RULES[:] = [mtime, load_rules()]
    return _DEFAULT_RULES[1]


class Diagnoser:
    """Feed text with :meth:`feed_text` / :meth:`feed_stream` (or lines with :meth:`feed`);
    :meth:`result` gives the findings."""

    def __init__(
        self,
        rules: RuleSet | list[Rule] | None = None,
        prefilter: bool = True,
        model: Model | bool | None = True,
    ):
        """``prefilter=False`` looks at every line with every pattern (slow; the reference the
        tests compare the prefilter with). ``model``: the learned stage (True: the packaged
        model when there is one; None or False: rules only)."""
        self.prefilter = prefilter
        self.model: Model | None = default_model() if model is True else (model or None)
        self._head: list[tuple[int, str]] = []
        self._seen_head: list[tuple[int, str]] = []
        self._seen_tail: deque[tuple[int, str]] = deque(maxlen=SEEN_TAIL)
        self._first_failure: int | None = None
        self._traceback = False
        self._bug_title = False
        self._proposal = False  # a documentation/feature/RFC thread: its prose is no report
        if rules is None:
            rules = default_rules()
        self.ruleset = rules if isinstance(rules, RuleSet) else RuleSet(tuple(rules))
        self.rules = list(self.ruleset.rules)
        self._by_id = self.ruleset.by_id()
        self.hits: dict[str, _Hit] = {}
        self.lines = 0
        self.bytes = 0
        self.last_errors: deque[str] = deque(maxlen=LAST_ERRORS)
        self._failures: deque[tuple[int, str, str | None]] = deque(maxlen=GUESS_LINES)
        self._strong_failure = False  # an exception, ERROR line, code or traceback was seen
        self._stated_failure = False  # prose without a log level says it failed
        self._last_exc: tuple[int, str, str] | None = None
        self._guess_codes: dict[str, tuple[CodeEntry, int, str]] = {}
        self._guess_exc: list[tuple[Any, int, str, bool]] = []
        self._ctx: dict[str, dict[str, tuple[int, str]]] = {}
        self._cleared: set[str] = set()  # rules withdrawn by a healthy sequel (cleared_by)
        self._served_at: int | None = None  # first line showing a request was served
        self._ready_at: int | None = None  # first line showing the server was up
        self._served_line = ""
        self._request_ctx = False  # a request handler is on the failing stack
        self._failure_specials: set[int] = set()
        self._prefix: re.Pattern[str] | None = None  # the log's own line prefix
        self._prefix_open = True  # still looking for it (in the first lines)
        # (line, finished, text) of graph capture lines, the last ones
        self._capture: deque[tuple[int, bool, str]] = deque(maxlen=CAPTURE_EVENTS)

        self._context = [(r, c) for r in self.rules for c in r.context]
        self._special_all = [
            (r, p)
            for r in self.rules
            for p in r.patterns
            if p.window > 1 or p.exception is not None
        ]
        self.window = max([p.window for _r, p in self._special_all] or [1])
        built = _BUILT.get(id(self.ruleset))
        if built is None or built[0] is not self.ruleset:
            self._build_gate()
            built = _BUILT[id(self.ruleset)] = (self.ruleset, self._built_state())
            while len(_BUILT) > 8:  # a few rule sets at most (tests build their own)
                del _BUILT[next(iter(_BUILT))]
        for name, value in built[1].items():
            setattr(self, name, value)
        codes = self.ruleset.codes
        self._code_exact = {(c.scheme, c.key): c for c in codes if not c.family}
        self._code_family = sorted((c for c in codes if c.family), key=lambda c: -len(c.key))
        self._code_names = {c.name: c for c in codes if c.name}
        self._fed_upto = 0
        self._tail: list[tuple[int, str]] = []
        self._forward = 0
        self._buf: deque[tuple[int, str, str, frozenset[int]]] = deque(maxlen=self.window)

    # --- prefilter ------------------------------------------------------------------------

    def _build_gate(self) -> None:
        """One regex over whole blocks: anchors (literals every match of a pattern contains,
        starting at a rare character) factored into a trie, plus the failure words and codes.
        Each anchor maps to the entries (patterns, context patterns, failure handling) to try."""
        # entry: (kind, rule, pattern | context regex, precheck on the raw line or None)
        self._entries: list[tuple[str, Rule | None, Any, re.Pattern[str] | None]] = [
            ("failure", None, None, None)
        ]
        self._must: dict[int, tuple[bool, tuple[tuple[str, ...], ...]]] = {}
        self._plans: dict[frozenset[int], tuple[bool, tuple]] = {}
        by_literal: dict[str, set[int]] = {}
        by_literal_ci: dict[str, set[int]] = {}
        fallback: list[str] = []
        fallback_ids: set[int] = {0}
        covered: set[int] = set()
        gated: list[tuple[re.Pattern[str], frozenset[int]]] = []

        def add(
            kind: str,
            rule: Rule,
            obj: Any,
            src: str,
            window: bool,
            mn: float | None,
            gate: re.Pattern[str] | None = None,
        ) -> None:
            anchored = "^" in src.replace("\\^", "").replace("[^", "") or src.endswith("$")
            pre = None
            if kind != "special" and not anchored:
                trig = value_trigger(src, mn) if mn is not None else None
                pre = re.compile(_scoped(strip_groups(trig or src)))
            idx = len(self._entries)
            self._entries.append((kind, rule, obj, pre))
            # Literals the raw line must hold before the regex is tried (cheap `in` tests).
            must = requirements(src) if pre is not None else None
            if must:
                ci = any(a.startswith("(?i)") for req in must for a in req)
                lits = [tuple(a.removeprefix("(?i)").lower() if ci else a for a in r) for r in must]
                self._must[idx] = (ci, tuple(lits))
            if gate is not None:  # its own regex over the lower-cased block, not an anchor
                gated.append((gate, frozenset({idx})))
                return
            groups = cheapest_requirements(src) or cheapest_requirements(src, minimum=3)
            if window:
                groups = _wrap_proof(requirements(src) or groups)
            if not groups:
                fallback.append(_scoped(strip_groups(src.lstrip("^"))))
                fallback_ids.add(idx)
                return
            for alts in groups:
                if all(any(f in a for f in _FAILURE_ANCHORS) for a in alts):
                    covered.add(idx)  # every match has a failure word: no anchor of its own
                    return
            for alts in groups:
                for a in alts:
                    if a.startswith("(?i)"):  # searched in the lower-cased block
                        by_literal_ci.setdefault(a[4:].lower(), set()).add(idx)
                    else:
                        by_literal.setdefault(a, set()).add(idx)

        for r in self.rules:
            for p in r.patterns:
                special = p.window > 1 or p.exception is not None
                if p.exception is not None and not p.regex.pattern:
                    self._entries.append(("special", r, p, None))
                    fallback_ids.add(len(self._entries) - 1)  # exception lines: failure words
                    self._failure_specials.add(len(self._entries) - 1)
                    continue
                add(
                    "special" if special else "plain",
                    r,
                    p,
                    p.regex.pattern,
                    special,
                    p.min_value,
                    p.gate,
                )
            for c in r.context:
                add("context", r, c, c.pattern, False, None)
            for c in r.cleared_by:
                add("clear", r, c, c.pattern, False, None)
        for word in _FAILURE_ANCHORS:
            by_literal.setdefault(word, set()).add(0)
        self._failure_specials |= covered
        self._fallback_ids = frozenset(fallback_ids | self._failure_specials)
        # All literals are searched in the lower-cased block (one pass for both kinds; a
        # case-sensitive literal found in another case only costs its line's exact check).
        for lit, ids in by_literal.items():
            by_literal_ci.setdefault(lit.lower(), set()).update(ids)
        self._gate_sets = [
            _GateSet(by_literal_ci, self._fallback_ids, [], lower=True, targeted=gated),
            # Patterns without a literal; CANN codes as every scheme reads them (upper case).
            _GateSet({}, self._fallback_ids, [*fallback, _CANN_CODE_GATE]),
        ]

    def _built_state(self) -> dict[str, Any]:
        """What :meth:`_build_gate` made; the same for every Diagnoser of one rule set."""
        names = ("_entries", "_must", "_plans", "_failure_specials", "_fallback_ids", "_gate_sets")
        return {n: getattr(self, n) for n in names}

    def _plan(self, ids: frozenset[int]) -> tuple[bool, tuple]:
        """(widen, checks) for a candidate line holding the anchors of ``ids``: windowed
        patterns widen it to its neighbours; ``checks`` (literals that must be on the raw line,
        then the regex) decide whether it is looked at; no checks = always looked at."""
        kinds = {self._entries[e][0] for e in ids}
        widen = "special" in kinds
        if widen or 0 in ids or any(self._entries[e][3] is None for e in ids):
            return widen, ()
        checks = []
        for e in sorted(ids):
            ci, must = self._must.get(e, (False, ()))
            checks.append((ci, must, self._entries[e][3]))
        return False, tuple(checks)

    # --- input ----------------------------------------------------------------------------

    def feed(self, raw: str) -> None:
        """One raw line (kept for callers that read line by line)."""
        self.feed_text(raw if raw.endswith("\n") else raw + "\n")

    def feed_text(self, text: str) -> None:
        """A block of complete lines (the last one may lack its newline only at the end)."""
        if not text:
            return
        # CR stays in the lines (CRLF ends, progress-bar rewrites): only looked-at lines pay for it.
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        base = self.lines
        self.lines += len(lines)
        if self._prefix_open:
            self._prefix = _prefix.detect(lines, normalise)
            self._prefix_open = self._prefix is None and self.lines < PREFIX_LINES
        if base < HEAD_LINES:
            for i, raw in enumerate(lines[: HEAD_LINES - base]):
                msg = normalise(raw, self._prefix)[0]
                if msg:
                    self._head.append((base + i + 1, _excerpt(msg)))
                    if _PROPOSAL_TITLE_RE.match(msg):
                        self._proposal = True
        if self._served_at is None:
            self._scan_served(text, base)
        if self._ready_at is None:
            i = text.find(_READY_MARKER)
            if i >= 0:
                self._ready_at = base + text.count("\n", 0, i) + 1
        if "aptur" in text:
            self._scan_capture(text, base)
        cand: dict[int, frozenset[int]] = {}
        if self.prefilter:
            for gs in self._gate_sets:
                gs.scan(text, cand)
        else:
            every = frozenset(range(len(self._entries)))
            cand = dict.fromkeys(range(len(lines)), every)
        w = self.window
        need: dict[int, frozenset[int]] = {}
        if self._forward:
            for i in range(min(self._forward, len(lines))):
                need[i] = frozenset()
            self._forward = max(0, self._forward - len(lines))
        back = False
        plans = self._plans
        for i, ids in cand.items():
            plan = plans.get(ids)
            if plan is None:
                plan = plans[ids] = self._plan(ids)
            widen, checks = plan
            if checks:  # keep the line if one of its patterns can match the raw line
                raw = lines[i]
                low = None
                for ci, must, pre in checks:
                    if must:
                        if ci:
                            if low is None:
                                low = raw.lower()
                            hay = low
                        else:
                            hay = raw
                        missing = False
                        for alts in must:  # loops, not any()/all(): this runs for most lines
                            for a in alts:
                                if a in hay:
                                    break
                            else:
                                missing = True
                                break
                        if missing:
                            continue
                    if pre.search(raw):
                        break
                else:
                    continue
            need[i] = ids
            if widen and w > 1:
                lo, hi = i - w + 1, i + w - 1
                back = back or lo < 0
                if hi >= len(lines):
                    self._forward = max(self._forward, hi - len(lines) + 1)
                for j in range(max(lo, 0), min(hi, len(lines) - 1) + 1):
                    need.setdefault(j, frozenset())
        if back:
            for n, raw in self._tail:
                if n > self._fed_upto:
                    self._line(n, raw, frozenset())
        for i in sorted(need):
            self._line(base + i + 1, lines[i], need[i])
        if self._strong_failure and not self._request_ctx:  # only blocks with a failure
            self._request_ctx = any(m in text for m in _REQUEST_CTX_MARKERS)
        if w > 1:
            first = max(0, len(lines) - w + 1)
            self._tail = [(base + i + 1, lines[i]) for i in range(first, len(lines))]

    def _scan_served(self, text: str, base: int) -> None:
        """Record the first line that shows a served request (time-aware pitfall 5 vs 6)."""
        best: tuple[int, str] | None = None
        for marker in _SERVED_MARKERS:
            i = text.find(marker)
            tries = 0
            while i >= 0 and tries < 64:
                tries += 1
                start = text.rfind("\n", 0, i) + 1
                if best is not None and start >= best[0]:
                    break
                end = text.find("\n", i)
                line = text[start : end if end >= 0 else len(text)]
                ok = (
                    "POST" in line
                    if marker.startswith("HTTP")
                    else bool(_SERVED_RUNNING_RE.search(line))
                    if marker.startswith("Avg")
                    else True
                )
                if ok:
                    best = (start, line)
                    break
                i = text.find(marker, i + len(marker))
        if best is not None:
            self._served_at = base + text.count("\n", 0, best[0]) + 1
            self._served_line = _excerpt(normalise(best[1], self._prefix)[0])

    def _scan_capture(self, text: str, base: int) -> None:
        """Record the graph capture lines of a block (start or finished)."""
        pos = 0
        n = base
        for m in _CAPTURE_RE.finditer(text):
            if m.start() < pos:  # a second marker on a line already recorded
                continue
            n += text.count("\n", pos, m.start())
            start = text.rfind("\n", 0, m.start()) + 1
            end = text.find("\n", m.start())
            end = len(text) if end < 0 else end
            line = normalise(text[start:end], self._prefix)[0]
            self._capture.append((n + 1, m.group("end") is not None, _excerpt(line)))
            n += text.count("\n", m.start(), end)
            pos = end

    def feed_stream(
        self,
        stream: IO[bytes],
        name: str = "log",
        max_bytes: int = DEFAULT_MAX_MB << 20,
        max_seconds: float = DEFAULT_MAX_SECONDS,
    ) -> None:
        """Read a binary stream in blocks; InputError when it exceeds the size or time cap."""
        carry = b""
        started = time.monotonic()
        while True:
            chunk = stream.read(BLOCK)
            if not chunk:
                break
            self.bytes += len(chunk)
            if self.bytes > max_bytes:
                raise InputError(
                    f"{name}: stopped after {self.bytes >> 20} MiB of log text (limit "
                    f"{max_bytes >> 20} MiB, --max-mb); a compressed file that expands this far is "
                    "not a service log. Raise --max-mb, or diagnose the end of it: "
                    "zcat -f FILE | tail -n 200000 | ascend-deploy diagnose -"
                )
            if time.monotonic() - started > max_seconds:
                raise InputError(
                    f"{name}: stopped after {max_seconds:g} s and {self.bytes >> 20} MiB "
                    "(--max-seconds); "
                    "raise --max-seconds or diagnose the end of the log: tail -n 200000 FILE | "
                    "ascend-deploy diagnose -"
                )
            data = carry + chunk
            cut = data.rfind(b"\n") + 1
            if cut == 0 and len(data) >= MAX_LINE:
                cut = len(data) - len(data) % MAX_LINE
                data = (
                    b"\n".join(data[i : i + MAX_LINE] for i in range(0, cut, MAX_LINE))
                    + b"\n"
                    + data[cut:]
                )
                cut = data.rfind(b"\n") + 1
            carry = data[cut:]
            if cut:
                self.feed_text(data[:cut].decode("utf-8", errors="replace"))
        if carry:
            self.feed_text(carry.decode("utf-8", errors="replace"))

    # --- matching -------------------------------------------------------------------------

    def _line(self, n: int, raw: str, ids: frozenset[int]) -> None:
        if "\r" in raw:
            parts = [p for p in raw.split("\r") if p]
            if len(parts) > 1:  # a line rewritten with CR (progress bar): each state on its own
                for part in parts:
                    self._line(n, part, ids)
                return
            raw = parts[0] if parts else ""
        if len(raw) > MAX_LINE:
            for i in range(0, len(raw), MAX_LINE):
                self._piece(n, raw[i : i + MAX_LINE], ids | {0})
        else:
            self._piece(n, raw, ids)
        self._fed_upto = n

    def _piece(self, n: int, raw: str, ids: frozenset[int]) -> None:
        msg, level = normalise(raw, self._prefix)
        buf = self._buf
        if buf and buf[-1][0] not in (n, n - 1):
            buf.clear()
        buf.append((n, msg, level, ids))
        if not msg:
            return
        if (
            self._proposal
            and level == "info"
            and not _LEVEL_WORD_RE.search(raw[:80])
            and not _EXC_RE.match(msg)
            and not msg.startswith(("Traceback", "File ", "raise ", "During handling"))
        ):
            return  # a proposal's prose ("... when memory is insufficient") reports nothing
        seen = (n, _excerpt(msg))
        if len(self._seen_head) < SEEN_HEAD:
            self._seen_head.append(seen)
        else:
            self._seen_tail.append(seen)
        entries = self._entries
        if 0 in ids:  # a failure word, or a piece of an over-long line: try everything
            ids = ids | self._failure_specials
            if len(raw) >= MAX_LINE:
                ids = frozenset(range(len(entries)))
        for e in sorted(ids):
            kind, rule, obj, _pre = entries[e]
            if kind == "plain":
                self._match_pattern(rule, obj, n, msg, level)  # type: ignore[arg-type]
            elif kind == "context" and obj.search(msg):
                self._ctx.setdefault(rule.id, {})[obj.pattern] = (n, _excerpt(msg))  # type: ignore[union-attr]
            elif kind == "clear" and obj.search(msg):  # type: ignore[union-attr]
                self._cleared.add(rule.id)  # type: ignore[union-attr]
        specials = {e for item in buf for e in item[3] if entries[e][0] == "special"}
        for e in sorted(specials):
            _k, rule, pat, _pre = entries[e]
            self._match_special(rule, pat, n, level)  # type: ignore[arg-type]
        harmless = self.ruleset.harmless
        if harmless is not None and harmless.search(msg):
            return  # an ERROR line upstream calls harmless: no failure evidence
        exc = _EXC_RE.match(msg)
        if exc is None and level == "exception":
            exc = _EXC_INLINE_RE.search(msg)
        failure = (level == "error") or (
            exc is not None and not exc.group("type").endswith("Warning")
        )
        if level in ("exception", "error"):
            self.last_errors.append(_excerpt(msg))
        failure = self._codes(n, msg, level) or failure
        if exc is not None and exc.group("msg") is not None:
            self._last_exc = (n, exc.group("type"), msg)
            self._exceptions(n, msg, level, exc.group("type"), exc.group("msg") or "")
        if msg.startswith("Traceback"):
            self._traceback = True
        if failure or msg.startswith("Traceback") or _HARD_FAIL_RE.search(msg):
            if self._first_failure is None:
                self._first_failure = n
            self._strong_failure = True
            self._failures.append((n, msg, exc.group("type") if exc else None))
        elif (  # prose: "fails", "启动失败" (weak evidence)
            _FAIL_WORDS_RE.search(msg)
            or (_NOT_SUPPORTED_RE.search(msg) and not _LEVEL_WORD_RE.search(raw))
        ) and not (_NO_ERROR_FIELD_RE.match(msg.strip()) or _TEMPLATE_HEADING_RE.match(msg)):
            self._failures.append((n, msg, None))
            # A person's statement (no log level on the line) that it failed is a failure; a
            # program's INFO/WARNING line saying "failed to import x, falling back" is not.
            if not _LEVEL_WORD_RE.search(raw[:80]):
                self._stated_failure = True
        elif _BUG_TITLE_RE.match(msg):  # "[Bug]: <what failed>" with no failure word
            self._failures.append((n, msg, None))
            self._stated_failure = True
        if _BUG_TITLE_RE.match(msg):
            self._bug_title = True

    def _hit(self, rule: Rule) -> _Hit:
        hit = self.hits.get(rule.id)
        if hit is None:
            hit = self.hits[rule.id] = _Hit(rule)
        return hit

    @staticmethod
    def _accept(pat: Pattern, m: re.Match[str]) -> tuple[bool, float | None]:
        value = None
        if pat.min_value is not None:
            try:
                value = float(m.group("value"))
            except (IndexError, TypeError, ValueError):
                return False, None
            if value < pat.min_value:
                return False, None
        if pat.check == "garbage" and not garbage.detect(_json_unescape(m.group("value"))):
            return False, None
        return True, value

    def _match_pattern(self, rule: Rule, pat: Pattern, n: int, msg: str, level: str) -> None:
        m = pat.regex.search(msg)
        if m:
            ok, value = self._accept(pat, m)
            if ok:
                self._hit(rule).add(n, msg, level, value)

    def _match_special(self, rule: Rule, pat: Pattern, n: int, level: str) -> None:
        items = [(n_, m_, l_) for n_, m_, l_, _ids in list(self._buf)[-pat.window :]]
        starts = range(len(items))
        if pat.exception is not None:
            starts = [j for j in starts if self._exc_type_ok(pat, items[j][1])]
        for j in starts:
            seg = [msg for _n, msg, _l in items[j:]]
            if pat.exception is not None:
                seg[0] = _EXC_RE.match(seg[0]).group("msg") or ""  # type: ignore[union-attr]
            for sep in (" ", ""):
                text = sep.join(seg)
                offset = len(text) - len(seg[-1])
                for m in pat.regex.finditer(text):
                    if len(seg) > 1 and m.end() <= offset:
                        continue
                    ok, value = self._accept(pat, m)
                    if not ok:
                        continue
                    lvl = max((lv for _n, _m, lv in items[j:]), key=LEVEL_WEIGHT.__getitem__)
                    shown = (
                        " ".join(msg for _n, msg, _l in items[j:]) if len(seg) > 1 else items[j][1]
                    )
                    self._hit(rule).add(
                        n, shown, max(lvl, level, key=LEVEL_WEIGHT.__getitem__), value
                    )
                    return
            if pat.exception is None:
                break  # a plain windowed pattern is tried on the whole window only

    @staticmethod
    def _exc_type_ok(pat: Pattern, msg: str) -> bool:
        m = _EXC_RE.match(msg)
        if m is None or m.group("msg") is None or pat.exception is None:
            return False
        name = m.group("type")
        return bool(pat.exception.match(name) or pat.exception.match(name.rsplit(".", 1)[-1]))

    def _lookup(self, scheme: str, code: str) -> CodeEntry | None:
        entry = self._code_exact.get((scheme, code))
        if entry is None:
            entry = next(
                (c for c in self._code_family if c.scheme == scheme and code.startswith(c.key)),
                None,
            )
        return entry

    def _codes(self, n: int, msg: str, level: str) -> bool:
        found = False
        seen: set[str] = set()
        for scheme, rx in CODE_RES.items():
            if scheme == "hccl" and "ccl" not in msg.lower():
                continue
            for m in rx.finditer(msg):
                code = m.group(1).upper()
                if scheme == "acl" and code in seen:
                    continue
                found = found or scheme != "hccl" or level == "error"
                seen.add(code)
                entry = self._lookup(scheme, code)
                if entry is not None:
                    self._code_hit(entry, code, n, msg, level)
        for m in _CODE_NAME_RE.finditer(msg):
            found = True
            entry = self._code_names.get(m.group(1))
            if entry is not None and entry.key not in seen:
                self._code_hit(entry, m.group(1), n, msg, level)
        return found

    def _code_hit(self, entry: CodeEntry, code: str, n: int, msg: str, level: str) -> None:
        note = f"{code}: {entry.meaning} ({entry.scheme.upper()} code)" if entry.meaning else code
        if entry.rule is None:
            return
        if entry.guess:
            self._guess_codes.setdefault(code, (entry, n, _excerpt(msg)))
            return
        hit = self._hit(self._by_id[entry.rule])
        hit.add(n, msg, "error" if level == "info" else level, None)
        hit.bonus = max(hit.bonus, entry.specificity)
        hit.context[f"code:{code}"] = (n, _excerpt(note))

    def _exceptions(self, n: int, msg: str, level: str, etype: str, emsg: str) -> None:
        short = etype.rsplit(".", 1)[-1]
        for entry in self.ruleset.exceptions:
            if not (entry.type.match(etype) or entry.type.match(short)):
                continue
            if entry.message is not None and not entry.message.search(emsg):
                continue
            if entry.rule is None:
                continue
            if entry.guess:
                self._guess_exc.append((entry, n, _excerpt(msg), True))
                continue
            hit = self._hit(self._by_id[entry.rule])
            hit.add(n, msg, level, None)
            hit.bonus = max(hit.bonus, entry.specificity)
            return

    # --- result ---------------------------------------------------------------------------

    def _finding(self, h: _Hit) -> dict[str, Any]:
        return {
            "pitfall": h.rule.pitfall,
            "rule": h.rule.id,
            "title": h.rule.title,
            "evidence": h.evidence(),
            "fix": h.rule.fix,
            "explanation": h.rule.explanation,
            "variable": h.rule.variable,
            "kind": h.rule.kind,
            "matches": h.count,
            "score": h.score,
            "guess": False,
        }

    def _guess(self) -> dict[str, Any] | None:
        """The best class by weak evidence, when the log shows a failure and no rule matched."""
        fails = list(self._failures)
        if not fails and not self._guess_codes:
            return None
        strong = self._strong_failure or self._stated_failure or bool(self._guess_codes)
        scores: dict[str, float] = {}
        support: dict[str, list[tuple[int, str]]] = {}

        def add(rid: str, points: float, n: int, line: str) -> None:
            scores[rid] = scores.get(rid, 0.0) + points
            support.setdefault(rid, []).append((n, _excerpt(line)))

        for code, (entry, n, line) in self._guess_codes.items():
            add(entry.rule, 2.0, n, f"{line}  [{code}: {entry.meaning}]" if entry.meaning else line)
        last_n = self._last_exc[0] if self._last_exc else -1
        for entry, n, line, _ in self._guess_exc:
            add(entry.rule, 3.0 if n == last_n else 1.0, n, line)
        for rule in self.rules:
            for kw in rule.keywords:
                for n, msg, _t in reversed(fails):
                    if kw.search(msg):
                        add(rule.id, 1.0, n, msg)
                        break
        settle_default = DEFAULT_SETTLE[None]
        if not strong:  # warnings and program lines saying "failed to X, falling back"
            return None
        if not scores:
            evidence = [m for _n, m, _t in fails[-MAX_EVIDENCE:]]
            return {
                "pitfall": None,
                "rule": "unclassified",
                "title": "Unclassified failure: no rule, code or keyword points to a known class",
                "evidence": [_excerpt(e) for e in evidence],
                "fix": "Run the commands below and compare driver, CANN, torch_npu and vLLM "
                "versions with "
                "the release's compatibility table; read the first error of the log.",
                "explanation": "The log shows errors but none of them names a known failure class.",
                "variable": None,
                "kind": "guess",
                "matches": 0,
                "score": 0,
                "guess": True,
                "confidence": 0.0,
                "settle": list(settle_default),
            }
        total = sum(scores.values())
        rid = max(scores, key=lambda r: (scores[r], self._by_id[r].specificity))
        rule = self._by_id[rid]
        lines = sorted(dict.fromkeys(support[rid]), key=lambda t: t[0])
        return {
            "pitfall": rule.pitfall,
            "rule": rule.id,
            "title": rule.title,
            "evidence": [t for _n, t in lines][-MAX_EVIDENCE:],
            "fix": rule.fix,
            "explanation": rule.explanation,
            "variable": rule.variable,
            "kind": "guess",
            "matches": len(lines),
            "score": round(scores[rid], 1),
            "guess": True,
            "confidence": round(min(0.9, scores[rid] / (total + 2.0)), 2),
            "settle": list(rule.settle or DEFAULT_SETTLE.get(rule.pitfall, settle_default)),
        }

    def _under_load(self) -> None:
        """An out-of-memory after requests were served (or raised inside a request handler) is
        the load outgrowing the memory (pitfall 6), not a start-up that does not fit (5)."""
        oom = self.hits.get("npu_out_of_memory")
        rule = self._by_id.get("oom_under_load")
        if oom is None or rule is None or oom.first is None:
            return
        served_first = self._served_at is not None and self._served_at < oom.first[0]
        if not (served_first or self._request_ctx):
            return
        hit = self._hit(rule)
        hit.first, hit.count, hit.level = oom.first, oom.count, oom.level
        hit.last, hit.last_line, hit.bonus = oom.last, oom.last_line, oom.bonus
        if served_first:
            hit.context["served"] = (self._served_at or 0, f"served before: {self._served_line}")
        del self.hits["npu_out_of_memory"]

    def _in_capture(self) -> None:
        """The runtime's "Failed to apply for memory" while ACL graphs are being captured (a
        capture line before it, no "capturing finished" between) is the capture failing
        (pitfall 4), not the model not fitting (5)."""
        hit = self.hits.get("npu_memory_apply_failed")
        rule = self._by_id.get("graph_capture_failed")
        if hit is None or rule is None or hit.first is None:
            return
        at = hit.first[0]
        before = [ev for ev in self._capture if ev[0] <= at]
        if not before or before[-1][1]:
            return
        target = self.hits.get(rule.id)
        if target is None:
            target = self._hit(rule)
            target.first, target.count, target.level = hit.first, hit.count, hit.level
            target.last, target.last_line, target.bonus = hit.last, hit.last_line, hit.bonus
        target.context["capture"] = (before[-1][0], f"during graph capture: {before[-1][2]}")
        del self.hits["npu_memory_apply_failed"]

    def _rank(self) -> list[_Hit]:
        """Causes before consequences, then score; a rule that defers to another matching rule
        ranks just below it."""
        hits = [h for h in self.hits.values() if h.rule.id not in self._cleared]

        def score(h: _Hit) -> int:
            above = [self.hits[d].score for d in h.rule.defer_to if d in self.hits]
            return min(h.score, min(above) - 1) if above else h.score

        return sorted(
            hits, key=lambda h: (h.rule.kind == "cause", score(h), h.last_line), reverse=True
        )

    def result(self) -> dict[str, Any]:
        for rid, ctx in self._ctx.items():
            if rid in self.hits:
                self.hits[rid].context.update(ctx)
        self._under_load()
        self._in_capture()
        ranked = self._rank()
        findings = [self._finding(h) for h in ranked]
        out: dict[str, Any] = {"findings": findings, "lines": self.lines, "stage": None}
        guess = None if findings else self._guess()
        if not findings:
            out["last_errors"] = list(self.last_errors)
        if self.model is not None and (findings or guess is not None):
            self._learned(out, ranked, guess)
        else:
            if guess is not None:
                findings.append(guess)
            if findings:
                out["stage"] = "rules" if not findings[0].get("guess") else "guess"
            for f in findings:
                f.setdefault("stage", out["stage"])
        return out

    # --- the learned stage ----------------------------------------------------------------

    def up_before_failure(self) -> bool:
        """The server was up (or had served a request) before the first failure line."""
        ups = [n for n in (self._ready_at, self._served_at) if n is not None]
        return bool(ups) and self._first_failure is not None and min(ups) < self._first_failure

    def shapes(self) -> list[str]:
        """Shape flags of the log for the learned stage."""
        out = []
        if self._served_at is not None:
            out.append("served")
            if self._first_failure is not None and self._served_at < self._first_failure:
                out.append("served_before_failure")
        if self._request_ctx:
            out.append("request_ctx")
        if self._traceback:
            out.append("traceback")
        if self._bug_title:
            out.append("bug_title")
        if self._stated_failure and not self._strong_failure:
            out.append("prose_only")
        if "kv_cache_exhausted" in self.hits:
            out.append("kv_high")
        return out

    def learned_lines(self) -> list[tuple[int, str]]:
        """The lines the learned stage reads: the first lines and the looked-at lines; from the
        moment the server was up when that was before the first failure (the start-up went
        well, so its lines say nothing about what failed)."""
        merged = dict(self._head)
        merged.update(self._seen_head)
        merged.update(self._seen_tail)
        if self.up_before_failure():
            up = min(n for n in (self._ready_at, self._served_at) if n is not None)
            return sorted((n, m) for n, m in merged.items() if n >= up)
        return sorted(merged.items())

    def learned_failures(self) -> list[str]:
        """The failure lines the learned stage weighs again (from the moment the server was up,
        as :meth:`learned_lines`)."""
        fails = list(self._failures)
        if self.up_before_failure():
            up = min(n for n in (self._ready_at, self._served_at) if n is not None)
            fails = [f for f in fails if f[0] >= up]
        return [_excerpt(m) for _n, m, _t in fails]

    def learned_features(self) -> set[str]:
        return _features.doc_features(
            (m for _n, m in self.learned_lines()), self.shapes(), self.learned_failures()
        )

    def _learned(self, out: dict[str, Any], ranked: list[_Hit], guess: dict | None) -> None:
        """Rank the classes. A specific rule finding decides (its confidence: how often rules
        of its specificity were right in training) and the classifier ranks the alternatives.
        Otherwise the classifier's probabilities are combined with the rules' weak vote (a
        low-specificity finding or the keyword/code guess, weighted by its precision in
        training) and the learned stage decides, with the lines that drove it."""
        model = self.model
        assert model is not None
        post = model.posterior(self.learned_features(), exclude=[NONE])
        if self.ruleset.startup_classes and self.up_before_failure():
            post = _rule_out(post, self.ruleset.startup_classes, STARTUP_AFTER_READY)
        findings = out["findings"]
        causes = [h for h in ranked if h.rule.kind == "cause"]
        vote = None
        if causes:
            spec = max(causes[0].rule.specificity, causes[0].bonus)
            vote = (causes[0].rule.label, model.rule_precision(spec), spec >= model.weak_below)
        elif guess is not None and guess["rule"] != "unclassified":
            vote = (self._label(guess), model.guess_confidence, False)
        if vote and vote[2]:  # a specific rule decides; the classifier ranks the alternatives
            rest = [(c, p) for c, p in post if c != vote[0]]
            scale = (1 - vote[1]) / (sum(p for _c, p in rest) or 1.0)
            ranking = [(vote[0], vote[1])] + [(c, p * scale) for c, p in rest]
        else:
            ranking = model.calibrated(model.combine(post, vote[0], vote[1]) if vote else post)
        top, conf = ranking[0]
        same = next((f for f in findings if not f.get("guess") and self._label(f) == top), None)
        out["stage"] = "rules" if vote and vote[2] and top == vote[0] else "learned"
        if same is not None:  # a rule finding of the winning class: its evidence and fix
            findings.remove(same)
            findings.insert(0, same)
        elif guess is not None and self._label(guess) == top:
            findings.insert(0, guess)
        else:
            findings.insert(0, self._learned_finding(ranking))
        findings[0]["confidence"] = round(conf, 2)
        for f in findings:
            f.setdefault("stage", "rules")
        findings[0]["stage"] = out["stage"]
        out["ranking"] = [self._ranked(c, p) for c, p in ranking[:RANKING]]

    @staticmethod
    def _label(finding: dict[str, Any]) -> str:
        return str(finding["pitfall"]) if finding.get("pitfall") is not None else finding["rule"]

    def _ranked(self, label: str, confidence: float) -> dict[str, Any]:
        rule = self.ruleset.rule_for_class(label)
        return {
            "class": label,
            "rule": rule.id if rule else label,
            "title": rule.title if rule else label,
            "confidence": round(confidence, 3),
        }

    def _learned_finding(self, post: list[tuple[str, float]]) -> dict[str, Any]:
        model = self.model
        assert model is not None
        top, conf = post[0]
        second = post[1][0] if len(post) > 1 else top
        rule = self.ruleset.rule_for_class(top)
        lines = self.learned_lines()
        leaning = []
        for n, msg in lines:
            lean = model.lean(_features.line_features(msg), top, second) if second != top else 0
            if lean > 0:
                leaning.append((lean, n, msg))
        chosen = sorted(sorted(leaning, reverse=True)[:EXPLAIN_LINES], key=lambda t: t[1])
        evidence = [m for _l, _n, m in chosen] or [m for _n, m, _t in list(self._failures)[-2:]]
        pitfall = rule.pitfall if rule else (int(top) if top.isdigit() else None)
        settle = rule.settle if rule and rule.settle else DEFAULT_SETTLE.get(pitfall, ())
        return {
            "pitfall": pitfall,
            "rule": rule.id if rule else top,
            "title": rule.title if rule else top,
            "evidence": evidence,
            "fix": rule.fix if rule else "",
            "explanation": rule.explanation if rule else "",
            "variable": rule.variable if rule else None,
            "kind": "guess",
            "matches": len(chosen),
            "score": 0,
            "guess": True,
            "confidence": round(conf, 2),
            "settle": list(settle or DEFAULT_SETTLE[None]),
        }


def _rule_out(
    post: list[tuple[str, float]], classes: frozenset[str], keep: float
) -> list[tuple[str, float]]:
    """The posterior with ``classes`` scaled by ``keep``, renormalised and re-sorted."""
    scaled = [(c, p * keep if c in classes else p) for c, p in post]
    total = sum(p for _c, p in scaled) or 1.0
    return sorted(((c, p / total) for c, p in scaled), key=lambda t: (-t[1], t[0]))


def iter_lines(stream: IO[bytes]) -> Iterator[str]:
    """Decoded lines of a binary stream; ``\\r\\n``, ``\\r`` and over-long lines split."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while True:
        chunk = stream.readline(MAX_LINE)
        if not chunk:
            break
        text = decoder.decode(chunk)
        if "\r" in text:
            parts = text.replace("\r\n", "\n").split("\r")
            yield from (p for p in parts if p.strip("\n"))
        else:
            yield text
    tail = decoder.decode(b"", final=True)
    if tail:
        yield tail


def _looks_binary(head: bytes) -> bool:
    if not head:
        return False
    if b"\x00" in head[:8192]:
        return True
    text = head[:8192].decode("utf-8", errors="replace")
    bad = text.count("\ufffd") + sum(
        1 for ch in text if ord(ch) < 32 and ch not in "\n\r\t\x1b\x0c"
    )
    return bad * 10 > len(text)


class _TimedReader(io.RawIOBase):
    """A pipe or terminal read with a deadline: each read waits at most until the deadline
    (``--max-seconds`` bounds a writer that never writes or never closes)."""

    def __init__(self, fd: int, name: str, deadline: float, max_seconds: float):
        super().__init__()
        self._fd, self._name, self._deadline, self._max = fd, name, deadline, max_seconds

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = self._deadline - time.monotonic()
        ready = select.select([self._fd], [], [], max(0.0, remaining))[0] if remaining > 0 else []
        if not ready:
            raise InputError(
                f"{self._name}: no more log text arrived within {self._max:g} s (--max-seconds); "
                "the writer is stuck or never closed the pipe: give the log as a file "
                "(docker logs NAME > FILE; ascend-deploy diagnose FILE) or raise --max-seconds"
            )
        data = os.read(self._fd, len(buffer))
        buffer[: len(data)] = data
        return len(data)


_NOT_A_LOG_FILE = "; give the log file, or pipe it: cat FILE | ascend-deploy diagnose -"


def open_log(path: str, max_seconds: float = DEFAULT_MAX_SECONDS) -> IO[bytes]:
    """Binary stream of a log (``-`` = stdin; gzip detected by name or magic bytes). Only a
    regular file is opened (a FIFO or device is refused at once); standard input that is a
    pipe or terminal is read with every wait bounded by ``max_seconds``."""
    deadline = time.monotonic() + max_seconds
    if path == "-":
        try:
            fd = sys.stdin.fileno()
        except (AttributeError, ValueError, OSError):
            raise InputError("standard input is closed; give the log file") from None
        if stat.S_ISREG(os.fstat(fd).st_mode):
            raw: IO[bytes] = os.fdopen(fd, "rb", closefd=False)
        else:
            raw = io.BufferedReader(_TimedReader(fd, "standard input", deadline, max_seconds))
        name = "-"
    else:
        fdp = open_regular(path, "log", _NOT_A_LOG_FILE)
        if fdp is None:
            raise InputError(f"{path}: log file not found")
        raw = os.fdopen(fdp, "rb")
        name = path
    head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
    if name.endswith(".gz") or head == b"\x1f\x8b":
        return _OwningGzip(raw)  # type: ignore[return-value]
    return raw


class _OwningGzip(gzip.GzipFile):
    """A gzip stream that closes the file it reads when it is closed."""

    def __init__(self, raw: IO[bytes]):
        super().__init__(fileobj=raw, mode="rb")
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


_open = open_log  # older name


def diagnose_lines(
    lines: Iterable[str],
    rules: RuleSet | list[Rule] | None = None,
    model: Model | bool | None = True,
) -> dict[str, Any]:
    d = Diagnoser(rules, model=model)
    batch: list[str] = []
    for line in lines:  # in batches: the line prefix is found from the first lines together
        batch.append(line if line.endswith("\n") else line + "\n")
        if len(batch) >= 2000:
            d.feed_text("".join(batch))
            batch = []
    d.feed_text("".join(batch))
    return d.result()


def diagnose_text(
    text: str,
    rules: RuleSet | list[Rule] | None = None,
    model: Model | bool | None = True,
) -> dict[str, Any]:
    """Findings for a pasted log (one string); ``result["findings"][0]`` is the best answer."""
    d = Diagnoser(rules, model=model)
    d.feed_text(text)
    return d.result()


def diagnose_stream(
    d: Diagnoser,
    fh: IO[bytes],
    name: str,
    max_mb: int = DEFAULT_MAX_MB,
    max_seconds: float = DEFAULT_MAX_SECONDS,
) -> None:
    """Feed a binary stream to ``d``: binary check, size/time caps, read errors as InputError."""
    try:
        head = fh.peek(8192)[:8192] if hasattr(fh, "peek") else b""
    except (OSError, EOFError) as exc:
        raise InputError(f"{name}: cannot read the log ({exc})") from None
    if _looks_binary(head):
        raise InputError(
            f"{name}: looks like binary data, not a text log; pass the container log "
            "(docker logs NAME > file), the journal or the captured start-up output"
        )
    src: Any = _Prefetch(fh) if isinstance(fh, gzip.GzipFile) else fh
    try:
        d.feed_stream(src, name, max_mb << 20, max_seconds)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:  # truncated gzip, read errors
        raise InputError(f"{name}: log could not be read to the end ({exc})") from None
    finally:
        if src is not fh:
            src.close()


class _Prefetch:
    """Blocks of a stream read by a thread one block ahead (zlib inflates without the GIL, so
    a gzip log decompresses while the previous block is matched); read errors are raised by
    :meth:`read`. Memory: at most two blocks in flight."""

    def __init__(self, fh: IO[bytes]):
        self._fh = fh
        self._queue: queue.Queue[bytes | BaseException] = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                item: bytes | BaseException = self._fh.read(BLOCK)
            except BaseException as exc:  # handed to the reader
                item = exc
            while not self._stop.is_set():
                try:
                    self._queue.put(item, timeout=0.1)
                    break
                except queue.Full:
                    continue
            if not isinstance(item, bytes) or not item:
                return

    def read(self, _size: int = -1) -> bytes:
        if not self._thread.is_alive() and self._queue.empty():
            return b""
        item = self._queue.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def diagnose_file(
    path: str,
    rules: RuleSet | list[Rule] | None = None,
    max_mb: int = DEFAULT_MAX_MB,
    max_seconds: float = DEFAULT_MAX_SECONDS,
) -> dict[str, Any]:
    """Diagnose a log file (``-`` = stdin, gzip decompressed on the fly), within the caps."""
    name = describe_path(path)
    fh = open_log(path, max_seconds)
    d = Diagnoser(rules)
    try:
        diagnose_stream(d, fh, name, max_mb, max_seconds)
    finally:
        fh.close()
    if d.lines == 0:
        raise InputError(f"{name}: the log is empty; nothing to diagnose")
    result = d.result()
    result["source"] = name
    return result


_STAGE_WORDS = {
    "rules": "decided by the rules (a known signature)",
    "learned": "decided by the learned stage (no specific signature; the classifier ranked the "
    "classes)",
    "guess": "a guess from keywords and codes (learned stage unavailable)",
}


def _ranking_lines(result: dict[str, Any]) -> list[str]:
    ranking = result.get("ranking") or []
    if not ranking:
        return []
    parts = [f"{r['class']} {r['confidence']:.0%}" for r in ranking]
    return [f"Top classes: {', '.join(parts)}"]


def render(result: dict[str, Any]) -> str:
    """Human-readable report: most likely cause first, which stage decided, the top classes."""
    src = result.get("source", "log")
    findings = result.get("findings") or []
    if not findings:
        out = [
            f"{src}: no failure found in {result.get('lines', 0)} lines "
            "(no error, exception or error code)."
        ]
        last = result.get("last_errors") or []
        if last:
            out.append("Last error lines:")
            out += [f"  {line}" for line in last]
        return "\n".join(out)
    stage = result.get("stage") or ("guess" if findings[0].get("guess") else "rules")
    if findings[0].get("guess"):
        g = findings[0]
        pit = (
            f"pitfall {g['pitfall']}"
            if g["pitfall"]
            else "neighbour"
            if g["rule"] != "unclassified"
            else "?"
        )
        out = [
            f"{src}: no known failure signature in {result.get('lines', 0)} lines; best guess "
            f"(confidence {g.get('confidence') or 0:.0%}), {_STAGE_WORDS.get(stage, stage)}.",
            *_ranking_lines(result),
            f"\n1. [{pit}] {g['title']} ({g['rule']}) - GUESS",
        ]
        out += [f"   > {ev}" for ev in g["evidence"]]
        out.append(f"   Why: {g['explanation']}")
        fix = g["fix"] + (f" (bundle variable: {g['variable']})" if g.get("variable") else "")
        out.append(f"   Fix if confirmed: {fix}")
        out.append("   To settle it, run:")
        out += [f"     {cmd}" for cmd in g.get("settle", [])]
        rest = findings[1:]
    else:
        out = [
            f"{src}: {len(findings)} finding(s), most likely root cause first; "
            f"{_STAGE_WORDS.get(stage, stage)}.",
            *_ranking_lines(result),
        ]
        rest = findings
    start = len(findings) - len(rest) + 1
    for i, f in enumerate(rest, start):
        pit = f"pitfall {f['pitfall']}" if f["pitfall"] else "neighbour"
        out.append(f"\n{i}. [{pit}] {f['title']} ({f['rule']})")
        for ev in f["evidence"]:
            out.append(f"   > {ev}")
        out.append(f"   Why: {f['explanation']}")
        fix = f["fix"] + (f" (bundle variable: {f['variable']})" if f.get("variable") else "")
        out.append(f"   Fix: {fix}")
    return "\n".join(out)
