"""The rules of ``ascend-deploy diagnose``: parsing and validation of ``diagnose_rules.json``.

Format (documented in the file's ``_comment`` and in docs/diagnose-rules.md): ``rules`` (classes:
a pitfall 1-8 or a named neighbour, with patterns, optional line ``window``, ``exception`` type,
``keywords`` for guesses and ``settle`` commands), ``codes`` (CANN error codes, ACL return
codes and HCCL results by exact code or family prefix) and ``exceptions`` (exception types),
each mapped to a rule. Standard library only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..resources import data_path

try:  # Python >= 3.11; sre_parse is deprecated there
    import re._parser as _sre_parse  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - older Pythons on target hosts
    import sre_parse as _sre_parse  # type: ignore[no-redef]

RULES_PATH = data_path("diagnose_rules.json")

MAX_WINDOW = 5
CODE_SCHEMES = ("cann", "acl", "hccl")
_NAMED_GROUP_RE = re.compile(r"\(\?P<\w+>")


@dataclass(frozen=True)
class Pattern:
    regex: re.Pattern[str]
    min_value: float | None = None
    check: str | None = None
    window: int = 1
    exception: re.Pattern[str] | None = None
    gate: re.Pattern[str] | None = None  # searched in the lower-cased block instead of anchors


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
    keywords: tuple[re.Pattern[str], ...] = ()
    settle: tuple[str, ...] = ()
    cleared_by: tuple[re.Pattern[str], ...] = ()
    defer_to: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The class this rule names: its pitfall number, or its id for a neighbour."""
        return str(self.pitfall) if self.pitfall is not None else self.id


@dataclass(frozen=True)
class CodeEntry:
    scheme: str
    key: str  # exact code, or family prefix
    family: bool
    meaning: str
    rule: str | None
    specificity: int
    guess: bool
    name: str | None = None


@dataclass(frozen=True)
class ExceptionEntry:
    type: re.Pattern[str]
    message: re.Pattern[str] | None
    rule: str | None
    specificity: int
    guess: bool


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]
    codes: tuple[CodeEntry, ...] = ()
    exceptions: tuple[ExceptionEntry, ...] = ()
    classes: tuple[tuple[str, str], ...] = ()  # (pitfall class, rule id that words it)
    # Lines upstream calls harmless although they are written at ERROR level (joined regex).
    harmless: re.Pattern[str] | None = None
    # Classes that only happen while the server starts: ruled out once it was up before the failure.
    startup_classes: frozenset[str] = frozenset()

    # Existing callers treat the rules as a list.
    def __iter__(self):
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def by_id(self) -> dict[str, Rule]:
        return {r.id: r for r in self.rules}

    def rule_for_class(self, label: str) -> Rule | None:
        """The rule that words a class: the class's entry in ``classes``, the neighbour rule of
        that id, or the most specific rule of that pitfall."""
        by_id = self.by_id()
        rid = dict(self.classes).get(label, label)
        if rid in by_id:
            return by_id[rid]
        of_class = [r for r in self.rules if r.label == label]
        return max(of_class, key=lambda r: r.specificity) if of_class else None


def compile_regex(text: str, where: str, flags: int = 0) -> re.Pattern[str]:
    try:
        return re.compile(text, flags)
    except re.error as exc:
        raise InputError(f"{where}: invalid regex {text!r} ({exc})") from None


