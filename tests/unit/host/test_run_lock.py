"""The per-host deploy lock (issue 22): one run at a time, holders named, gone holders told."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ascend_deploy.errors import InputError
from ascend_deploy.host import run_lock


def holder(run: str, **extra) -> dict:
    record = {
        "run": run,
        "controller": "ctl-1",
        "pid": 4242,
        "pid_started": "100",
        "playbook": "deploy.yml",
        "since": "2026-12-02T10:00:00Z",
    }
    return {**record, **extra}


def test_the_first_run_takes_it_and_the_second_is_told_who_holds_it(tmp_path):
    path = str(tmp_path / "lock" / "deploy.lock")
    assert run_lock.acquire(path, holder("a"))["acquired"]
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    second = run_lock.acquire(path, holder("b"))
    assert not second["acquired"] and second["holder"]["run"] == "a"
    # a rerun of the task in the same run holds it already
    assert run_lock.acquire(path, holder("a")) == {
        "acquired": True,
        "changed": False,
        "took_over": None,
    }
    message = str(run_lock.refusal(path, second["holder"], 30, True))
    for part in ("run a of deploy.yml from ctl-1", "PID 4242", "since 2026-12-02T10:00:00Z"):
        assert part in message
    assert "still going" in message and "ascend_lock_break=true" in message


def test_release_removes_only_its_own_lock(tmp_path):
    path = str(tmp_path / "deploy.lock")
    run_lock.acquire(path, holder("a"))
    assert not run_lock.release(path, "b") and os.path.exists(path)
    assert run_lock.release(path, "a") and not os.path.exists(path)
    assert not run_lock.release(path, "a")


def test_a_second_run_waits_within_its_bound(tmp_path):
    path = str(tmp_path / "deploy.lock")
    run_lock.acquire(path, holder("a"))
    now = [0.0]
    slept = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds
        if now[0] >= 3:
            run_lock.release(path, "a")  # the holder finishes after 3 s

    got = run_lock.acquire(path, holder("b"), wait_s=10, sleep=sleep, clock=lambda: now[0])
    assert got["acquired"] and run_lock.read_holder(path)["run"] == "b"
    assert sum(slept) == pytest.approx(3)
    run_lock.acquire(str(tmp_path / "other.lock"), holder("c"))
    late = run_lock.acquire(
        str(tmp_path / "other.lock"), holder("d"), wait_s=2, sleep=sleep, clock=lambda: now[0]
    )
    assert not late["acquired"] and late["holder"]["run"] == "c"


def test_takeover_replaces_only_the_named_holder(tmp_path):
    path = str(tmp_path / "deploy.lock")
    run_lock.acquire(path, holder("gone"))
    assert not run_lock.acquire(path, holder("b"), takeover="someone-else")["acquired"]
    got = run_lock.acquire(path, holder("b"), takeover="gone")
    assert got["acquired"] and got["took_over"]["run"] == "gone"
    assert run_lock.read_holder(path)["run"] == "b"


def test_a_holder_record_without_a_run_is_refused(tmp_path):
    with pytest.raises(InputError, match="lacks"):
        run_lock.acquire(str(tmp_path / "l"), {"run": "x"})


def test_an_unreadable_lock_is_a_holder_that_names_nothing(tmp_path):
    path = tmp_path / "deploy.lock"
    path.write_text("{half")
    got = run_lock.acquire(str(path), holder("b"))
    assert not got["acquired"] and "unreadable" in got["holder"]
    assert "cannot be read ('{half')" in str(run_lock.refusal(str(path), got["holder"], 0, None))


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux /proc")
def test_holder_alive_tells_a_running_a_gone_and_a_reused_pid():
    here = {"controller": "ctl-1"}
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = run_lock._proc_start(child.pid)
        assert started is not None
        alive = holder("a", pid=child.pid, pid_started=started)
        assert run_lock.holder_alive(alive, here) is True
        reused = holder("a", pid=child.pid, pid_started=str(int(started) - 1))
        assert run_lock.holder_alive(reused, here) is False  # same PID, another process
        assert run_lock.holder_alive(holder("a", controller="ctl-2"), here) is None
        assert run_lock.holder_alive(holder("a", pid=None), here) is None
    finally:
        child.kill()
        child.wait()
    assert run_lock.holder_alive(holder("a", pid=child.pid, pid_started=started), here) is False


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux /proc")
def test_controller_finds_the_outermost_ansible_playbook_above_it(tmp_path):
    # a process named ansible-playbook whose child asks: the child finds its parent
    script = tmp_path / "ansible-playbook"
    script.write_text(
        "import json, subprocess, sys\n"
        "code = 'import json; from ascend_deploy.host import run_lock;"
        " print(json.dumps(run_lock.controller()))'\n"
        "done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)\n"
        "print(done.stdout)\n"
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    found = json.loads(proc.stdout)
    assert found["pid"] is not None and found["pid_started"] is not None
    assert found["controller"]
    # a shell whose command line merely names ansible-playbook is not taken for it
    wrapped = subprocess.run(
        ["sh", "-c", f'{sys.executable} -c "{CONTROLLER}" # ansible-playbook'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(wrapped.stdout)["pid"] is None


CONTROLLER = (
    "import json; from ascend_deploy.host import run_lock; print(json.dumps(run_lock.controller()))"
)
