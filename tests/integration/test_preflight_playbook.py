"""playbooks/preflight.yml writes reports/preflight.json, also under --check (issue 11 F).

A host without npu-smi fails its checks; the fleet table and its JSON still come out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ANSIBLE_PLAYBOOK, REPO

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("check", [True, False], ids=["check", "run"])
def test_preflight_json_is_written(tmp_path, check):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        json.dumps(
            {
                "ascend_llm": {
                    "hosts": {
                        "own-local": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": sys.executable,
                        }
                    }
                }
            }
        )
    )
    reports = tmp_path / "reports"
    cmd = [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(REPO / "playbooks" / "preflight.yml")]
    cmd += ["-e", f"ascend_report_dir={reports}"] + (["--check"] if check else [])
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_FACT_CACHING": "memory",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
        # no npu-smi on this machine: the host fails its checks
        "PATH": f"{tmp_path}:{os.path.dirname(sys.executable)}:/usr/bin:/bin",
    }
    done = subprocess.run(
        cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode != 0, done.stdout[-3000:]
    rows = json.loads((reports / "preflight.json").read_text())
    assert [r["host"] for r in rows] == ["own-local"]
    assert "npu-smi: not found" in rows[0]["problems"][0], rows
