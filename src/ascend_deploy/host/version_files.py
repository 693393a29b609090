"""Read Ascend version files: ``KEY=VALUE`` and ``Key : value`` (standard library only).

Formats (docs/sources.md, version files): driver and firmware ``version.info``,
``ascend_toolkit_install.info``, ``ascend_nnae_install.info``, ``/etc/ascend_install.info``
and ``version.cfg`` are ``KEY=VALUE``; NNAL/ATB and MindIE ``version.info`` are
``Key : value`` (MindIE also ``key:value``). Copies pasted by users carry ``cat -n`` line
numbers or indentation; both are tolerated. Lines starting with ``#`` are comments.
"""

from __future__ import annotations

import os
import re

from ..errors import InputError
from ..safe_open import open_regular

MAX_BYTES = 1 << 20  # version files are a few hundred bytes; refuse anything huge
CLIP = 80  # characters of a value quoted in an error message

_CAT_N = re.compile(r"^\s*\d+\t\s*|^\s*\d+\s{2,}")
_EQ = re.compile(r"^([A-Za-z_][\w.\-]*)\s*=\s*(.*)$")
_COLON = re.compile(r"^([A-Za-z][\w .\-]*?)\s*:\s*(.*)$")
_INNER = re.compile(r"V(\d+)R(\d+)C(\d+)", re.I)


def clip(value: str, n: int = CLIP) -> str:
    """``value`` cut to ``n`` characters for an error message (a file can hold 1 MiB)."""
    return value if len(value) <= n else value[: n - 3] + "..."


def read_text(path: str, what: str) -> str | None:
    """The text of ``path``; None when it does not exist; InputError when unreadable/binary
    or not a regular file (a FIFO would block the read forever, a device never end)."""
    fd = open_regular(path, what, "; replace it with the file the package installs")
    if fd is None:
        return None
    try:
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what} ({exc.strerror})") from None
    finally:
        os.close(fd)
    if len(raw) > MAX_BYTES:
        raise InputError(f"{path}: {what} is larger than 1 MiB; not a version file")
    if b"\0" in raw:
        raise InputError(f"{path}: {what} contains binary data; reinstall the package")
    try:
        return raw.decode("utf-8-sig")  # a BOM from an editor is not part of the first key
    except UnicodeDecodeError:
        raise InputError(f"{path}: {what} is not UTF-8 text; reinstall the package") from None


def parse_pairs(text: str, source: str, what: str, style: str = "eq") -> dict[str, str]:
    """Parse ``KEY=VALUE`` (style ``eq``) or ``Key : value`` (style ``colon``) lines.

    Every non-blank, non-comment line must parse, so truncated or foreign files are
    reported instead of half-read. InputError names the file and the line.
    """
    pattern = _EQ if style == "eq" else _COLON
    out: dict[str, str] = {}
    if not text.strip():
        raise InputError(f"{source}: {what} is empty; reinstall the package that owns it")
    for number, line in enumerate(text.splitlines(), 1):
        body = line.strip()
        if not body or body.startswith("#"):
            continue
        m = pattern.match(body)
        if not m:
            stripped = _CAT_N.sub("", line, count=1).strip()
            if stripped.startswith("#"):
                continue
            m = pattern.match(stripped)
        if not m:
            shown = clip(body, 60)
            form = "KEY=VALUE" if style == "eq" else "'Key : value'"
            raise InputError(
                f"{source}: line {number} of the {what} is not {form} ({shown!r}); "
                "the file is truncated or not a version file"
            )
        out[m.group(1).strip()] = m.group(2).strip().strip('"')
    if not out:
        raise InputError(f"{source}: {what} has no entries")
    return out


def require(pairs: dict[str, str], key: str, source: str, what: str) -> str:
    """The value of ``key`` (case-insensitive); InputError when missing or blank."""
    for k, v in pairs.items():
        if k.lower() == key.lower() and v:
            return v
    raise InputError(f"{source}: {what} has no {key}= entry; the file is truncated or damaged")


def get(pairs: dict[str, str], key: str) -> str | None:
    """The value of ``key`` (case-insensitive) or None."""
    for k, v in pairs.items():
        if k.lower() == key.lower():
            return v or None
    return None


def inner_code(text: str | None) -> tuple[int, int] | None:
    """``V100R001C21SPC001B238`` -> (1, 21): the R and C numbers that name a release train."""
    if not text:
        return None
    m = _INNER.search(text)
    return (int(m.group(2)), int(m.group(3))) if m else None


def code_label(code: tuple[int, int]) -> str:
    return f"R{code[0]:03d}C{code[1]:02d}"


def parse_code_list(text: str | None, source: str, key: str) -> list[tuple[tuple, tuple]]:
    """``[V100R001C13],[V100R001C15,V100R001C19]`` -> list of (low, high) C-code ranges."""
    if not text:
        return []
    groups = re.findall(r"\[([^\]]*)\]", text)
    if not groups:
        raise InputError(f"{source}: {key}={clip(text)!r} is not a list of [V100R001Cnn] entries")
    out = []
    for group in groups:
        codes = [inner_code(part) for part in group.split(",") if part.strip()]
        if not codes or any(c is None for c in codes):
            raise InputError(f"{source}: {key} entry [{clip(group)}] is not a V100R001Cnn code")
        out.append((codes[0], codes[-1]))
    return out


def parse_range_list(text: str | None, source: str, key: str) -> list[tuple[str, str]]:
    """``[7.0.0,7.5.99]`` or ``[23.0.rc3,23.0.rc3.],[23.0.0,23.0.0.]`` -> (low, high) pairs."""
    if not text:
        return []
    groups = re.findall(r"\[([^\]]*)\]", text)
    out = []
    for group in groups:
        parts = [p.strip() for p in group.split(",")]
        if len(parts) != 2 or not all(parts):
            raise InputError(f"{source}: {key} entry [{clip(group)}] is not a [low,high] range")
        out.append((parts[0], parts[1]))
    if not out:
        raise InputError(f"{source}: {key}={clip(text)!r} is not a list of [low,high] ranges")
    return out
