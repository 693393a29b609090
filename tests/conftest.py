"""Shared test fixtures and paths."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
SAMPLES = DATA / "samples"  # verbatim real outputs, copied from shared/reference/samples


@pytest.fixture
def samples_dir() -> Path:
    return SAMPLES


def sample(name: str) -> str:
    """The text of one verbatim sample file."""
    return (SAMPLES / name).read_text(encoding="utf-8")


ANSIBLE_PLAYBOOK = REPO / ".venv" / "bin" / "ansible-playbook"


def run_local_play(
    play: list[dict],
    tmp_path: Path,
    env: dict[str, str] | None = None,
    args: Sequence[str] = (),
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """Run ``play`` on localhost (connection local, this Python) with the repository's ansible.cfg.

    The play is written to ``tmp_path/play.yml``; ``env`` adds to the environment (facts are
    cached in memory, temporary files stay under ``tmp_path``); ``args`` go to ansible-playbook.
    """
    (tmp_path / "play.yml").write_text(json.dumps(play))
    full_env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_FACT_CACHING": "memory",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-local"),
        **(env or {}),
    }
    cmd = [str(ANSIBLE_PLAYBOOK), "-i", "localhost,", "-c", "local", "-e"]
    cmd += [f"ansible_python_interpreter={sys.executable}", str(tmp_path / "play.yml"), *args]
    return subprocess.run(
        cmd, cwd=REPO, env=full_env, capture_output=True, text=True, timeout=timeout, check=False
    )
