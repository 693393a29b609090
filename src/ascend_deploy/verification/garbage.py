"""Is a model answer garbage? (pitfall 7: a wrong quantization path produces noise.)

A mis-loaded model answers with NaN text, U+FFFD replacement characters, one token repeated
to the length limit, symbol soup or nothing at all (vllm-ascend issue #883 shows
``)),)_)))....".".".".``). Each detector names what it saw; thresholds are set so that
short, correct answers (numbers, one word, Chinese text, a code block) pass.
Standard library only.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

# Something of 1-24 characters repeated back to back at least 6 times.
_REPEAT_RE = re.compile(r"(.{1,24}?)\1{5,}", re.DOTALL)
_NAN_RE = re.compile(r"(?i)(?<![a-z])nan(?![a-z])")
_WORD_RE = re.compile(r"[A-Za-z]+")
_VOWEL_RE = re.compile(r"[aeiouyAEIOUY]")
# Characters of ordinary prose and code: letters, digits, CJK, whitespace, common punctuation.
_PROSE_PUNCT = set(".,;:!?'\"()，。！？、：；“”‘’（）《》")
_RULE_LINE_RE = re.compile(r"[\s|:\-=*#_`+]*")
_COMMON_PUNCT = set(".,;:!?'\"()[]{}-_+*/=<>#%&`~|@$^\\，。！？、：；“”‘’（）《》")


def _is_wordlike(ch: str) -> bool:
    if ch.isalnum() or ch.isspace() or ch in _COMMON_PUNCT:
        return True
    cat = unicodedata.category(ch)
    return cat.startswith(("L", "N"))


def find_repeat(text: str, min_span: int = 32) -> tuple[str, int] | None:
    """The longest back-to-back repetition (unit, count) covering at least ``min_span`` chars."""
    best: tuple[str, int] | None = None
    best_span = 0
    for m in _REPEAT_RE.finditer(text):
        unit = m.group(1)
        if not unit.strip():
            continue  # runs of spaces or newlines (indentation, blank lines) are not garbage
        span = m.end() - m.start()
        if span >= min_span and span > best_span:
            best, best_span = (unit, span // len(unit)), span
    return best


def _ngram_share(words: list[str], n: int = 3) -> float:
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    if not grams:
        return 0.0
    return Counter(grams).most_common(1)[0][1] / len(grams)


def detect(text: str | None, reasoning: str | None = None) -> list[str]:
    """Reasons ``text`` looks like garbage; empty when it looks like language or code.

    ``reasoning`` (Qwen3 thinking text) counts as output for the empty check and is checked
    for repetition too (a broken model can loop inside ``<think>``).
    """
    reasons: list[str] = []
    body = text or ""
    stripped = body.strip()
    if not stripped and not (reasoning or "").strip():
        if body:
            kinds = sorted({repr(ch) for ch in body})
            return [f"whitespace only: {len(body)} characters of {', '.join(kinds)} and no text"]
        return ["empty content: the model produced no text"]
    for label, part in (("content", body), ("reasoning", reasoning or "")):
        if not part.strip():
            continue
        nans = len(_NAN_RE.findall(part))
        if nans >= 3 and nans * 3 >= len(part.split()):
            reasons.append(f"NaN text in {label}: 'nan' appears {nans} times")
        bad = part.count("\ufffd")
        if bad >= 2 or (bad and bad * 20 >= len(part)):
            reasons.append(
                f"{bad} U+FFFD replacement character(s) in {label}: invalid UTF-8 byte sequences"
            )
        controls = sum(1 for ch in part if unicodedata.category(ch) == "Cc" and ch not in "\n\r\t")
        if controls >= 2:
            reasons.append(f"{controls} control characters in {label}")
        rep = find_repeat(part)
        if rep is not None:
            unit, count = rep
            reasons.append(f"repeated text in {label}: {unit!r} x{count}")
        words = [w.lower() for w in part.split()]
        if len(words) >= 30:
            share = _ngram_share(words)
            if share >= 0.25:
                reasons.append(f"repetitive {label}: one word 3-gram is {share:.0%} of all 3-grams")
        if len(part) >= 12:
            odd = sum(1 for ch in part if not _is_wordlike(ch))
            if odd * 4 >= len(part):
                reasons.append(
                    f"token soup in {label}: {odd} of {len(part)} characters are symbols"
                )
            # Markdown rules and table separators are legitimate runs of symbols.
            core = "\n".join(ln for ln in part.splitlines() if not _RULE_LINE_RE.fullmatch(ln))
            letters = sum(1 for ch in core if unicodedata.category(ch).startswith(("L", "N")))
            symbols = sum(
                1
                for ch in core
                if not ch.isspace()
                and ch not in _PROSE_PUNCT
                and not unicodedata.category(ch).startswith(("L", "N"))
            )
            if len(core) >= 16 and symbols > 2 * max(letters, 1):
                reasons.append(
                    f"token soup in {label}: {symbols} symbols vs {letters} letters/digits"
                )
            latin = _WORD_RE.findall(part)
            if len(latin) >= 6:
                odd_words = [
                    w for w in latin if len(w) > 18 or (len(w) > 4 and not _VOWEL_RE.search(w))
                ]
                if len(odd_words) * 2 >= len(latin):
                    reasons.append(
                        f"token soup in {label}: {len(odd_words)} of {len(latin)} words are not "
                        "pronounceable"
                    )
    return reasons


def bad_logprobs(values: Iterable[object]) -> list[str]:
    """Reasons a list of logprobs is broken: non-finite numbers or positive log-probabilities."""
    nonfinite = 0
    positive = 0
    for v in values:
        if v is None:
            continue
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            nonfinite += 1
            continue
        if not math.isfinite(v):
            nonfinite += 1
        elif v > 1e-4:
            positive += 1
    reasons = []
    if nonfinite:
        reasons.append(f"{nonfinite} non-finite logprob(s) (NaN/inf): the forward pass overflowed")
    if positive:
        reasons.append(f"{positive} positive logprob(s): probabilities above 1")
    return reasons
