"""deploy.yml with a host that does not answer: reported as UNREACHABLE, not dropped.

A real ansible-playbook run of deploy.yml over SSH to a closed port on 127.0.0.1 (no Docker): the
host is the canary and the whole batch, the case in which Ansible would otherwise end the run
without any summary.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess

from conftest import ANSIBLE_PLAYBOOK, REPO


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(tmp_path, *args: str) -> tuple[int, str]:
    port = _closed_port()
    inventory = {
        "all": {
            "children": {
                "ascend_llm": {
                    "hosts": {
                        "gone-host": {
                            "ansible_connection": "ssh",
                            "ansible_host": "127.0.0.1",
                            "ansible_port": port,
                            "ansible_python_interpreter": "/usr/bin/python3",
                        }
                    },
                    "vars": {"vllm_service_api_key": "test-key", "vllm_service_name": "chat"},
                }
            }
        }
    }
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    cmd = [str(ANSIBLE_PLAYBOOK), "-i", str(tmp_path / "hosts.yml"), str(REPO / "deploy.yml")]
    cmd += ["-e", f"ascend_report_dir={tmp_path / 'reports'}", *args]
    proc = subprocess.run(
        cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_a_host_that_does_not_answer_is_in_the_summary(tmp_path):
    rc, out = _run(tmp_path)
    assert rc != 0, out[-3000:]
    (row,) = json.loads((tmp_path / "reports" / "deploy-summary.json").read_text())
    assert row["host"] == "gone-host" and row["status"] == "UNREACHABLE", row
    assert row["service"] == "chat"  # two services on one host are two rows, told apart
    why = row["why"]
    assert "gone-host did not answer (" in why and "Fix: check that the host is up" in why
    if shutil.which("ssh"):  # docker/ci-setup.sh installs openssh-client
        assert "Connection refused" in row["why"], row["why"]
    assert "CANARY gone-host not deployed" in out
    # The table was printed (the rescue's summary, as for a failed canary).
    assert re.search(r"gone-host +chat +UNREACHABLE", out), out[-3000:]


def test_check_mode_reports_it_the_same_way(tmp_path):
    rc, _out = _run(tmp_path, "--check")
    assert rc != 0
    (row,) = json.loads((tmp_path / "reports" / "deploy-summary.json").read_text())
    assert row["status"] == "UNREACHABLE", row


def test_an_unknown_hardware_family_is_refused_in_the_first_play_naming_the_variable(tmp_path):
    rc, out = _run(tmp_path, "-e", "ascend_runtime_hardware=910b")
    assert rc != 0
    flat = re.sub(r"\s+", " ", out)
    expected = "ascend_runtime_hardware is 910b: it must be one of auto, a2, a3, a5, 310p"
    assert expected in flat, flat[-3000:]
    assert "--hardware" not in flat
    assert "TASK [Check that the host answers]" not in out  # before any host is touched
