"""Verification suites: cases with prompts, expected keywords and generation options.

A suite is a YAML or JSON file: either a list of cases or ``{"cases": [...]}`` (optionally
with ``name`` and ``description``). JSON is read with the standard library; other YAML
needs PyYAML (used when importable). The shipped default, ``data/verify_suite.yaml``, is
written in YAML's JSON-compatible flow style so it loads without PyYAML.

Case fields (the format of ``tests/data/verification-questions.json`` is a subset):
``id``; ``prompt`` (one user message) or ``messages``; optional ``system``;
``long_context: {filler, repeat}`` (the user message becomes ``filler * repeat + "\\n\\n" +
prompt``); ``enable_thinking`` (Qwen3 chat template switch) and ``chat_template_kwargs``;
``expect_any`` / ``expect_all`` / ``expect_none`` (case-sensitive substrings of the answer),
``expect_exact`` (the whole answer, stripped); ``expect_reasoning`` (a thinking block must
be present); ``max_tokens`` (default 64) and ``temperature`` (default 0).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from ..resources import data_path

DEFAULT_SUITE = data_path("verify_suite.yaml")
_KNOWN = {
    "id",
    "prompt",
    "messages",
    "system",
    "long_context",
    "enable_thinking",
    "chat_template_kwargs",
    "expect_any",
    "expect_all",
    "expect_none",
    "expect_exact",
    "expect_reasoning",
    "max_tokens",
    "temperature",
    "kind",
    "description",
}


@dataclass
class Case:
    id: str
    messages: list[dict[str, str]]
    max_tokens: int = 64
    temperature: float = 0.0
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    expect_any: list[str] = field(default_factory=list)
    expect_all: list[str] = field(default_factory=list)
    expect_none: list[str] = field(default_factory=list)
    expect_exact: str | None = None
    expect_reasoning: bool = False
    kind: str = ""

    @property
    def prompt(self) -> str:
        return self.messages[-1]["content"]

    def check(self, answer: str) -> list[str]:
        """Why ``answer`` (thinking removed) fails the expectations; empty when it passes."""
        why = []
        if self.expect_any and not any(k in answer for k in self.expect_any):
            why.append(f"mentions none of {self.expect_any}")
        missing = [k for k in self.expect_all if k not in answer]
        if missing:
            why.append(f"lacks {missing}")
        present = [k for k in self.expect_none if k in answer]
        if present:
            why.append(f"contains forbidden {present}")
        if self.expect_exact is not None and answer.strip() != self.expect_exact:
            why.append(f"is not exactly {self.expect_exact!r}")
        return why


def _strings(value: Any, where: str, key: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise InputError(f"{where}: '{key}' must be a string or a list of strings")


def parse_case(raw: Any, where: str) -> Case:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: a case must be a mapping, got {type(raw).__name__}")
    unknown = sorted(set(raw) - _KNOWN)
    if unknown:
        raise InputError(f"{where}: unknown field(s) {unknown}; known: {sorted(_KNOWN)}")
    cid = raw.get("id")
    if not isinstance(cid, str) or not cid:
        raise InputError(f"{where}: every case needs a non-empty string 'id'")
    where = f"{where} ({cid})"
    messages = raw.get("messages")
    if messages is not None:
        if not (
            isinstance(messages, list)
            and messages
            and all(
                isinstance(m, dict)
                and isinstance(m.get("role"), str)
                and isinstance(m.get("content"), str)
                for m in messages
            )
        ):
            raise InputError(f"{where}: 'messages' must be a list of {{role, content}} strings")
        messages = [{"role": m["role"], "content": m["content"]} for m in messages]
    else:
        prompt = raw.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise InputError(f"{where}: needs 'prompt' (a string) or 'messages'")
        lc = raw.get("long_context")
        if lc is not None:
            if not (
                isinstance(lc, dict)
                and isinstance(lc.get("filler"), str)
                and isinstance(lc.get("repeat"), int)
                and lc["repeat"] > 0
            ):
                raise InputError(f"{where}: 'long_context' needs filler (string), repeat (> 0)")
            prompt = lc["filler"] * lc["repeat"] + "\n\n" + prompt
        messages = [{"role": "user", "content": prompt}]
    system = raw.get("system")
    if system is not None:
        if not isinstance(system, str):
            raise InputError(f"{where}: 'system' must be a string")
        messages = [{"role": "system", "content": system}, *messages]
    kwargs = raw.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise InputError(f"{where}: 'chat_template_kwargs' must be a mapping")
    kwargs = dict(kwargs)
    if "enable_thinking" in raw:
        if not isinstance(raw["enable_thinking"], bool):
            raise InputError(f"{where}: 'enable_thinking' must be true or false")
        kwargs["enable_thinking"] = raw["enable_thinking"]
    max_tokens = raw.get("max_tokens", 64)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise InputError(f"{where}: 'max_tokens' must be a positive integer")
    temperature = raw.get("temperature", 0.0)
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool):
        raise InputError(f"{where}: 'temperature' must be a number")
    exact = raw.get("expect_exact")
    if exact is not None and not isinstance(exact, str):
        raise InputError(f"{where}: 'expect_exact' must be a string")
    case = Case(
        id=cid,
        messages=messages,
        max_tokens=max_tokens,
        temperature=float(temperature),
        chat_template_kwargs=kwargs,
        expect_any=_strings(raw.get("expect_any"), where, "expect_any"),
        expect_all=_strings(raw.get("expect_all"), where, "expect_all"),
        expect_none=_strings(raw.get("expect_none"), where, "expect_none"),
        expect_exact=exact,
        expect_reasoning=bool(raw.get("expect_reasoning", False)),
        kind=str(raw.get("kind") or ""),
    )
    if not (case.expect_any or case.expect_all or case.expect_exact is not None):
        raise InputError(f"{where}: give at least one of expect_any, expect_all, expect_exact")
    return case


def _parse_text(text: str, path: str) -> Any:
    try:
        return _parse(text, path)
    except RecursionError:
        raise InputError(f"{path}: nested too deeply to be a suite") from None


def _parse(text: str, path: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as json_exc:
        try:
            import yaml  # type: ignore[import-untyped]
        except ImportError:
            raise InputError(
                f"{path}: not JSON ({json_exc.msg} at line {json_exc.lineno}) and PyYAML is not "
                "installed; write the suite in JSON (valid YAML) or install PyYAML"
            ) from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}" if mark is not None else ""
            raise InputError(f"{path}: invalid YAML{at}: {getattr(exc, 'problem', exc)}") from None


def load_suite(path: str | None = None) -> tuple[str, list[Case]]:
    """(suite name, cases) of ``path`` (default: the shipped suite)."""
    path = path or DEFAULT_SUITE
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory; give a suite file (YAML or JSON)")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise InputError(f"{path}: suite file not found") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the suite ({exc.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f"{path}: not a regular file; give a suite file (YAML or JSON)")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(16 * 1024 * 1024 + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the suite ({exc.strerror})") from None
    finally:
        os.close(fd)
    if len(raw) > 16 * 1024 * 1024:
        raise InputError(f"{path}: suite file larger than 16 MiB")
    if b"\x00" in raw:
        raise InputError(f"{path}: binary data, not a YAML/JSON suite")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise InputError(f"{path}: the suite file is empty")
    return suite_from_doc(_parse_text(text, path), path)


def suite_from_doc(doc: Any, path: str = "suite") -> tuple[str, list[Case]]:
    """(name, cases) of a parsed suite document; ``path`` names it in errors."""
    name = os.path.basename(path)
    if isinstance(doc, dict):
        name = str(doc.get("name") or name)
        doc = doc.get("cases")
    if not isinstance(doc, list) or not doc:
        raise InputError(f"{path}: expected a non-empty list of cases (or a mapping with 'cases')")
    cases = [parse_case(c, f"{path}: case {i + 1}") for i, c in enumerate(doc)]
    ids = [c.id for c in cases]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise InputError(f"{path}: duplicate case id(s) {dup}")
    return name, cases
