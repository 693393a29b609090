"""One deploy run per host at a time, with real ansible-playbook processes (issue 22).

Two deploy.yml runs against one host both exited 0 and the host ran one of them. The playbooks
take a lock on the host (playbooks/tasks/host_lock.yml); these runs use the same task files on
localhost, holding the lock until the test lets go: a second run is refused naming the first
(its ansible-playbook PID), a holder killed with SIGKILL (as a lost terminal leaves it) is taken
over with a message, and ascend_lock_break takes over a holder this controller cannot vouch for.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ANSIBLE_PLAYBOOK, REPO

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="needs the venv's ansible-playbook"),
    pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux /proc"),
]
TASKS = REPO / "playbooks" / "tasks"


def _command(tmp_path: Path, name: str, *extra: str) -> tuple[list[str], dict]:
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Name the run",
                    "ansible.builtin.include_tasks": str(TASKS / "lock_holder.yml"),
                    "vars": {"ascend_lock_playbook": f"{name}.yml"},
                },
                {"name": "Lock", "ansible.builtin.include_tasks": str(TASKS / "host_lock.yml")},
                {
                    "name": "Hold the lock until the test lets go",
                    "ansible.builtin.wait_for": {
                        "path": str(tmp_path / f"let-go-{name}"),
                        "timeout": 120,
                    },
                },
                {"name": "Unlock", "ansible.builtin.include_tasks": str(TASKS / "host_unlock.yml")},
            ],
        }
    ]
    (tmp_path / f"{name}.yml").write_text(json.dumps(play))
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / f"tmp-{name}"),
        "ANSIBLE_REMOTE_TEMP": str(tmp_path / f"tmp-{name}"),
    }
    cmd = [str(ANSIBLE_PLAYBOOK), "-i", "localhost,", "-c", "local", str(tmp_path / f"{name}.yml")]
    cmd += ["-e", f"ansible_python_interpreter={sys.executable}"]
    cmd += ["-e", f"ascend_lock_path={tmp_path / 'run' / 'deploy.lock'}", *extra]
    return cmd, env


def _start_holder(tmp_path: Path, name: str) -> subprocess.Popen:
    cmd, env = _command(tmp_path, name)
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    lock = tmp_path / "run" / "deploy.lock"
    deadline = time.monotonic() + 120
    while not (lock.exists() and lock.read_text().endswith("\n")):
        assert proc.poll() is None, f"holder {name} exited {proc.returncode} before locking"
        assert time.monotonic() < deadline, "the holder never took the lock"
        time.sleep(0.2)
    return proc


def _run(tmp_path: Path, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / f"let-go-{name}").touch()  # this run does not hold on
    cmd, env = _command(tmp_path, name, *extra)
    return subprocess.run(
        cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def test_a_second_run_is_refused_naming_the_first_then_takes_over_when_it_died(tmp_path):
    lock = tmp_path / "run" / "deploy.lock"
    first = _start_holder(tmp_path, "first")
    try:
        holder = json.loads(lock.read_text())
        assert holder["pid"] == first.pid and holder["playbook"] == "first.yml"
        second = _run(tmp_path, "second")
        out = second.stdout + second.stderr
        assert second.returncode != 0, out[-3000:]
        assert "another deploy holds this host: run " in out
        assert f"ansible-playbook PID {first.pid}" in out and "first.yml" in out
        assert "that run is still going" in out
        assert json.loads(lock.read_text())["run"] == holder["run"]  # the holder keeps it
    finally:
        _kill(first)  # no cleanup runs: its lock stays behind, as after a lost terminal
    assert json.loads(lock.read_text())["run"] == holder["run"]
    third = _run(tmp_path, "third")
    out = third.stdout + third.stderr
    assert third.returncode == 0, out[-3000:]
    assert f"took over the deploy lock of {holder['run']}" in out and "that run is gone" in out
    assert not lock.exists()  # released at its end


def test_ascend_lock_break_takes_over_a_holder_it_cannot_vouch_for(tmp_path):
    lock = tmp_path / "run" / "deploy.lock"
    lock.parent.mkdir()
    other = {
        "run": "20261202T090000Z-other-controller-77",
        "controller": "other-controller",
        "pid": 77,
        "pid_started": "5",
        "playbook": "deploy.yml",
        "since": "2026-12-02T09:00:00Z",
    }
    lock.write_text(json.dumps(other) + "\n")
    refused = _run(tmp_path, "plain")
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0
    assert "from other-controller" in out and "cannot tell whether that run is still going" in out
    assert json.loads(lock.read_text()) == other
    broken = _run(tmp_path, "broken", "-e", "ascend_lock_break=true")
    out = broken.stdout + broken.stderr
    assert broken.returncode == 0, out[-3000:]
    assert "took over the deploy lock of 20261202T090000Z-other-controller-77" in out
    assert "broken by ascend_lock_break" in out
    assert not lock.exists()