def load_rules(path: str = RULES_PATH) -> RuleSet:
    """The rules file, validated; InputError names the file and the bad rule."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise InputError(f"{path}: diagnose rules file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: unreadable diagnose rules ({exc})") from None
    return parse_rules(doc, path)


def _pattern(p: Any, where: str) -> Pattern:
    if isinstance(p, str):
        return Pattern(compile_regex(p, where))
    if not isinstance(p, dict):
        raise ValueError(f"pattern must be a string or an object, got {p!r}")
    window = int(p.get("window", 1))
    if not 1 <= window <= MAX_WINDOW:
        raise ValueError(f"window must be 1-{MAX_WINDOW}, got {window}")
    exc = p.get("exception")
    pat = Pattern(
        compile_regex(p.get("regex", ""), where),
        float(p["min"]) if "min" in p else None,
        p.get("check"),
        window,
        compile_regex(rf"(?:{exc})\Z", where) if exc else None,
        compile_regex(p["gate"], where) if p.get("gate") else None,
    )
    if pat.gate is not None and (pat.window > 1 or pat.exception is not None):
        raise ValueError("gate is for single-line patterns")
    if pat.check not in (None, "garbage"):
        raise ValueError(f"check must be garbage, got {pat.check!r}")
    if (pat.min_value is not None or pat.check) and "value" not in pat.regex.groupindex:
        raise ValueError("min/check need a named group 'value' in the regex")
    if not pat.regex.pattern and pat.exception is None:
        raise ValueError("empty regex")
    return pat


def _rule(raw: dict, where: str) -> Rule:
    pitfall = raw.get("pitfall")
    if pitfall is not None and (not isinstance(pitfall, int) or not 1 <= pitfall <= 8):
        raise ValueError(f"pitfall must be 1-8 or null, got {pitfall!r}")
    kind = raw.get("kind", "cause")
    if kind not in ("cause", "consequence"):
        raise ValueError(f"kind must be cause or consequence, got {kind!r}")
    pats = tuple(_pattern(p, where) for p in raw.get("patterns", []))
    keywords = tuple(compile_regex(k, where, re.I) for k in raw.get("keywords", []))
    if not pats and not keywords:
        raise ValueError("no patterns")
    return Rule(
        id=str(raw["id"]),
        pitfall=pitfall,
        title=str(raw["title"]),
        kind=kind,
        specificity=int(raw.get("specificity", 20)),
        patterns=pats,
        context=tuple(compile_regex(c, where) for c in raw.get("context", [])),
        explanation=str(raw["explanation"]),
        fix=str(raw["fix"]),
        variable=raw.get("variable"),
        keywords=keywords,
        settle=tuple(str(s) for s in raw.get("settle", [])),
        cleared_by=tuple(compile_regex(c, where) for c in raw.get("cleared_by", [])),
        defer_to=tuple(str(d) for d in raw.get("defer_to", [])),
    )


def _code(raw: dict, ids: set[str]) -> CodeEntry:
    scheme = raw.get("scheme")
    if scheme not in CODE_SCHEMES:
        raise ValueError(f"scheme must be one of {', '.join(CODE_SCHEMES)}, got {scheme!r}")
    if ("code" in raw) == ("family" in raw):
        raise ValueError("give exactly one of code or family")
    key = str(raw.get("code", raw.get("family"))).upper()
    if not key:
        raise ValueError("empty code")
    rule = raw.get("rule")
    if rule is not None and rule not in ids:
        raise ValueError(f"rule {rule!r} is not a rule id")
    return CodeEntry(
        scheme=scheme,
        key=key,
        family="family" in raw,
        meaning=str(raw.get("meaning", "")),
        rule=rule,
        specificity=int(raw.get("specificity", 20)),
        guess=bool(raw.get("guess", False)),
        name=raw.get("name"),
    )


def _exception(raw: dict, ids: set[str], where: str) -> ExceptionEntry:
    rule = raw.get("rule")
    if rule is not None and rule not in ids:
        raise ValueError(f"rule {rule!r} is not a rule id")
    return ExceptionEntry(
        type=compile_regex(rf"(?:{raw['type']})\Z", where),
        message=compile_regex(raw["message"], where) if raw.get("message") else None,
        rule=rule,
        specificity=int(raw.get("specificity", 20)),
        guess=bool(raw.get("guess", False)),
    )


def parse_rules(doc: Any, path: str = "diagnose rules") -> RuleSet:
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
            rule = _rule(raw, where)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{where} ({raw.get('id', '?')}): {exc}") from None
        if rule.id in seen:
            raise InputError(f"{where}: duplicate rule id {rule.id!r}")
        seen.add(rule.id)
        rules.append(rule)
    for rule in rules:
        unknown = [d for d in rule.defer_to if d not in seen]
        if unknown:
            raise InputError(f"{path}: rule {rule.id!r}: defer_to names no rule: {unknown}")
    classes: list[tuple[str, str]] = []
    raw_classes = doc.get("classes", {})
    if not isinstance(raw_classes, dict):
        raise InputError(f"{path}: classes must map a pitfall (1-8) to a rule id")
    by_id = {r.id: r for r in rules}
    for label, rid in sorted(raw_classes.items()):
        rule = by_id.get(rid)
        if rule is None or rule.label != str(label):
            raise InputError(
                f"{path}: classes[{label!r}] = {rid!r} is not a rule of pitfall {label}"
            )
        classes.append((str(label), rid))
    codes: list[CodeEntry] = []
    for i, raw in enumerate(doc.get("codes", [])):
        try:
            codes.append(_code(raw, seen))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"{path}: codes[{i}] ({raw!r:.80}): {exc}") from None
    excs: list[ExceptionEntry] = []
    for i, raw in enumerate(doc.get("exceptions", [])):
        where = f"{path}: exceptions[{i}]"
        try:
            excs.append(_exception(raw, seen, where))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"{where} ({raw!r:.80}): {exc}") from None
    harmless: list[str] = []
    for i, raw in enumerate(doc.get("harmless", [])):
        where = f"{path}: harmless[{i}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("regex"), str):
            raise InputError(f"{where}: expected an object with a 'regex' and its 'source'")
        if not raw.get("source"):
            raise InputError(f"{where}: a harmless line needs the source that calls it harmless")
        text = compile_regex(raw["regex"], where).pattern
        flags = re.match(r"^\(\?([aiLmsux]+)\)", text)  # a leading (?i) scoped to its entry
        harmless.append(f"(?{flags.group(1)}:{text[flags.end() :]})" if flags else f"(?:{text})")
    joined = compile_regex("|".join(harmless), f"{path}: harmless") if harmless else None
    known = {r.label for r in rules}
    startup = doc.get("startup_classes", [])
    if not isinstance(startup, list) or any(str(c) not in known for c in startup):
        raise InputError(f"{path}: startup_classes must list classes that rules name")
    return RuleSet(
        tuple(rules),
        tuple(codes),
        tuple(excs),
        tuple(classes),
        joined,
        frozenset(str(c) for c in startup),
    )


# --- prefilter construction -------------------------------------------------------------------


def strip_groups(pattern: str) -> str:
    """The pattern with named groups made non-capturing (many patterns go into one regex)."""
    return _NAMED_GROUP_RE.sub("(?:", pattern)


# Approximate share (per mille) of positions in log text starting with each lower-case letter.
_LETTER_FREQ = dict(
    zip(
        "etaoinshrdlcumwfgypbvkjxqz",
        (
            120,
            90,
            80,
            75,
            70,
            67,
            63,
            60,
            60,
            43,
            40,
            28,
            28,
            24,
            24,
            22,
            20,
            20,
            19,
            15,
            10,
            8,
            2,
            2,
            1,
            1,
        ),
        strict=True,
    )
)


def _rarity(ch: str) -> int:
    """How often a character occurs in ordinary log text (per mille; lower = rarer)."""
    if ch.isspace():
        return 150
    if ch.isdigit():
        return 40
    if ch.isupper():
        return 8
    if ch.isalpha():
        return _LETTER_FREQ.get(ch, 5)
    return 5 if ch not in ".,:-_/=()[]'\"" else 15


def best_anchor(lit: str, minimum: int = 4, word_start: bool = False) -> str:
    """The part of ``lit`` the prefilter searches for: from a space before a word when the
    literal has one (all such anchors share the fast prefix " "), else from its rarest character
    (a word start when ``word_start``, for case-insensitive patterns)."""
    if len(lit) <= minimum:
        return lit
    spaces = [k for k in range(len(lit) - minimum) if lit[k] == " " and lit[k + 1].isalnum()]
    if spaces:
        k = min(
            spaces, key=lambda k: (_rarity(lit[k + 1].lower() if word_start else lit[k + 1]), k)
        )
        return lit[k : k + 24]
    starts = [
        k
        for k in range(len(lit) - minimum + 1)
        if not word_start or k == 0 or not lit[k - 1].isalnum()
    ]
    i = min(starts, key=lambda k: (_rarity(lit[k].lower() if word_start else lit[k]), k))
    return lit[i : i + 24]


def case_variants(lit: str, ignore_case: bool) -> set[str]:
    """The spellings a case-insensitive literal meets in logs (as written, lower, UPPER, Title)."""
    if not ignore_case:
        return {lit}
    low = lit.lower()
    lead = len(low) - len(low.lstrip())
    return {low, lit.upper(), low[:lead] + low[lead:].capitalize(), low.title()}


def choose_anchors(lits: Iterable[str], minimum: int = 4) -> dict[str, str]:
    """literal -> the suffix of it the prefilter searches for (at most 24 characters).

    Every distinct first character of the anchors costs one pass over the text (a regex with a
    literal prefix), plus work at each occurrence of that character: a greedy cover picks few,
    rare start characters (space is frequent but shared by most phrases)."""
    lits = set(lits)
    starts: dict[str, dict[str, int]] = {}  # char -> literal -> first usable position
    for lit in lits:
        # Longer anchors find fewer lines that do not match: six characters when the literal has
        # them (e.g. "hbm-usage", not "usage").
        size = min(len(lit), max(minimum, 6))
        for k in range(len(lit) - size + 1):
            starts.setdefault(lit[k], {}).setdefault(lit, k)

    def cost(ch: str) -> float:
        # measured: a pass costs about the same for any start character, except a space
        # (frequent, and its trie is large): about three passes.
        return 12.0 if ch == " " else 4.0 + _rarity(ch) / 100

    def value(c: str) -> float:  # covered literals; longer anchors find fewer false lines
        return sum(min(len(lit) - k, 12) for lit, k in starts[c].items() if lit in todo)

    picked: set[str] = set()
    todo = set(lits)
    while todo:
        ch = max(starts, key=lambda c: (value(c) / cost(c), c))
        picked.add(ch)
        todo.difference_update(starts.pop(ch))
    # Each literal starts its anchor at the earliest picked character (the longest anchor).
    chosen: dict[str, str] = {}
    for lit in lits:
        size = min(len(lit), max(minimum, 6))
        k = next(k for k in range(len(lit) - size + 1) if lit[k] in picked)
        chosen[lit] = lit[k : k + 24]
    return chosen


def _weight(text: str) -> int:
    """Length for the prefilter: a CJK character counts as two (rare in logs)."""
    return sum(2 if ord(ch) > 0x2E7F else 1 for ch in text.strip())


def requirements(pattern: str, minimum: int = 4) -> list[list[str]] | None:
    """Literal strings found in every match: a list of requirements, each a list of
    alternatives (one of them occurs in every match), prefixed ``(?i)`` for case-insensitive
    patterns. None when the pattern has none."""
    try:
        parsed = _sre_parse.parse(pattern)
    except re.error:
        return None
    ignore_case = bool(parsed.state.flags & re.IGNORECASE)

    def branch_req(branches) -> list[str] | None:
        alts: list[str] = []
        for b in branches:
            r = reqs(list(b))
            if not r:
                return None
            alts.extend(min(r, key=_req_cost_plain))
        return alts

    def reqs(items) -> list[list[str]]:
        out: list[list[str]] = []
        cur: list[str] = [""]  # spellings of the current literal run (optional characters fork it)

        def flush() -> None:
            if all(_weight(v) >= minimum for v in cur):
                out.append(list(dict.fromkeys(cur)))
            cur[:] = [""]

        def extend(text: str) -> None:
            cur[:] = [v + text for v in cur]

        for op, arg in items:
            name = str(op)
            if name == "LITERAL":
                extend(chr(arg))
                continue
            if (
                name in ("MAX_REPEAT", "MIN_REPEAT")
                and arg[0] == 0
                and arg[1] == 1
                and len(cur) < 4
            ):
                inner = list(arg[2])
                if len(inner) == 1 and str(inner[0][0]) == "LITERAL":  # "KV ?cache"
                    cur[:] = [*cur, *(v + chr(inner[0][1]) for v in cur)]
                    continue
            if name == "SUBPATTERN" and arg[1] & re.IGNORECASE:
                flush()  # a local (?i:...) group: its literals may come in any case
                continue
            if name == "SUBPATTERN":
                inner = list(arg[-1])
                if inner and all(str(o) == "LITERAL" for o, _ in inner):
                    extend("".join(chr(a) for _, a in inner))
                    continue
                flush()
                if len(inner) == 1 and str(inner[0][0]) == "BRANCH":
                    alts = branch_req(inner[0][1][1])
                    if alts:
                        out.append(alts)
                else:
                    out.extend(reqs(inner))
                continue
            if name == "BRANCH":
                flush()
                alts = branch_req(arg[1])
                if alts:
                    out.append(alts)
                continue
            flush()
        flush()
        return out

    result = reqs(list(parsed))
    if not result:
        return None
    return [[("(?i)" if ignore_case else "") + a for a in req] for req in result]


def _req_cost_plain(req: list[str]) -> int:
    if all(not a.isascii() for a in req):
        return 0  # searched only in blocks that are not ASCII (Chinese messages)
    # Longer literals are rarer in healthy text (fewer lines to check); alternatives add up.
    return max(max(1, 30 - len(a.strip())) for a in req) + 2 * (len(req) - 1)


def _req_cost(req: list[str]) -> int:
    """Prefilter cost of a requirement: phrases with a space are cheapest, then by how common
    the first character is; short literals cost more (more false candidates)."""
    return _req_cost_plain([a.removeprefix("(?i)") for a in req]) * (
        3 if any(a.startswith("(?i)") for a in req) else 1
    )


def cheapest_requirements(pattern: str, count: int = 1, minimum: int = 4) -> list[list[str]] | None:
    """The ``count`` cheapest requirements of ``pattern`` (see :func:`requirements`)."""
    reqs = requirements(pattern, minimum)
    return sorted(reqs, key=_req_cost)[:count] if reqs else None


def best_requirement(pattern: str) -> list[str] | None:
    """The cheapest requirement of ``pattern`` to search for (see :func:`requirements`)."""
    reqs = requirements(pattern)
    return min(reqs, key=_req_cost) if reqs else None


def trie_regex(strings: Iterable[str]) -> str:
    """One regex matching any of ``strings``, factored by common prefixes (fast in ``re``)."""
    root: dict = {}
    for s in strings:
        node = root
        for ch in s:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        alts = [re.escape(k) + emit(v) for k, v in sorted(node.items()) if k]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        if "" in node:
            body = (f"(?:{body})" if len(alts) == 1 and len(alts[0]) > 1 else body) + "?"
        return body

    return emit(root)


def at_least(n: float) -> str:
    """Regex for a decimal number (optional fraction) whose value is >= floor(n), n >= 0."""
    s = str(max(0, math.floor(n)))
    d = len(s)
    alts = [rf"[1-9]\d{{{d},}}"]
    for i, ch in enumerate(s):
        if ch != "9":
            lo = int(ch) + 1
            alts.append(
                re.escape(s[:i]) + f"[{lo}-9]" + (rf"\d{{{d - i - 1}}}" if d - i - 1 else "")
            )
    alts.append(s)
    return r"(?<![\d.])(?:" + "|".join(alts) + r")(?:\.\d+)?(?![\d.])"


def value_trigger(pattern: str, minimum: float) -> str | None:
    """``pattern`` with its ``(?P<value>...)`` group replaced by :func:`at_least`, or None."""
    start = pattern.find("(?P<value>")
    if start < 0 or minimum < 0:
        return None
    depth, i, in_class = 0, start, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return pattern[:start] + "(?:" + at_least(minimum) + ")" + pattern[i + 1 :]
        i += 1
    return None
