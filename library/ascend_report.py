#!/usr/bin/python
"""Ansible module: render per-host records as one fixed-width fleet table (controller side)."""

# ruff: noqa: E402  (Ansible modules put DOCUMENTATION before the imports)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_report
short_description: Render one table for the fleet from per-host records
description:
  - Runs on the controller (C(delegate_to: localhost), C(run_once)). Read-only.
  - Each row is a dict; C(columns) names the keys in order. Lists are joined with C(; ).
  - Optionally writes the rows as JSON to C(dest) (for CI and the benchmark); never secrets,
    the rows are built by the playbook from facts only.
  - With C(documents) (and no rows) it writes each document as C(<dir>/<name>.json) instead:
    one call for a host's plan, versions and status rather than one copy task each.
options:
  rows:
    description: One dict per host (required unless C(documents) is given).
    type: list
    elements: dict
  columns:
    description: Keys to show, in order (required with C(rows)).
    type: list
    elements: str
  documents:
    description: Name -> JSON document to write into C(dir).
    type: dict
  dir:
    description: Directory (created) for C(documents).
    type: path
  title:
    description: Line printed above the table.
    type: str
    default: ""
  dest:
    description: Write the rows as JSON here (on the controller).
    type: path
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Fleet table
  ascend_report:
    rows: "{{ rows }}"
    columns: [host, cards, health, problems]
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
table:
  description: The table, one string per line.
  returned: with rows
  type: list
  elements: str
rows:
  description: The rows as given (for tasks that print more from them).
  returned: with rows
  type: list
  elements: dict
written:
  description: Paths of the documents written.
  returned: with documents
  type: list
  elements: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return "; ".join(_cell(v) for v in value) or "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value).replace("\n", " ")
    return text if text else "-"


def render(rows: list[dict], columns: list[str], title: str = "") -> list[str]:
    """Fixed-width table: header, rule, one line per row."""
    cells = [[_cell(row.get(col)) for col in columns] for row in rows]
    widths = [max([len(col)] + [len(r[i]) for r in cells]) for i, col in enumerate(columns)]
    last = len(columns) - 1

    def line(values: list[str]) -> str:
        parts = [v if i == last else v.ljust(widths[i]) for i, v in enumerate(values)]
        return "  ".join(parts).rstrip()

    out = [title] if title else []
    out.append(line([c.upper() for c in columns]))
    out.append(line(["-" * w for w in widths]))
    out.extend(line(r) for r in cells)
    return out


def write_documents(directory: str, documents: dict) -> list[str]:
    """Write each document as ``<directory>/<name>.json``; return the paths."""
    os.makedirs(directory, exist_ok=True)
    written = []
    for name, doc in sorted(documents.items()):
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"document name {name!r} is not a plain file name")
        path = os.path.join(directory, f"{name}.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2, sort_keys=True)
            fh.write("\n")
        written.append(path)
    return written


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "rows": {"type": "list", "elements": "dict"},
            "columns": {"type": "list", "elements": "str"},
            "title": {"type": "str", "default": ""},
            "dest": {"type": "path"},
            "documents": {"type": "dict"},
            "dir": {"type": "path"},
        },
        required_one_of=[("rows", "documents")],
        mutually_exclusive=[("rows", "documents")],
        required_together=[("rows", "columns"), ("documents", "dir")],
        supports_check_mode=True,
    )
    p = module.params
    if p["documents"] is not None:
        written: list[str] = []
        if not module.check_mode:
            try:
                written = write_documents(p["dir"], p["documents"])
            except (OSError, ValueError) as exc:
                module.fail_json(msg=f"ascend_report: cannot write into {p['dir']}: {exc}")
        module.exit_json(changed=False, written=written)
    table = render(p["rows"], p["columns"], p["title"])
    if p["dest"] and not module.check_mode:
        try:
            os.makedirs(os.path.dirname(p["dest"]) or ".", exist_ok=True)
            with open(p["dest"], "w", encoding="utf-8") as fh:
                json.dump(p["rows"], fh, indent=2, sort_keys=True)
        except OSError as exc:
            module.fail_json(msg=f"ascend_report: cannot write {p['dest']}: {exc.strerror}")
    module.exit_json(changed=False, table=table, rows=p["rows"])


if __name__ == "__main__":
    main()
