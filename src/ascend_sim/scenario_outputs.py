"""Read what a molecule scenario's converge kept per case (molecule/_shared/run_case.yml).

Each case directory under ``$MOLECULE_EPHEMERAL_DIRECTORY/<scenario>/<case>/`` holds run.json
(deploy.yml's exit code, stdout and stderr) and, when the summary play ran, deploy-summary.json.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

BASE_CONFIG = Path(__file__).resolve().parents[2] / "molecule" / "_shared" / "base.yml"


def outputs_dir(scenario: str) -> Path:
    """Where ``scenario``'s converge keeps its cases (nonexistent outside molecule)."""
    return Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent")) / scenario


def read_case(scenario: str, name: str) -> tuple[dict, list[dict]] | None:
    """(run, summary rows) of case ``name``, or None when converge did not run it."""
    case_dir = outputs_dir(scenario) / name
    run_file = case_dir / "run.json"
    if not run_file.exists():
        return None
    summary = case_dir / "deploy-summary.json"
    rows = json.loads(summary.read_text()) if summary.exists() else []
    return json.loads(run_file.read_text()), rows


def row_of(rows: list[dict], host: str) -> dict:
    """The summary row of ``host`` (the summary lists only the hosts of the run's --limit)."""
    found = [r for r in rows if r.get("host") == host]
    assert found, f"no summary row for {host}: {rows}"
    return found[0]


def api_key() -> str:
    """The API key every scenario's services use (``vllm_service_api_key`` in base.yml)."""
    found = re.search(r"^\s*vllm_service_api_key:\s*(\S+)\s*$", BASE_CONFIG.read_text(), re.M)
    assert found, f"{BASE_CONFIG} sets no vllm_service_api_key"
    return found.group(1).strip("'\"")


def auth_headers() -> dict[str, str]:
    """JSON and bearer-token headers for a request to a scenario's service."""
    return {"Content-Type": "application/json", "Authorization": f"Bearer {api_key()}"}
