"""vllm_service_npus naming an NPU the host does not have (issue 22 item 5).

It gave a raw Jinja error (``object of type 'dict' has no attribute '99'``) deep in planning. The
role's planning tasks run here on localhost with npu-smi answering a real one-NPU output: the
listed id that is missing is named, with the host's NPUs and the fix.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import ANSIBLE_PLAYBOOK, SAMPLES, run_local_play

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="needs the venv's ansible-playbook"),
]
INFO = SAMPLES / "npu-smi-info_910B4_anon_busid_10.txt"


def _plan(tmp_path: Path, npus: list[int]) -> tuple[int, str]:
    fake = tmp_path / "bin" / "npu-smi"
    fake.parent.mkdir()
    fake.write_text(
        f'#!/bin/sh\n[ "$1" = "info" ] && [ -z "$2" ] && exec /bin/cat "{INFO}"\nexit 1\n'
    )
    fake.chmod(0o755)
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "vllm_service_npus": npus,
                "vllm_service_config_dir": str(tmp_path / "etc"),
                "vllm_service_image": "quay.io/ascend/vllm-ascend:v0.23.0",
            },
            "tasks": [
                {
                    "name": "plan",
                    "ansible.builtin.include_role": {
                        "name": "vllm_service",
                        "tasks_from": "plan.yml",
                    },
                }
            ],
        }
    ]
    done = run_local_play(play, tmp_path, env={"PATH": f"{fake.parent}:{os.environ['PATH']}"})
    return done.returncode, done.stdout + done.stderr


def test_a_listed_npu_the_host_lacks_is_named(tmp_path):
    rc, out = _plan(tmp_path, [0, 99])
    assert rc != 0
    assert "vllm_service_npus lists NPU 99, which npu-smi info does not show" in out, out[-3000:]
    assert "(its NPUs: 0)" in out
    assert "has no attribute" not in out
