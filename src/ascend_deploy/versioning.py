"""Compare the version strings of the Ascend / vLLM stack (standard library only).

Two numbering schemes meet on an Ascend host:

* Huawei (driver, firmware, CANN): ``8.1.RC1`` < ``8.1.0``, ``24.1.rc2`` < ``24.1.rc2.2`` <
  ``24.1.rc3`` < ``24.1.0``, internal test builds ``8.0.T63`` sort before the RCs, and build
  tags such as ``.B150`` / ``.b090`` / ``.sph001`` do not change the order.
* PEP 440-like Python packages: ``0.13.0rc1`` < ``0.13.0`` < ``0.13.0.post1``,
  ``2.5.1.post1.dev20250528`` < ``2.5.1.post1``, ``2.7.1.dev20250724`` < ``2.7.1``;
  a ``+local`` part is ignored for ordering.

``version_key`` turns either into a tuple of ints that sorts correctly; ``satisfies`` checks
a version against a matrix cell (``2.8.0``, ``>=8.0.RC2``, ``>=3.9,<3.12``,
``v0.10.1/v0.10.1.1``, ``8.0.0 (Dockerfile)``, ``unpinned``).
"""

from __future__ import annotations

import re

# Phase ranks: dev-only < test build (T) < alpha < beta < rc < final; post sorts after final.
_DEV_ONLY, _TEST, _ALPHA, _BETA, _RC, _FINAL = 0, 1, 2, 3, 4, 5
_NO_DEV = 1 << 62
_RELEASE_LEN = 6

_PHASES = {
    "rc": _RC,
    "c": _RC,
    "pre": _RC,
    "a": _ALPHA,
    "alpha": _ALPHA,
    "b": _BETA,
    "beta": _BETA,
    "t": _TEST,
}
_TOKEN = re.compile(r"[0-9]+|[a-z]+")
_LEADING = re.compile(r"^v?(\d+(?:\.\d+)*)(.*)$", re.I)
_BUILD_WORDS = {"spc", "sph", "h", "build"}


def clean(text: str) -> str:
    """Strip a leading ``v``, ``(notes)`` and whitespace: ``v0.8.4 (x)`` -> ``0.8.4``."""
    text = re.sub(r"\(.*?\)", " ", str(text)).strip()
    if text[:1] in "vV" and text[1:2].isdigit():
        text = text[1:]
    return text


def is_version(text: object) -> bool:
    """True when ``text`` parses as a version."""
    try:
        version_key(str(text))
    except ValueError:
        return False
    return True


def version_key(text: str) -> tuple:
    """A sortable key for a version string; ValueError when it is not a version."""
    raw = clean(text).lower()
    raw = raw.split("+", 1)[0]  # PEP 440 local part does not order
    raw = re.sub(r"\s+", ".", raw)  # "9.1.0 beta" -> "9.1.0.beta"
    m = _LEADING.match(raw)
    if not m or not raw:
        raise ValueError(f"not a version: {text!r}")
    release = [int(p) for p in m.group(1).split(".")]
    rest = m.group(2)
    if rest and not re.fullmatch(r"[0-9a-z._\-]*", rest):
        raise ValueError(f"not a version: {text!r}")
    tokens = _TOKEN.findall(rest)
    phase: tuple[int, ...] | None = None
    post = -1
    dev = _NO_DEV
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        num = tokens[i + 1] if i + 1 < len(tokens) and tokens[i + 1].isdigit() else None
        step = 2 if num is not None else 1
        if tok.isdigit():
            # a number right after a phase extends it (24.1.rc2.2); others are build numbers
            if phase is not None and post < 0 and dev == _NO_DEV:
                phase = (*phase, int(tok))
        elif tok in _BUILD_WORDS or (tok == "b" and num is not None and len(num) >= 3):
            pass  # Huawei build / patch tags (.B150, .b090, .sph001, SPC001) do not order
        elif tok in _PHASES and phase is None and post < 0 and dev == _NO_DEV:
            phase = (_PHASES[tok], int(num) if num is not None else 0)
        elif tok in {"post", "rev", "r"} and post < 0:
            post = int(num) if num is not None else 0
        elif tok == "dev" and dev == _NO_DEV:
            dev = int(num) if num is not None else 0
        else:
            raise ValueError(f"not a version: {text!r} (unexpected {tok!r})")
        i += 1 if tok.isdigit() else step
    if phase is None:
        phase = (_DEV_ONLY,) if dev != _NO_DEV and post < 0 else (_FINAL,)
    padded = tuple(release[:_RELEASE_LEN]) + (0,) * max(0, _RELEASE_LEN - len(release))
    return (padded, phase, post, dev)


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 as ``a`` is older than, equal to or newer than ``b``."""
    ka, kb = version_key(a), version_key(b)
    return (ka > kb) - (ka < kb)


def is_prerelease(text: str) -> bool:
    """True for rc / alpha / beta / test / dev versions (``v0.13.0rc1``, ``8.2.RC1``)."""
    _release, phase, post, dev = version_key(text)
    return phase[0] != _FINAL or (dev != _NO_DEV and post < 0)


def same_release(a: str, b: str) -> bool:
    """Equal as versions (case, ``v`` prefix and trailing ``.0`` do not matter)."""
    return version_key(a) == version_key(b)


_OP = re.compile(r"^(==|>=|<=|!=|~=|>|<|=)?\s*(.+)$")


def satisfies(version: str, spec: str) -> bool | None:
    """Does ``version`` meet a matrix cell ``spec``? None when the cell pins nothing.

    A cell is one or more alternatives separated by ``/``; each alternative is a
    comma-separated list of clauses ``[op]VERSION`` (no operator = equal).
    """
    spec = re.sub(r"\(.*?\)", " ", str(spec)).strip()
    if not spec or spec.lower() in {"unpinned", "unknown", "any", "none"}:
        return None
    key = version_key(version)
    for alternative in spec.split("/"):
        if all(_clause(key, clause.strip()) for clause in alternative.split(",") if clause.strip()):
            return True
    return False


def _clause(key: tuple, clause: str) -> bool:
    m = _OP.match(clause)
    if not m:
        raise ValueError(f"not a version clause: {clause!r}")
    op, ver = m.group(1) or "==", m.group(2).strip()
    other = version_key(ver)
    if op in {"==", "="}:
        return key == other
    if op == "!=":
        return key != other
    if op == ">=":
        return key >= other
    if op == "<=":
        return key <= other
    if op == ">":
        return key > other
    if op == "<":
        return key < other
    # ~= X.Y.Z: >= X.Y.Z and same X.Y
    prefix = other[0][: max(1, len(clean(ver).split(".")) - 1)]
    return key >= other and key[0][: len(prefix)] == prefix


def pinned_version(spec: str) -> str | None:
    """The exact version a cell pins (``2.8.0``, ``v0.13.0`` -> ``0.13.0``), else None."""
    spec = re.sub(r"\(.*?\)", " ", str(spec)).strip()
    first = spec.split("/")[0].strip()
    if not first or any(c in first for c in "<>=!~,") or not is_version(first):
        return None
    return clean(first)
