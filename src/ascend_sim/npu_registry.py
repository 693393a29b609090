"""Live NPU memory registry shared by the emulated serving processes and npu-smi.

A serving process (in a container on the simulated host) writes one JSON file per
process into a state directory bind-mounted from the host. It records its PID as seen
inside its own PID namespace plus that namespace's inode; the host-side npu-smi finds
the host PID by scanning ``/proc/*/status`` (``NSpid:`` lists the PID in every nested
namespace, outermost first). Entries whose process is gone are ignored and removed, so
a killed process frees its NPU memory.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass

DEFAULT_STATE_DIR = "/usr/local/dcmi/.ascend-sim/procs"


@dataclass
class NpuHolder:
    """One process holding NPU memory."""

    pid: int  # host PID when resolved, otherwise the PID inside its namespace
    ns_pid: int
    pid_ns: str  # e.g. "pid:[4026532201]"
    npu: int
    chip: int
    name: str
    memory_mb: int


def _pid_ns(pid: int | str = "self") -> str:
    return os.readlink(f"/proc/{pid}/ns/pid")


def register(state_dir: str, npu: int, chip: int, name: str, memory_mb: int) -> str:
    """Record that this process holds ``memory_mb`` on (npu, chip); returns the file path."""
    os.makedirs(state_dir, exist_ok=True)
    me = os.getpid()
    holder = NpuHolder(me, me, _pid_ns(), npu, chip, name, memory_mb)
    path = os.path.join(state_dir, f"{holder.pid_ns.strip('pid:[]')}-{me}-{npu}-{chip}.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(asdict(holder), fh)
    os.replace(tmp, path)
    return path


def unregister(path: str) -> None:
    """Remove an entry written by ``register`` (missing is fine)."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def _host_pid(ns_pid: int, pid_ns: str, proc: str = "/proc") -> int | None:
    """The PID in this namespace of the process that is ``ns_pid`` inside ``pid_ns``."""
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"{proc}/{entry}/ns/pid") != pid_ns:
                continue
            with open(f"{proc}/{entry}/status", encoding="utf-8") as fh:
                for line in fh:
                    if line.startswith("NSpid:"):
                        if int(line.split()[-1]) == ns_pid:
                            return int(entry)
                        break
        except (OSError, ValueError):
            continue
    return None


def live_holders(state_dir: str) -> list[NpuHolder]:
    """Entries whose process still runs, with host PIDs; stale files are deleted.

    Call this only from the host's PID namespace (npu-smi does): inside a container the
    other containers' processes are invisible and their entries would look stale.
    """
    out: list[NpuHolder] = []
    if not os.path.isdir(state_dir):
        return out
    for fname in sorted(os.listdir(state_dir)):
        if not fname.endswith(".json"):
            continue
        path = os.path.join(state_dir, fname)
        try:
            with open(path, encoding="utf-8") as fh:
                holder = NpuHolder(**json.load(fh))
        except (OSError, ValueError, TypeError):
            continue
        host_pid = _host_pid(holder.ns_pid, holder.pid_ns)
        if host_pid is None:
            unregister(path)
            continue
        holder.pid = host_pid
        out.append(holder)
    return out
