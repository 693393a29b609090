"""Name the root cause of a failed vLLM-Ascend start (or a sick service) from its log.

The rules are data (``data/diagnose_rules.json``, built from
``shared/reference/error-signatures.md`` and the vllm-ascend issues cited in each rule).
The log is streamed line by line with bounded memory (logs of hundreds of MB), after
normalising what real logs carry: ANSI colours, Windows line endings, docker/journal
timestamps, worker prefixes such as ``(VllmWorker rank=0 pid=123)`` or ``[rank0]:`` and
vLLM's ``LEVEL MM-DD HH:MM:SS [file.py:N]`` header.

Ranking: causes before consequences ("EngineCore failed to start"); among causes, the
rule's specificity plus the weight of the strongest matching line (a traceback's final
``XxxError:`` line outranks ERROR lines, which outrank warnings and info lines).
Standard library only.
"""

from __future__ import annotations

import codecs
import gzip
import json
import os
import re
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from . import garbage
from .errors import InputError, describe_path

RULES_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "diagnose_rules.json")

MAX_LINE = 16384  # longer lines are split (bounded memory on logs without newlines)
MAX_EVIDENCE = 5
EVIDENCE_CHARS = 400
LAST_ERRORS = 10

LEVEL_WEIGHT = {"exception": 30, "error": 20, "warning": 10, "info": 0}

_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# docker logs -t / kubectl --timestamps: RFC 3339 stamp.
_DOCKER_TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+")
# journalctl short format: "Nov 29 12:00:01 host unit[123]: ".
_JOURNAL_RE = re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [^\s:\[]+(?:\[\d+\])?: ")
# docker compose: "service-1  | ".
_COMPOSE_RE = re.compile(r"^[\w.-]+\s+\| ")
# Process prefixes: "(VllmWorker rank=0 pid=123) ", "(EngineCore_DP0 pid=29) ",
# "(ActorHybridWorker pid=1341, ip=172.16.6.36) ", "[rank0]: ", "[rank0]:[E324 ...] ".
_PROC_RE = re.compile(r"^(?:\((?:[A-Za-z_][\w-]*)(?:,? [\w-]+=[^()\s,]*)*\)\s*|\[rank\d+\]:\s?)")
# vLLM header: "ERROR 02-07 18:18:59 [multiproc_executor.py:824] " (>= 0.7) or
# "ERROR 09-25 02:23:33 engine.py:400] " (older).
_VLLM_HDR_RE = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+"
    r"(?:\[[^\]]*\]|[\w./-]+:\d+\])\s?"
)
_UVICORN_RE = re.compile(r"^(?P<level>INFO|WARNING|ERROR|CRITICAL):\s{2,}")
_EXC_RE = re.compile(
    r"^(?:[A-Za-z_][\w]*\.)*[A-Z][A-Za-z0-9_]*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::|$)"
)
_NAMED_GROUP_RE = re.compile(r"\(\?P<\w+>")
_CANN_CODE_RE = re.compile(r"^E[A-Z]\d{4}\b|^\[ERROR\]|^\[Error\]|\berror code is \d+")


@dataclass(frozen=True)
class Pattern:
    regex: re.Pattern[str]
    min_value: float | None = None
    check: str | None = None


@dataclass(frozen=True)
class Rule:
    id: str
    pitfall: int | None
    title: str
    kind: str
    specificity: int
    patterns: tuple[Pattern, ...]
    context: tuple[re.Pattern[str], ...]
    explanation: str
    fix: str
    variable: str | None


