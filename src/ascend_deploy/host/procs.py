"""Who holds the serving port and the NPU memory, and ending exactly those processes.

Pitfall 3 (stale processes): a previous vLLM run, or someone else's job, still listens on
the port or still holds HBM, and the new server fails to bind or runs out of memory.

* Listeners come from ``/proc/net/tcp`` and ``/proc/net/tcp6`` (state ``0A`` = LISTEN),
  matched to processes through the ``socket:[inode]`` links in ``/proc/<pid>/fd``; no
  ``netstat``/``ss`` needed. Only the caller's network namespace is visible, which is the
  one where a port conflict happens.
* NPU holders come from the process table of ``npu-smi info`` (``ascend_deploy.host.npu_smi``).
* Owner: container id from ``/proc/<pid>/cgroup`` (64-hex id of docker, containerd, CRI-O,
  podman), systemd unit (last ``*.service``, else ``*.scope`` in the cgroup path), command line.

Managed rule (``service`` = the ``--service NAME`` given; none given = nothing is managed):
ownership is decided only by what the bundle itself put on the host. A process is managed
when it, or one of its ancestors below PID 1, runs in a container that carries the label
``ascend-deploy.service=NAME`` (every container ``vllm_service`` starts has it), found
through its cgroup or because it is (a child of) that container's main PID. Names never
decide: a container called ``vllm`` without the label, or ``/usr/local/bin/vllm serve ...``
started by someone else, is foreign whatever the service is called.

``stop`` ends processes by PID only: SIGTERM, wait, SIGKILL; it re-checks each PID's start
time so a reused PID is never signalled, and it never signals PID 1 or its own ancestry.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time

from ..errors import InputError

LISTEN = "0A"
_CONTAINER = re.compile(r"([0-9a-f]{64})")
SERVICE_LABEL = "ascend-deploy.service"  # set by vllm_service on every container it starts


# ----------------------------------------------------------------------------- /proc readers


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return None


def _addr(hex_addr: str) -> str:
    """``0100007F`` -> ``127.0.0.1``; 32-hex IPv6 (four little-endian words) -> text."""
    raw = bytes.fromhex(hex_addr)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


def listening_sockets(proc_root: str = "/proc", port: int | None = None) -> list[dict]:
    """LISTEN sockets from ``net/tcp`` and ``net/tcp6``: proto, address, port, inode."""
    out = []
    for proto in ("tcp", "tcp6"):
        text = _read(f"{proc_root}/net/{proto}")
        if text is None:
            continue
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) < 10 or fields[3] != LISTEN:
                continue
            try:
                hex_ip, hex_port = fields[1].split(":")
                lport = int(hex_port, 16)
                address = _addr(hex_ip)
                inode = int(fields[9])
            except ValueError:
                continue
            if port is not None and lport != port:
                continue
            out.append({"proto": proto, "address": address, "port": lport, "inode": inode})
    return out


def _pids(proc_root: str) -> list[int]:
    try:
        return sorted(int(n) for n in os.listdir(proc_root) if n.isdigit())
    except OSError:
        return []


def socket_owners(inodes: set[int], proc_root: str = "/proc") -> dict[int, list[int]]:
    """inode -> PIDs with an open fd on ``socket:[inode]``."""
    wanted = {f"socket:[{i}]": i for i in inodes}
    owners: dict[int, list[int]] = {}
    if not wanted:
        return owners
    for pid in _pids(proc_root):
        fd_dir = f"{proc_root}/{pid}/fd"
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in names:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if target in wanted:
                owners.setdefault(wanted[target], [])
                if pid not in owners[wanted[target]]:
                    owners[wanted[target]].append(pid)
    return owners


def _status(pid: int, proc_root: str) -> dict[str, str]:
    text = _read(f"{proc_root}/{pid}/status") or ""
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def _stat(pid: int, proc_root: str) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) from ``/proc/<pid>/stat``."""
    text = _read(f"{proc_root}/{pid}/stat")
    if not text or ")" not in text:
        return None
    rest = text.rsplit(")", 1)[1].split()
    try:
        return rest[0], int(rest[19])
    except (IndexError, ValueError):
        return None


def cgroup_owner(text: str) -> tuple[str | None, str | None]:
    """(container id, systemd unit) from the text of ``/proc/<pid>/cgroup``."""
    container = None
    unit = None
    paths = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            paths.append((parts[1], parts[2]))
    for _controllers, path in paths:
        found = _CONTAINER.findall(path)
        if found:
            container = found[-1]
    # systemd's own hierarchy: cgroup v2 ("0::/...") or v1 "name=systemd"
    preferred = [p for c, p in paths if c in ("", "name=systemd")] or [p for _c, p in paths]
    for path in preferred:
        comps = [c for c in path.split("/") if c]
        services = [c for c in comps if c.endswith(".service")]
        scopes = [c for c in comps if c.endswith(".scope")]
        if services or scopes:
            unit = (services or scopes)[-1]
            break
    return container, unit


