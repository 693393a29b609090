#!/usr/bin/python
"""Ansible module: render per-host records as one fixed-width fleet table (controller side)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_report
short_description: Render one table for the fleet from per-host records
description:
  - "Runs on the controller (C(delegate_to: localhost), C(run_once)). Read-only."
  - Each row is a dict; C(columns) names the keys in order. Lists are joined with C(; ).
  - Optionally writes the rows as JSON to C(dest) (for CI and the benchmark); never secrets,
    the rows are built by the playbook from facts only.
  - With C(documents) (and no rows) it writes each document as C(<dir>/<name>.json) instead
    (one call for a host's plan, versions and status rather than one copy task each).
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
  widths:
    description: Column -> width; cells of these columns wrap to it (long problem texts).
    type: dict
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

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.reporting.tables import (
    fleet_table,
    write_documents,
    write_json,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "rows": {"type": "list", "elements": "dict"},
            "columns": {"type": "list", "elements": "str"},
            "title": {"type": "str", "default": ""},
            "dest": {"type": "path"},
            "documents": {"type": "dict"},
            "dir": {"type": "path"},
            "widths": {"type": "dict"},
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
    try:
        widths = {str(k): int(v) for k, v in (p["widths"] or {}).items()}
    except (TypeError, ValueError):
        module.fail_json(msg=f"ascend_report: widths must map columns to numbers: {p['widths']!r}")
    table = fleet_table(p["rows"], p["columns"], p["title"], widths)
    if p["dest"] and not module.check_mode:
        try:
            write_json(p["dest"], p["rows"])
        except OSError as exc:
            module.fail_json(msg=f"ascend_report: cannot write {p['dest']}: {exc.strerror}")
    module.exit_json(changed=False, table=table, rows=p["rows"])


if __name__ == "__main__":
    main()
