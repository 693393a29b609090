"""ascend_runtime reads ascend_runtime_compat_matrix_file on the controller and resolves with it.

The role runs on localhost with the host's versions given (no driver, no CANN). Each run stops
at the resolve step (before any image or venv work), so no Docker and no package index are
needed: a pin of the fixture's fictional v0.30.0 on hardware the site row does not list is
refused naming the site row's hardware (without the site matrix: "not in the compatibility
matrix"); a broken row and an unusable path fail naming them.
"""

from __future__ import annotations

import pytest
from conftest import ANSIBLE_PLAYBOOK, DATA, run_local_play

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="needs the venv"),
]
SITE = DATA / "site-matrix" / "site-v0.30.0.json"
BROKEN = DATA / "site-matrix" / "site-broken.json"


def run_role(tmp_path, matrix_file: str) -> str:
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "ascend_runtime_mode": "container",
                "ascend_runtime_hardware": "a5",
                "ascend_runtime_vllm_ascend": "v0.30.0",
                "ascend_runtime_compat_matrix_file": matrix_file,
                "ascend_versions": {"driver": None, "cann": None, "packages": {}},
            },
            "roles": ["ascend_runtime"],
        }
    ]
    done = run_local_play(play, tmp_path, timeout=300)
    assert done.returncode != 0, done.stdout[-3000:]
    return " ".join(done.stdout.split())


@pytest.mark.parametrize(
    "matrix_file, expect",
    [
        (str(SITE), "vllm-ascend v0.30.0 does not support hardware a5 (it lists a2, a3)"),
        ("", "vllm-ascend v0.30.0 is not in the compatibility matrix"),
        (str(BROKEN), f"site matrix {BROKEN}: row v0.30.0: field torch_npu: missing"),
        (str(DATA / "site-matrix"), "no such file on the controller"),
        ("site-v0.30.0.json", "no such file on the controller"),
    ],
    ids=["site", "shipped", "broken", "directory", "relative"],
)
def test_the_role_resolves_with_the_site_matrix(tmp_path, matrix_file, expect):
    out = run_role(tmp_path, matrix_file)
    assert expect in out, out[-3000:]