def process_info(pid: int, proc_root: str = "/proc") -> dict:
    """pid, ppid, name, cmdline, user, container_id, systemd_unit, start_time, alive."""
    stat = _stat(pid, proc_root)
    info: dict = {
        "pid": pid,
        "alive": stat is not None and stat[0] not in ("Z", "X"),
        "ppid": None,
        "name": None,
        "cmdline": None,
        "argv": [],
        "user": None,
        "container_id": None,
        "container_name": None,
        "systemd_unit": None,
        "start_time": stat[1] if stat else None,
    }
    if stat is None:
        return info
    status = _status(pid, proc_root)
    info["name"] = (_read(f"{proc_root}/{pid}/comm") or status.get("Name", "")).strip() or None
    with contextlib.suppress(ValueError):
        info["ppid"] = int(status.get("PPid", ""))
    uid = status.get("Uid", "").split()
    if uid:
        info["user"] = _user(int(uid[0]))
    raw = _read(f"{proc_root}/{pid}/cmdline") or ""
    argv = [a for a in raw.split("\0") if a]
    info["argv"] = argv
    info["cmdline"] = shlex.join(argv) if argv else None
    info["container_id"], info["systemd_unit"] = cgroup_owner(
        _read(f"{proc_root}/{pid}/cgroup") or ""
    )
    return info


