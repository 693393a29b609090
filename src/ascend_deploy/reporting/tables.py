"""Fixed-width text tables for operators: one renderer for every table the project prints.

The fleet tables of ``ascend_report``, the preflight table and the ``npu-smi`` tables are all
made here: a header line, an optional rule, one line per row (more when a cell wraps). Columns
are as wide as their widest cell unless given a width, in which case cells wrap to it. Trailing
spaces are stripped. Standard library only (Ansible ships it with the modules).
"""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    """One column: ``width`` wraps cells to that many characters (None: fit the widest)."""

    header: str
    width: int | None = None
    align: str = "<"  # ">" right-aligns


def cell(value: object, blank: str = "-") -> str:
    """One value as cell text: ``blank`` for None/empty, yes/no, lists joined with ``; ``."""
    if value is None:
        return blank
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        text = str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    elif isinstance(value, (list, tuple)):
        text = "; ".join(cell(v, blank) for v in value)
    else:
        text = str(value).replace("\n", " ")
    return text if text else blank


def render(
    columns: Sequence[Column | str],
    rows: Sequence[Sequence[object]],
    *,
    sep: str = "  ",
    rule: str | None = None,
    blank: str = "-",
) -> list[str]:
    """The table as lines: header, a rule of dashes joined by ``rule`` (if given), the rows.

    Values become text with :func:`cell` (``blank`` for None and empty values). A wrapped row
    continues on the next lines with the other columns left empty. The last column is not padded.
    """
    cols = [c if isinstance(c, Column) else Column(c) for c in columns]
    for row in rows:
        if len(row) != len(cols):
            raise ValueError(f"row {row!r} has {len(row)} cells for {len(cols)} columns")
    texts = [[cell(v, blank) for v in row] for row in rows]
    widths = [
        c.width if c.width is not None else max([len(c.header)] + [len(r[i]) for r in texts])
        for i, c in enumerate(cols)
    ]
    last = len(cols) - 1

    def line(values: Sequence[str]) -> str:
        parts = [
            v if i == last else (v.rjust if cols[i].align == ">" else v.ljust)(widths[i])
            for i, v in enumerate(values)
        ]
        return sep.join(parts).rstrip()

    out = [line([c.header for c in cols])]
    if rule is not None:
        out.append(rule.join("-" * w for w in widths))
    for row in texts:
        wrapped = [
            (textwrap.wrap(v, c.width, break_on_hyphens=False) or [""])
            if c.width is not None
            else [v]
            for v, c in zip(row, cols, strict=True)
        ]
        for n in range(max(len(w) for w in wrapped)):
            out.append(line([w[n] if n < len(w) else "" for w in wrapped]))
    return out


def fleet_table(
    rows: Sequence[Mapping],
    columns: Sequence[str],
    title: str = "",
    widths: Mapping[str, int] | None = None,
) -> list[str]:
    """One line per record (``ascend_report``): upper-case keys as headers, a rule of dashes;
    a column named in ``widths`` wraps its cells to that many characters."""
    widths = widths or {}
    lines = render(
        [Column(c.upper(), widths.get(c)) for c in columns],
        [[r.get(c) for c in columns] for r in rows],
        rule="  ",
    )
    return [title, *lines] if title else lines


def key_values(record: Mapping[str, object]) -> list[str]:
    """``key : value`` lines with the keys padded to the longest."""
    width = max((len(k) for k in record), default=0)
    return [f"{k.ljust(width)} : {v}" for k, v in record.items()]


def write_json(path: str, doc: object) -> str:
    """Write ``doc`` as indented JSON (parent directories created); returns the path."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, sort_keys=True)
        fh.write("\n")
    return path


def write_documents(directory: str, documents: Mapping[str, object]) -> list[str]:
    """Write each document as ``<directory>/<name>.json``; return the paths, sorted by name."""
    for name in documents:
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"document name {name!r} is not a plain file name")
    os.makedirs(directory, exist_ok=True)
    return [
        write_json(os.path.join(directory, f"{name}.json"), doc)
        for name, doc in sorted(documents.items())
    ]
