"""The diagnosis as the Ansible path reports it: several logs of a host diagnosed together, and
each finding worded once (:func:`describe`) for the roles and playbooks to print.

Standard library only (Ansible ships it with ``ascend_diagnose`` and ``vllm_health``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from ..errors import AscendDeployError
from .engine import Diagnoser, diagnose_stream, open_log
from .learned import Model
from .rules import RuleSet

EVIDENCE_CHARS = 300  # of the first two evidence lines quoted in a summary


def describe(finding: dict[str, Any]) -> str:
    """One finding in one paragraph: cause (or best guess), pitfall, title, evidence, fix and,
    for a guess, the commands that settle it."""
    parts = []
    if finding.get("guess"):
        parts.append(
            f"Best guess (confidence {finding.get('confidence') or 0:.0%}, no known signature)"
        )
    parts.append(f"[pitfall {finding['pitfall']}]" if finding.get("pitfall") else "[neighbour]")
    evidence = " / ".join((finding.get("evidence") or [])[:2])
    if len(evidence) > EVIDENCE_CHARS:
        evidence = evidence[: EVIDENCE_CHARS - 3] + "..."
    text = (
        f"{' '.join(parts)} {finding['title']}. Evidence: {evidence or '-'}. Fix: {finding['fix']}"
    )
    if finding.get("variable"):
        text += f" (variable {finding['variable']})"
    if finding.get("guess") and finding.get("settle"):
        text += f". To settle it, run: {'; '.join(finding['settle'])}"
    return text


def diagnose_paths(
    paths: Sequence[str], rules: RuleSet, model: Model | None = None
) -> dict[str, Any]:
    """Diagnose every file together (most likely cause first), each finding with its ``summary``.
    ``model``: the learned stage (the Ansible modules pass it as content; None: rules only).

    Missing files are listed in ``missing`` (a crashed container may leave no log), files that
    cannot be read as text logs in ``unreadable`` with the reason; ``sources`` are those read.
    """
    diagnoser = Diagnoser(rules, model=model if model is not None else False)
    missing: list[str] = []
    read: list[str] = []
    unreadable: list[dict[str, str]] = []
    for path in paths:
        if not os.path.lexists(path):
            missing.append(path)
            continue
        try:
            with open_log(path) as fh:
                diagnose_stream(diagnoser, fh, path)
        except AscendDeployError as exc:  # binary, truncated or beyond the caps: say so, go on
            unreadable.append({"path": path, "reason": str(exc)})
            continue
        read.append(path)
    result = diagnoser.result()
    result.setdefault("last_errors", [])
    for finding in result["findings"]:
        finding["summary"] = describe(finding)
    result["sources"] = read
    result["missing"] = missing
    result["unreadable"] = unreadable
    return result


def write_result(path: str, result: dict[str, Any]) -> None:
    """The diagnosis as JSON (UTF-8 text kept readable)."""
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2, ensure_ascii=False)
        fh.write("\n")