def _user(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


def _docker(argv: list[str], timeout: float) -> str:
    docker = shutil.which("docker")
    if not docker:
        return ""
    try:
        done = subprocess.run(
            [docker, *argv], capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def docker_containers(timeout: float = 10.0) -> dict[str, dict]:
    """Running containers: full id -> ``{"name", "service", "pid"}`` (empty without docker).

    ``service`` is the container's ``ascend-deploy.service`` label (None when unset) and
    ``pid`` the host PID of its main process (labelled containers only).
    """
    fmt = '{{.ID}}\t{{.Names}}\t{{.Label "' + SERVICE_LABEL + '"}}'
    found: dict[str, dict] = {}
    for line in _docker(["ps", "--no-trunc", "--format", fmt], timeout).splitlines():
        cid, _, rest = line.strip().partition("\t")
        name, _, service = rest.partition("\t")
        if _CONTAINER.fullmatch(cid):
            found[cid] = {"name": name.strip(), "service": service.strip() or None, "pid": None}
    labelled = [cid for cid, c in found.items() if c["service"]]
    if labelled:
        out = _docker(["inspect", "--format", "{{.Id}} {{.State.Pid}}", *labelled], timeout)
        for line in out.splitlines():
            cid, _, pid = line.strip().partition(" ")
            if cid in found and pid.isdigit() and int(pid) > 0:
                found[cid]["pid"] = int(pid)
    return found


def docker_container_names(timeout: float = 10.0) -> dict[str, str]:
    """Full container id -> name of the running containers (empty without docker)."""
    return {cid: c["name"] for cid, c in docker_containers(timeout).items()}


# ----------------------------------------------------------------------------- ownership


def _containers(mapping: dict | None) -> dict[str, dict]:
    """Normalise ``{id: name}`` or ``{id: {"name", "service", "pid"}}`` to the latter."""
    out: dict[str, dict] = {}
    for cid, value in (mapping or {}).items():
        if isinstance(value, dict):
            out[cid] = {
                "name": value.get("name"),
                "service": value.get("service"),
                "pid": value.get("pid"),
            }
        else:
            out[cid] = {"name": value, "service": None, "pid": None}
    return out


def _matches_service(info: dict, service: str, containers: dict[str, dict]) -> str | None:
    """Why ``info`` belongs to ``service``: its container carries our label (by cgroup id,
    or it is that container's main process); None otherwise. Names never count."""
    cid = info.get("container_id")
    found = containers.get(cid) if cid else None
    if found is None:
        found = next((c for c in containers.values() if c.get("pid") == info.get("pid")), None)
    if found is not None and found.get("service") == service:
        return f"container {found.get('name') or (cid or '?')[:12]} ({SERVICE_LABEL}={service})"
    return None


def ancestors(pid: int, proc_root: str = "/proc", limit: int = 64) -> list[int]:
    """Parent chain of ``pid`` (nearest first), stopping before PID 1."""
    chain = []
    current = pid
    for _ in range(limit):
        ppid = None
        with contextlib.suppress(ValueError):
            ppid = int(_status(current, proc_root).get("PPid", ""))
        if not ppid or ppid <= 1 or ppid in chain:
            break
        chain.append(ppid)
        current = ppid
    return chain


def classify(
    info: dict,
    service: str | None,
    proc_root: str = "/proc",
    containers: dict | None = None,
) -> dict:
    """Set ``managed`` / ``managed_by`` on ``info`` following the module's rule."""
    info["managed"] = False
    info["managed_by"] = None
    if not service or not info.get("alive"):
        return info
    known = _containers(containers)
    chain = [info] + [
        _named(process_info(p, proc_root), known) for p in ancestors(info["pid"], proc_root)
    ]
    for member in chain:
        reason = _matches_service(member, service, known)
        if reason:
            info["managed"] = True
            via = "" if member is info else f" of ancestor {member['pid']}"
            info["managed_by"] = reason + via
            break
        other = _labelled_service(member, known)
        if other and "other_service" not in info:
            info["other_service"] = other  # another service of this bundle, by its label
    return info


def _labelled_service(info: dict, containers: dict[str, dict]) -> str | None:
    """The ``ascend-deploy.service`` label of the container ``info`` runs in, if any."""
    cid = info.get("container_id")
    found = containers.get(cid) if cid else None
    if found is None:
        found = next((c for c in containers.values() if c.get("pid") == info.get("pid")), None)
    return (found or {}).get("service") or None


def _named(info: dict, containers: dict[str, dict] | None) -> dict:
    """Set ``container_name`` from the container's cgroup id or its main PID."""
    if not containers:
        return info
    found = containers.get(info["container_id"]) if info.get("container_id") else None
    if found is None:
        found = next(
            (c for c in containers.values() if isinstance(c, dict) and c.get("pid") == info["pid"]),
            None,
        )
    if found is not None:
        info["container_name"] = found.get("name") if isinstance(found, dict) else found
    return info


def find_holders(
    port: int | None,
    service: str | None,
    npu_info: dict | None,
    proc_root: str = "/proc",
    containers: dict | None = None,
) -> dict:
    """Listeners on ``port`` and processes holding NPU memory, each classified.

    ``containers`` maps full container ids to ``{"name", "service", "pid"}`` (see
    ``docker_containers``; a plain name is a container without our label); when None,
    ``docker ps`` is asked (best effort) as soon as a service is named or a process runs in
    a container.
    """
    if port is not None and (isinstance(port, bool) or not isinstance(port, int)):
        raise InputError(f"--port {port!r} is not a TCP port number")
    if port is not None and not 0 < port < 65536:
        raise InputError(f"--port {port} is outside 1-65535")
    if npu_info is not None and not isinstance(npu_info, dict):
        raise InputError("npu-smi information must be a parsed 'npu-smi info' mapping")
    known = None if containers is None else _containers(containers)
    cache: dict[int, dict] = {}

    def info_for(pid: int) -> dict:
        nonlocal known
        if pid not in cache:
            info = process_info(pid, proc_root)
            if known is None and (service or info["container_id"]):
                known = docker_containers()
            cache[pid] = classify(_named(info, known), service, proc_root, known)
        return dict(cache[pid])

    listeners = []
    if port is not None:
        sockets = listening_sockets(proc_root, port)
        owners = socket_owners({s["inode"] for s in sockets}, proc_root)
        for sock in sockets:
            pids = owners.get(sock["inode"]) or [None]
            for pid in pids:
                entry = {**sock}
                if pid is None:
                    entry.update(
                        {
                            "pid": None,
                            "alive": True,
                            "managed": False,
                            "managed_by": None,
                            "note": "owner not visible (run as root, or the socket belongs "
                            "to another PID namespace)",
                        }
                    )
                else:
                    entry.update(info_for(pid))
                    if entry.get("name") == "docker-proxy":
                        entry["note"] = (
                            "docker-proxy publishes a container port: stop that container, "
                            "not this process"
                        )
                listeners.append(entry)

    holders: dict[int, dict] = {}
    for proc in (npu_info or {}).get("processes") or []:
        pid = proc.get("pid") if isinstance(proc, dict) else None
        if not isinstance(pid, int) or isinstance(pid, bool):
            continue
        if pid not in holders:
            holders[pid] = {**info_for(pid), "npus": [], "memory_mb": 0, "npu_smi_name": None}
            if not holders[pid]["alive"]:
                holders[pid]["note"] = (
                    "listed by npu-smi but not running in this PID namespace (exited, or "
                    "npu-smi ran inside a container)"
                )
        holder = holders[pid]
        holder["npus"].append(
            {"npu": proc.get("npu"), "chip": proc.get("chip"), "memory_mb": proc.get("memory_mb")}
        )
        holder["memory_mb"] += proc.get("memory_mb") or 0
        holder["npu_smi_name"] = holder["npu_smi_name"] or proc.get("name")

    def order(entry: dict) -> tuple:  # foreign first, then by pid
        return (entry.get("managed", False), entry.get("pid") or 0)

    listeners.sort(key=order)
    npu_holders = sorted(holders.values(), key=order)
    everything = [e for e in listeners + npu_holders if e.get("pid") and e.get("alive")]
    return {
        "port": port,
        "service": service,
        "listeners": listeners,
        "npu_holders": npu_holders,
        "managed_pids": sorted({e["pid"] for e in everything if e["managed"]}),
        "foreign_pids": sorted({e["pid"] for e in everything if not e["managed"]}),
    }


# ----------------------------------------------------------------------------- stopping


def _gone(pid: int, start_time: int | None, proc_root: str = "/proc") -> bool:
    stat = _stat(pid, proc_root)
    if stat is None or stat[0] in ("Z", "X"):
        return True
    return start_time is not None and stat[1] != start_time  # PID reused by another process


def stop(pids, grace_s: float = 10, proc_root: str = "/proc") -> list[dict]:
    """End ``pids``: SIGTERM, wait up to ``grace_s``, then SIGKILL. One result per PID.

    Results: ``terminated`` (ended after SIGTERM), ``killed`` (needed SIGKILL),
    ``not-running``, ``refused`` (PID 1, this process or its ancestors), ``failed``.
    """
    me = os.getpid()
    protected = {0, 1, me, *ancestors(me, proc_root)}
    results: dict[int, dict] = {}
    pending: dict[int, int | None] = {}
    for raw in pids:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise InputError(f"PID {raw!r} is not an integer")
        pid = raw
        if pid in results or pid in pending:
            continue
        if pid in protected:
            results[pid] = {"pid": pid, "result": "refused", "detail": "protected process"}
            continue
        stat = _stat(pid, proc_root)
        if stat is None or stat[0] in ("Z", "X"):
            results[pid] = {"pid": pid, "result": "not-running", "detail": ""}
            continue
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            results[pid] = {"pid": pid, "result": "not-running", "detail": ""}
            continue
        except PermissionError:
            results[pid] = {"pid": pid, "result": "failed", "detail": "permission denied"}
            continue
        pending[pid] = stat[1]
    deadline = time.monotonic() + max(0.0, float(grace_s))
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            if _gone(pid, pending[pid], proc_root):
                results[pid] = {"pid": pid, "result": "terminated", "detail": "SIGTERM"}
                del pending[pid]
        if pending:
            time.sleep(0.05)
    for pid, start in pending.items():
        if _gone(pid, start, proc_root):
            results[pid] = {"pid": pid, "result": "terminated", "detail": "SIGTERM"}
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            results[pid] = {"pid": pid, "result": "terminated", "detail": "SIGTERM"}
            continue
        except PermissionError:
            results[pid] = {"pid": pid, "result": "failed", "detail": "permission denied"}
            continue
        killed_deadline = time.monotonic() + 5.0
        while not _gone(pid, start, proc_root) and time.monotonic() < killed_deadline:
            time.sleep(0.05)
        if _gone(pid, start, proc_root):
            results[pid] = {"pid": pid, "result": "killed", "detail": f"SIGKILL after {grace_s}s"}
        else:
            results[pid] = {
                "pid": pid,
                "result": "failed",
                "detail": "still running after SIGKILL (uninterruptible I/O?)",
            }
    return list(results.values())


# ----------------------------------------------------------------------------- npu-smi input


def load_npu_info(path: str | None) -> tuple[dict | None, str | None]:
    """Parsed ``npu-smi info`` from ``path`` (``-`` = stdin), or by running npu-smi.

    A bad file is an InputError; a host without a usable npu-smi gives (None, reason); a
    file cut off before the process table gives (info, reason): its holders are unknown.
    """
    from ..errors import AscendDeployError
    from ..stdin import read_stdin
    from . import npu_smi

    if path is None:
        try:
            text = npu_smi.run_npu_smi(["info"])
        except AscendDeployError as exc:
            return None, str(exc)
        return npu_smi.parse(text, kind="info", source="npu-smi info"), None
    try:
        if path == "-":
            raw = read_stdin("`npu-smi info` output")
        else:
            with open(path, "rb") as fh:
                raw = fh.read()
    except FileNotFoundError:
        raise InputError(
            f"{path}: no such file; pass a file holding `npu-smi info` output"
        ) from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a file with `npu-smi info` output") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    info = npu_smi.parse(raw, kind="info", source=path)
    if not npu_smi.lists_processes(raw):
        return info, f"{path} ends before npu-smi's process table (save the complete output)"
    return info, None