def _compile(text: str, where: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise InputError(f"{where}: invalid regex {text!r} ({exc})") from None


def load_rules(path: str = RULES_PATH) -> list[Rule]:
    """The rules file, validated; InputError names the file and the bad rule."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise InputError(f"{path}: diagnose rules file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: unreadable diagnose rules ({exc})") from None
    return parse_rules(doc, path)


def parse_rules(doc: Any, path: str = "diagnose rules") -> list[Rule]:
    """Rules from the parsed JSON document (Ansible passes the content, not the file)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("rules"), list):
        raise InputError(f"{path}: expected an object with a 'rules' list")
    rules: list[Rule] = []
    seen: set[str] = set()
    for i, raw in enumerate(doc["rules"]):
        where = f"{path}: rules[{i}]"
        if not isinstance(raw, dict):
            raise InputError(f"{where} is not an object")
        try:
            rid = str(raw["id"])
            pitfall = raw.get("pitfall")
            if pitfall is not None and (not isinstance(pitfall, int) or not 1 <= pitfall <= 8):
                raise ValueError(f"pitfall must be 1-8 or null, got {pitfall!r}")
            kind = raw.get("kind", "cause")
            if kind not in ("cause", "consequence"):
                raise ValueError(f"kind must be cause or consequence, got {kind!r}")
            pats = []
            for p in raw["patterns"]:
                if isinstance(p, str):
                    pats.append(Pattern(_compile(p, where)))
                else:
                    pats.append(
                        Pattern(
                            _compile(p["regex"], where),
                            float(p["min"]) if "min" in p else None,
                            p.get("check"),
                        )
                    )
            if not pats:
                raise ValueError("no patterns")
            rule = Rule(
                id=rid,
                pitfall=pitfall,
                title=str(raw["title"]),
                kind=kind,
                specificity=int(raw.get("specificity", 20)),
                patterns=tuple(pats),
                context=tuple(_compile(c, where) for c in raw.get("context", [])),
                explanation=str(raw["explanation"]),
                fix=str(raw["fix"]),
                variable=raw.get("variable"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{where} ({raw.get('id', '?')}): {exc}") from None
        if rid in seen:
            raise InputError(f"{where}: duplicate rule id {rid!r}")
        seen.add(rid)
        rules.append(rule)
    return rules


def normalise(line: str) -> tuple[str, str]:
    """(message, level) of one raw log line, with colours and prefixes removed."""
    text = _ANSI_RE.sub("", line).replace("\x00", "").rstrip("\r\n")
    for _ in range(4):  # prefixes nest: timestamp, compose, process, rank, header
        before = text
        for rx in (_DOCKER_TS_RE, _JOURNAL_RE, _COMPOSE_RE, _PROC_RE):
            text = rx.sub("", text, count=1)
        if text == before:
            break
    level = "info"
    m = _VLLM_HDR_RE.match(text) or _UVICORN_RE.match(text)
    if m:
        hdr = m.group("level")
        level = {
            "ERROR": "error",
            "CRITICAL": "error",
            "WARNING": "warning",
            "WARN": "warning",
        }.get(hdr, "info")
        text = text[m.end() :]
    msg = text.strip()
    if _EXC_RE.match(msg):
        level = "exception"
    elif level != "error" and (_CANN_CODE_RE.search(msg) or msg.startswith("ERROR")):
        level = "error"
    return msg, level


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
        else:
            self.last.append((lineno, _excerpt(msg)))

    @property
    def score(self) -> int:
        return self.rule.specificity + LEVEL_WEIGHT[self.level]

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


class Diagnoser:
    """Feed lines with :meth:`feed`; :meth:`result` gives the findings."""

    def __init__(self, rules: list[Rule] | None = None):
        self.rules = rules if rules is not None else load_rules()
        self.hits: dict[str, _Hit] = {}
        self.lines = 0
        self.last_errors: deque[str] = deque(maxlen=LAST_ERRORS)

        # Pre-filters: most lines of a healthy log match nothing; one search per rule after that.
        def any_of(patterns: Iterable[str]) -> re.Pattern[str]:
            return re.compile(
                "|".join("(?:" + _NAMED_GROUP_RE.sub("(?:", p) + ")" for p in patterns)
            )

        self._any = any_of(p.regex.pattern for r in self.rules for p in r.patterns)
        self._rule_any = [(r, any_of(p.regex.pattern for p in r.patterns)) for r in self.rules]
        self._context = [(r, c) for r in self.rules for c in r.context]
        self._any_context = any_of(c.pattern for _r, c in self._context) if self._context else None
        # Context lines are kept per rule even before the rule fires (start-up lines come first).
        self._ctx: dict[str, dict[str, tuple[int, str]]] = {}

    def feed(self, raw: str) -> None:
        self.lines += 1
        n = self.lines
        msg, level = normalise(raw)
        if not msg:
            return
        if level in ("exception", "error"):
            self.last_errors.append(_excerpt(msg))
        if self._any.search(msg):
            for rule, rule_rx in self._rule_any:
                if rule_rx.search(msg):
                    self._match_rule(rule, n, msg, level)
        if self._any_context is not None and self._any_context.search(msg):
            for rule, rx in self._context:
                if rx.search(msg):
                    self._ctx.setdefault(rule.id, {})[rx.pattern] = (n, _excerpt(msg))

    def _match_rule(self, rule: Rule, n: int, msg: str, level: str) -> None:
        for pat in rule.patterns:
            m = pat.regex.search(msg)
            if not m:
                continue
            value = None
            if pat.min_value is not None:
                try:
                    value = float(m.group("value"))
                except (IndexError, TypeError, ValueError):
                    continue
                if value < pat.min_value:
                    continue
            if pat.check == "garbage" and not garbage.detect(_json_unescape(m.group("value"))):
                continue
            hit = self.hits.get(rule.id)
            if hit is None:
                hit = self.hits[rule.id] = _Hit(rule)
            hit.add(n, msg, level, value)
            return

    def result(self) -> dict[str, Any]:
        for rid, ctx in self._ctx.items():
            if rid in self.hits:
                self.hits[rid].context.update(ctx)
        ranked = sorted(
            self.hits.values(),
            key=lambda h: (h.rule.kind == "cause", h.score, h.last_line),
            reverse=True,
        )
        findings = [
            {
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
            }
            for h in ranked
        ]
        out: dict[str, Any] = {"findings": findings, "lines": self.lines}
        if not findings:
            out["last_errors"] = list(self.last_errors)
        return out


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


def _open(path: str) -> IO[bytes]:
    if path == "-":
        return sys.stdin.buffer
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory; give the log file (or - for standard input)")
    try:
        fh: IO[bytes] = open(path, "rb")  # noqa: SIM115 (closed by the caller)
    except FileNotFoundError:
        raise InputError(f"{path}: log file not found") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the log ({exc.strerror})") from None
    if path.endswith(".gz"):
        return gzip.open(fh, "rb")  # type: ignore[return-value]
    return fh


def diagnose_lines(lines: Iterable[str], rules: list[Rule] | None = None) -> dict[str, Any]:
    d = Diagnoser(rules)
    for line in lines:
        d.feed(line)
    return d.result()


def diagnose_file(path: str, rules: list[Rule] | None = None) -> dict[str, Any]:
    """Diagnose a log file (``-`` = stdin, ``.gz`` decompressed on the fly)."""
    name = describe_path(path)
    fh = _open(path)
    try:
        try:
            head = fh.peek(8192)[:8192] if hasattr(fh, "peek") else b""
        except (OSError, EOFError) as exc:
            raise InputError(f"{name}: cannot read the log ({exc})") from None
        if _looks_binary(head):
            raise InputError(
                f"{name}: looks like binary data, not a text log; pass the container log "
                "(docker logs NAME > file), the journal or the captured start-up output"
            )
        d = Diagnoser(rules)
        try:
            for line in iter_lines(fh):
                d.feed(line)
        except (OSError, EOFError) as exc:  # truncated gzip, read errors
            raise InputError(f"{name}: log could not be read to the end ({exc})") from None
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()
    if d.lines == 0:
        raise InputError(f"{name}: the log is empty; nothing to diagnose")
    result = d.result()
    result["source"] = name
    return result


def render(result: dict[str, Any]) -> str:
    """Human-readable report: most likely cause first."""
    src = result.get("source", "log")
    findings = result.get("findings") or []
    if not findings:
        out = [f"{src}: no known failure signature in {result.get('lines', 0)} lines."]
        last = result.get("last_errors") or []
        if last:
            out.append("Last error lines:")
            out += [f"  {line}" for line in last]
        return "\n".join(out)
    out = [f"{src}: {len(findings)} finding(s), most likely root cause first."]
    for i, f in enumerate(findings, 1):
        pit = f"pitfall {f['pitfall']}" if f["pitfall"] else "neighbour"
        out.append(f"\n{i}. [{pit}] {f['title']} ({f['rule']})")
        for ev in f["evidence"]:
            out.append(f"   > {ev}")
        out.append(f"   Why: {f['explanation']}")
        fix = f["fix"] + (f" (bundle variable: {f['variable']})" if f.get("variable") else "")
        out.append(f"   Fix: {fix}")
    return "\n".join(out)
