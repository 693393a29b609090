"""ascend_runtime host mode resolves its pins against the real package index, installing nothing.

The role runs on localhost with ``ascend_runtime_dry_run: true``: it creates the venv and runs
``pip install --dry-run --report`` for the torch / torch_npu / vllm / vllm-ascend pins of a
compat-matrix row. The install and the torch_npu import are the steps that need real NPUs
(tagged npu-hardware / molecule-notest) and are skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ANSIBLE_PLAYBOOK, run_local_play

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="needs the venv"),
]


def test_host_mode_resolves_the_matched_pins_from_pypi(tmp_path):
    try:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(tmp_path / "probe"),
             "--only-binary=:all:", "six==1.16.0", "-q"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        pytest.skip("the package index is not reachable from here")
    out = tmp_path / "out.json"
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "ascend_runtime_mode": "host",
                "ascend_runtime_hardware": "a2",  # no npu-smi on this machine
                "ascend_runtime_vllm_ascend": "v0.13.0",
                "ascend_runtime_venv": str(tmp_path / "venv"),
                "ascend_runtime_python": sys.executable,
                "ascend_runtime_dry_run": True,
                "ascend_runtime_cann_install": True,
                # The host's versions as ascend_versions reports them (an HDK 25.5 driver, no
                # CANN yet), so the test does not depend on this machine's /usr/local/Ascend.
                "ascend_versions": {"driver": {"version": "25.5.0"}, "cann": None, "packages": {}},
            },
            "roles": ["ascend_runtime"],
            "post_tasks": [
                {
                    "name": "Save",
                    "ansible.builtin.copy": {
                        "content": "{{ {'pins': ascend_runtime_pins, "
                        "'resolved': ascend_runtime_resolved_packages} | to_json }}",
                        "dest": str(out),
                    },
                }
            ],
        }
    ]
    env = {
        "ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.junit",
        "JUNIT_OUTPUT_DIR": str(tmp_path / "junit"),
        # This machine's pip config adds local indexes and constraints; use the real index only.
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_FIND_LINKS": "",
    }
    done = run_local_play(play, tmp_path, env=env, timeout=900)
    if done.returncode != 0:
        # pip's resolver answered "no": the role must say which pins, which index, pip's reason
        # and the fix (for v0.13.0, torch-npu 2.8.0.post2 and torch 2.8.0 conflict on PyPI:
        # vllm-ascend installs torch_npu from Huawei's index and vLLM from source).
        out = done.stdout
        assert "pip cannot resolve torch==2.8.0 torch-npu==2.8.0.post2 vllm==0.13.0" in out, out[
            -3000:
        ]
        assert "https://pypi.org/simple" in out and "Fix: mirror these exact versions" in out
        assert "conflicting dependencies" in out or "ResolutionImpossible" in out
        assert not list((tmp_path / "venv").glob("lib/python*/site-packages/torch")), "installed"
        return
    result = json.loads(out.read_text())
    resolved = {k.lower().replace("_", "-"): v for k, v in result["resolved"].items()}
    assert resolved["torch"] == "2.8.0"
    assert resolved["vllm-ascend"] == "0.13.0"
    assert not list((tmp_path / "venv").glob("lib/python*/site-packages/torch")), "installed"
