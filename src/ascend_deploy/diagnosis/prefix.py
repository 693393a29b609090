"""A line prefix the normaliser does not know, found from the log itself.

Collectors, launchers and pastes put the same kind of prefix before every line: a Go or glog
stamp (``2026/12/03 12:00:01.123456``), ``kubectl logs --prefix`` (``[pod/vllm-0/vllm]``), a
syslog tag without a date (``node-3 vllm-serve[4001]:``), a time of day (``[12:00:01]``), an
epoch stamp, numbered lines of a paste, LLaMA-Factory's ``[INFO|2024-06-12 10:12:16]``. Instead of
listing each one, :func:`detect` reads the first lines of a log, finds the longest run of tokens
most of them start with (digits of any value, the same word or one of a few words such as log
levels, the same punctuation) and keeps it when stripping it lets the normaliser remove more
than it does on its own. Standard library only.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

SAMPLE = 400  # first non-empty lines read
MIN_LINES = 6  # lines that must carry a prefix (all of them in a shorter log, at least two)
COVER = 0.5  # share of the sample a prefix must start
MAX_CHARS = 96  # a prefix lies in the first characters of a line
MAX_WORDS = 6  # distinct words one position of a prefix may take (log levels, service names)
_TOKEN_RE = re.compile(r"\d+|[A-Za-z_]+|[ \t]+|.")
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# Characters that end a prefix (bars, borders, closing brackets, ">>"); a prefix also ends at a
# space, and holds a digit or one of these.
_SEPS = frozenset("|│┃║▎>])}")
_BARS = frozenset("|│┃║▎>")
_TRIVIAL = frozenset(" \t>▎│┃║|`")
LEVEL_RE = re.compile(r"\b(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\b")


def _kind(tok: str) -> str:
    c = tok[0]
    if c.isdigit():
        return "d"
    if (c.isalpha() and c.isascii()) or c == "_":
        return "w"
    if c in " \t":
        return "s"
    return "o"


def _candidates(lines: Sequence[str], need: int) -> list[str]:
    """Regexes (longest last) for the token runs most sample lines start with, each ending at a
    separator (a space, a bar, a closing bracket, a colon)."""
    toks = [_TOKEN_RE.findall(line[:MAX_CHARS]) for line in lines]
    alive = list(range(len(lines)))
    parts: list[str] = []
    marked = False  # the prefix so far holds a digit or a separator character
    out: list[str] = []
    for k in range(MAX_CHARS):
        here = [(i, toks[i][k]) for i in alive if k < len(toks[i])]
        kinds = Counter(_kind(t) for _i, t in here)
        if not kinds:
            break
        kind, count = kinds.most_common(1)[0]
        if count < need:
            break
        same = [(i, t) for i, t in here if _kind(t) == kind]
        if kind == "d":
            part = r"\d+"
            marked = True
        elif kind == "s":
            part = r"[ \t]+"
        else:
            words = Counter(t for _i, t in same)
            top, n = words.most_common(1)[0]
            if kind == "w" and n < count and len(words) <= MAX_WORDS and 2 * len(words) <= count:
                part = "(?:" + "|".join(re.escape(w) for w in sorted(words)) + ")"
            elif n >= need:
                part = re.escape(top)
                same = [(i, t) for i, t in same if t == top]
            else:
                break
            if kind == "o" and top in _SEPS:
                marked = True
        parts.append(part)
        alive = [i for i, _t in same]
        if marked and (kind == "s" or (kind == "o" and parts[-1].lstrip("\\") in _SEPS)):
            out.append("".join(parts))
    return out


def _trivial(text: str) -> bool:
    """Only what any paste adds (spaces, quote bars, borders, backticks)."""
    return all(c in _TRIVIAL for c in text)


def detect(
    raw_lines: Sequence[str], normalise: Callable[[str], tuple[str, str]]
) -> re.Pattern[str] | None:
    """The prefix (a compiled regex anchored at the line start) that most of ``raw_lines`` carry
    and ``normalise`` leaves in place (its shorter forms as alternatives); None when there is
    none.

    A line counts for a candidate when the normaliser alone removed nothing but the trivial from
    it, or stopped inside the candidate before a bar (it stopped at the unknown prefix), and
    removes more once the candidate is stripped. Of the
    candidates, shortest first, those that count for enough lines are kept up to the first after
    which the normaliser takes over (removes a header it knows from the rest): what follows is
    the message."""
    lines = []
    for raw in raw_lines:
        line = _ANSI_RE.sub("", raw).rstrip("\r\n")
        if line.strip():
            lines.append(line)
            if len(lines) >= SAMPLE:
                break
    if len(lines) < 2:
        return None
    need = max(min(MIN_LINES, len(lines)), int(COVER * len(lines) + 0.999))
    known = []  # (line, message, where the normaliser's message starts, only trivial before it)
    for line in lines:
        msg = normalise(line)[0]
        at = line.find(msg[:30]) if msg else -1
        if at >= 0:
            known.append((line, msg, at, _trivial(line[:at])))
    if len(known) < need:
        return None
    kept: list[str] = []
    for src in _candidates(lines, need):
        rx = re.compile(src)
        gained = took_over = 0
        for line, msg, at, whole in known:
            m = rx.match(line)
            # The normaliser stopped at the unknown prefix (removed nothing but the trivial), or
            # inside it, before a bar (a stamp it knows, then "INFO     | worker:run:10 - ").
            if not m or not (whole or (at < m.end() and _BARS & set(line[at : m.end()]))):
                continue
            rest = line[m.end() :]
            new = normalise(rest)[0]
            if len(new) < len(msg) and msg.endswith(new):
                gained += 1
                at2 = rest.find(new[:30]) if new else -1
                took_over += at2 < 0 or not _trivial(rest[:at2])
        if gained >= need:
            kept.append(src)
            if 2 * took_over >= gained:
                break
    # Longest first: a line that has only the first part of the prefix (a prose line with its
    # stamp) loses that part.
    return re.compile("|".join(reversed(kept))) if kept else None
