"""model_weights refuses a model name that would break a path or a volume spec (issue 22).

A ':' in ``model_weights_name`` was staged and converted, then the replicas got a volume spec
docker cannot parse and were rolled back with "model directory not found" for a directory that
exists. The role's first task now refuses it, naming the variable, before anything is staged.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ANSIBLE_PLAYBOOK, run_local_play

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="needs the venv's ansible-playbook"),
]


def _role(tmp_path: Path, name: str) -> tuple[int, str]:
    root = tmp_path / "models"
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "model_weights_hardware": "a2",  # no npu-smi on this machine
                "model_weights_name": name,
                "model_weights_root": str(root),
                "model_weights_source": "path",
                "model_weights_src": str(tmp_path / "nowhere"),
            },
            "tasks": [
                {"name": "weights", "ansible.builtin.include_role": {"name": "model_weights"}}
            ],
        }
    ]
    done = run_local_play(play, tmp_path)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("name", ["qwen3:bad", "../escape", "", "-rf"])
def test_an_unsafe_model_name_is_refused_before_staging(tmp_path, name):
    rc, out = _role(tmp_path, name)
    assert rc != 0
    assert "model_weights_name is" in out and "Fix: set model_weights_name" in out, out[-2000:]
    assert "Refuse a model name" in out
    assert not (tmp_path / "models").exists()  # nothing staged, no directory made


def test_a_plain_model_name_passes_the_check(tmp_path):
    _rc, out = _role(tmp_path, "Qwen3-4B-FP8")
    # it goes on to staging, which fails on the missing source: the name check passed
    assert "model_weights_name is" not in out
    assert "nowhere" in out, out[-2000:]
