"""One deploy run per host at a time: a lock file that names its holder.

Standard library only (shipped to hosts as module_utils). Ansible runs each task as its own
process, so the lock cannot be a held file descriptor: it is a file created with O_EXCL that
holds a JSON record of the run that took it (controller host, ansible-playbook PID and start
time, playbook, run id, since when), removed by that run at its end or on failure.

A run interrupted by Ctrl-C leaves its lock behind. Whether its holder is gone can only be told on
the controller that ran it (``holder_alive``, with the holder's PID and process start time, so a
reused PID is not taken for the holder); a lock held from another controller is refused with its
record, and the operator breaks it explicitly once that run is known to be gone.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable

from ..errors import CheckFailed, InputError

HOLDER_FIELDS = ("run", "controller", "pid", "pid_started", "playbook", "since")


def describe(holder: dict) -> str:
    """The holder as an operator reads it."""
    return (
        f"run {holder.get('run', '?')} of {holder.get('playbook', '?')} from "
        f"{holder.get('controller', '?')} (ansible-playbook PID {holder.get('pid', '?')}), "
        f"since {holder.get('since', '?')}"
    )


def read_holder(path: str) -> dict | None:
    """The record in the lock at ``path``; None when there is no lock. An unreadable record (a
    run killed while writing it) reads as a holder that names nothing."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return None
    try:
        holder = json.loads(text)
    except ValueError:
        return {"run": "?", "unreadable": text[:200]}
    return holder if isinstance(holder, dict) else {"run": "?", "unreadable": text[:200]}


def _create(path: str, holder: dict) -> bool:
    """Create the lock holding ``holder``; False when it exists."""
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(holder, fh, sort_keys=True)
        fh.write("\n")
    return True


def _check_holder(holder: dict) -> None:
    missing = [f for f in HOLDER_FIELDS if f not in holder]
    if missing or not str(holder.get("run", "")).strip():
        raise InputError(f"lock holder record lacks {', '.join(missing) or 'a run id'}: {holder}")


def acquire(
    path: str,
    holder: dict,
    wait_s: float = 0,
    takeover: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict:
    """Take the lock at ``path`` for ``holder``, waiting up to ``wait_s`` seconds for it.

    Returns ``{"acquired": True, "changed": bool, "took_over": holder or None}`` or, when another
    run holds it after the wait, ``{"acquired": False, "holder": its record}``. A lock already
    held by ``holder['run']`` is ours (a rerun of a task). ``takeover`` is the run id of a holder
    known to be gone: its lock is replaced, but only while it still names that run."""
    _check_holder(holder)
    deadline = clock() + max(0.0, wait_s)
    while True:
        if _create(path, holder):
            return {"acquired": True, "changed": True, "took_over": None}
        current = read_holder(path)
        if current is None:
            continue  # released between our attempt and the read: try again
        if current.get("run") == holder["run"]:
            return {"acquired": True, "changed": False, "took_over": None}
        if takeover is not None and current.get("run") == takeover:
            os.remove(path)
            if _create(path, holder):
                return {"acquired": True, "changed": True, "took_over": current}
            continue  # a third run was faster: it is the holder now
        if clock() >= deadline:
            return {"acquired": False, "changed": False, "holder": current}
        sleep(min(1.0, max(0.0, deadline - clock())))


def release(path: str, run: str) -> bool:
    """Remove the lock when run ``run`` holds it; True when removed. Another run's lock stays."""
    current = read_holder(path)
    if current is None or current.get("run") != run:
        return False
    os.remove(path)
    return True


def _proc_start(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot (Linux /proc), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            stat = fh.read()
    except OSError:
        return None
    # comm (field 2) may hold spaces and parentheses: the fields after it follow the last ')'
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def _is_playbook(pid: int) -> bool:
    """Whether process ``pid`` is ansible-playbook itself (its program or the script its
    interpreter runs), not a shell or a wrapper whose arguments merely mention it."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except OSError:
        return False
    return any(
        os.path.basename(a.decode("utf-8", "replace")) == "ansible-playbook" for a in argv[:2]
    )


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return int(fh.read().rsplit(")", 1)[-1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def controller(start_pid: int | None = None) -> dict:
    """Who runs this: the controller's host name and the ansible-playbook process above
    ``start_pid`` (this process by default), with its start time. On a controller without /proc
    (macOS) the PID is None: its locks can be broken only explicitly."""
    pid: int | None = start_pid if start_pid is not None else os.getpid()
    playbook_pid = None
    for _ in range(32):
        if pid is None or pid <= 1:
            break
        if _is_playbook(pid):
            playbook_pid = pid  # the outermost one: forked workers carry the same command line
        pid = _parent(pid)
    return {
        "controller": socket.gethostname(),
        "pid": playbook_pid,
        "pid_started": _proc_start(playbook_pid) if playbook_pid else None,
    }


def holder_alive(holder: dict, here: dict | None = None) -> bool | None:
    """On the controller: True when the holder's ansible-playbook still runs, False when it is
    gone, None when this controller cannot tell (another controller, or no PID recorded)."""
    here = here if here is not None else controller()
    if holder.get("controller") != here.get("controller") or not holder.get("pid"):
        return None
    try:
        pid = int(holder["pid"])
    except (TypeError, ValueError):
        return None
    started = _proc_start(pid)
    if started is None:
        return False
    return holder.get("pid_started") in (None, started)


def refusal(path: str, holder: dict, wait_s: float, alive: bool | None) -> CheckFailed:
    """The error for a lock another run holds, naming it and the way out."""
    if "unreadable" in holder:
        who = f"a run whose lock record cannot be read ({holder['unreadable']!r})"
    else:
        who = describe(holder)
    state = {
        True: "that run is still going",
        None: "this controller cannot tell whether that run is still going",
    }.get(alive, "that run is gone")
    return CheckFailed(
        f"another deploy holds this host: {who}; {state} (waited {wait_s:g} s for {path}). "
        "Fix: let that run finish and re-run (ascend_lock_wait sets how long to wait); if that "
        "run is known to be gone, re-run with -e ascend_lock_break=true"
    )
