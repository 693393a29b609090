"""Features of a log for the learned stage of ``ascend-deploy diagnose`` (standard library only).

A log is described by what carries across wordings rather than by whole strings: lower-cased
word tokens and the parts of ``snake_case`` / ``CamelCase`` identifiers (``is_layer_skipped``,
``OutOfMemoryError``), adjacent word pairs, character pairs of Chinese text, error codes by code
and family (``cann:EZ9999``, ``cannfam:EZ``, ``acl:507033``, ``aclfam:507``), exception types
(``exc:keyerror``, also when quoted inside a sentence) and the shape of the log (a traceback,
served requests before the failure, a bug report's title, prose without log levels). Numbers,
paths' digits and timestamps are dropped: they name one copy of a log, not its failure.

Two kinds of features carry a failure across wordings the corpus never showed: character
4-grams of every word (``c:bind``, ``c:ind$``: "couldn't bind", "binding failed" and "bind()"
share them; so do ``OutOfMemoryError`` and "out of memory"), and the words and 4-grams of the
failure lines again under ``f:`` (what the error lines say weighs more than the INFO lines of a
start-up around them).

The same function describes the training corpus (``tools/train_diagnose_model.py``) and a log at
run time (:mod:`.learned`), so the two always agree.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

MAX_TOKENS = 48  # word tokens of one line that make pairs (bounded work on long lines)
GRAM = 4  # character n-grams of words (with ^ and $ marking the word's ends)

_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_CAMEL_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_CJK_RE = re.compile(r"[\u4e00-\u9fff]+")
_CANN_RE = re.compile(r"(?<![A-Za-z0-9_])(E[0-9A-Z]\d{4})(?![A-Za-z0-9_])")
_ACL_RE = re.compile(
    r"(?i)(?:error\s*code(?:\s+is)?|err_?code|ret(?:urn)?(?:\s*code|_?code|_?val)?|"
    r"acl\s*error|errno|result\s*=|failed:)\s*[:=]?\s*[\[(]?\s*(\d{6})(?!\d)"
)
_RETCODE_RE = re.compile(r"(?i)retCode=(0x[0-9a-f]+)")
_EXC_TYPE_RE = re.compile(r"\b((?:[a-z_][a-z0-9_]*\.)*[A-Z][A-Za-z0-9_]*(?:Error|Exception))\b")
_STOP = frozenset(
    {
        "the",
        "a",
        "an",
        "of",
        "to",
        "in",
        "on",
        "at",
        "is",
        "are",
        "was",
        "be",
        "by",
        "for",
        "and",
        "or",
        "with",
        "from",
        "this",
        "that",
        "it",
        "as",
        "not",
        "no",
    }
)


def _words(msg: str) -> list[str]:
    out: list[str] = []
    for w in _WORD_RE.findall(msg):
        low = w.lower()
        if len(low) < 2 or low in _STOP:
            continue
        out.append(low)
    return out


def line_features(msg: str) -> set[str]:
    """The features of one normalised log line."""
    feats: set[str] = set()
    words = _words(msg)
    for w in words:
        feats.add(w)
    for w in _WORD_RE.findall(msg):
        if "_" in w:
            feats.update(p.lower() for p in w.split("_") if len(p) >= 3)
        if any(c.isupper() for c in w[1:]):
            feats.update(p.lower() for p in _CAMEL_RE.findall(w) if len(p) >= 3)
    head = words[:MAX_TOKENS]
    feats.update(f"{a} {b}" for a, b in itertools.pairwise(head))
    for run in _CJK_RE.findall(msg):
        if len(run) == 1:
            feats.add(f"zh:{run}")
        feats.update(f"zh:{run[i : i + 2]}" for i in range(len(run) - 1))
    for code in _CANN_RE.findall(msg):
        feats.add(f"cann:{code}")
        feats.add(f"cannfam:{code[:2]}")
    for code in _ACL_RE.findall(msg):
        feats.add(f"acl:{code}")
        feats.add(f"aclfam:{code[:3]}")
    for code in _RETCODE_RE.findall(msg):
        feats.add(f"ret:{code.lower()}")
    for exc in _EXC_TYPE_RE.findall(msg):
        feats.add(f"exc:{exc.rsplit('.', 1)[-1].lower()}")
    feats |= char_grams(feats)
    return feats


def char_grams(feats: Iterable[str]) -> set[str]:
    """Character 4-grams (``c:``) of the single-word features (not of pairs, codes or flags)."""
    out: set[str] = set()
    for f in feats:
        if len(f) <= GRAM or " " in f or ":" in f:
            continue
        w = f"^{f}$"
        out.update(f"c:{w[i : i + GRAM]}" for i in range(len(w) - GRAM + 1))
    return out


def doc_features(
    lines: Iterable[str], shapes: Iterable[str] = (), failures: Iterable[str] = ()
) -> set[str]:
    """The features of a log: the union of its lines' features, its shape flags, and the
    single-word features and 4-grams of its failure lines under ``f:``."""
    feats: set[str] = {f"shape:{s}" for s in shapes}
    for msg in lines:
        feats |= line_features(msg)
    failing: set[str] = set()
    for msg in failures:
        failing |= line_features(msg)
    feats.update(f"f:{f}" for f in failing if " " not in f and not f.startswith("shape:"))
    return feats
