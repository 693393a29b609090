"""Move a staged, verified model directory between hosts over HTTP (weights from peers).

A host that holds the model serves exactly the files its ``SHA256SUMS`` lists (and the
manifest itself), read-only, to requests that carry the rollout's token, for a bounded
lifetime. A host that needs the model fetches each file from the peers in turn, hashes it
while it streams, and moves on to the next peer on any error, stall or checksum mismatch;
files no peer delivered are reported so the caller can use the configured source instead.
Standard library only (Ansible ships it with ``ascend_peer``).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import http.client
import json
import os
import signal
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ..errors import CheckFailed, InputError
from .checksums import manifest_path, read_sums

BLOCK = 1 << 20  # bytes per read while fetching
DEFAULT_STALL_S = 30.0  # a peer that sends nothing for this long is given up


class TransferError(CheckFailed):
    """One file could not be fetched from one peer (the caller tries the next)."""


class _Handler(BaseHTTPRequestHandler):
    server: _ModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args: object) -> None:  # quiet: a daemon has no stderr
        self.server.touch()

    def _target(self) -> str | None:
        self.server.touch()
        given = self.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {self.server.token}".encode()):
            self.send_error(403, "token required")
            return None
        rel = os.path.normpath(urllib.parse.unquote(urllib.parse.urlsplit(self.path).path))
        rel = rel.lstrip("/")
        if rel not in self.server.allowed:
            self.send_error(404, "not in the manifest")
            return None
        return os.path.join(self.server.root, rel)

    def _send(self, body: bool) -> None:
        path = self._target()
        if path is None:
            return
        try:
            fh = open(path, "rb")  # noqa: SIM115 - closed below, after sendfile
        except OSError:
            self.send_error(404, "missing on this peer")
            return
        with fh:
            size = os.fstat(fh.fileno()).st_size
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            if body:
                self.wfile.flush()
                self.connection.sendfile(fh)
                self.server.touch()

    def do_GET(self) -> None:
        self._send(body=True)

    def do_HEAD(self) -> None:
        self._send(body=False)


class _ModelServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr: tuple[str, int], root: str, allowed: set[str], token: str) -> None:
        super().__init__(addr, _Handler)
        self.root, self.allowed, self.token = root, allowed, token
        self.last_request = time.monotonic()

    def touch(self) -> None:
        self.last_request = time.monotonic()


def make_server(root: str, manifest: str, bind: str, port: int, token: str) -> _ModelServer:
    """A bound, listening server for the files of ``root``'s manifest (not yet serving)."""
    if len(token) < 16:
        raise InputError("the peer transfer token must have at least 16 characters")
    path = manifest_path(root, manifest)
    allowed = set(read_sums(path)) | {os.path.relpath(path, root)}
    try:
        return _ModelServer((bind, port), root, allowed, token)
    except OSError as exc:
        raise CheckFailed(
            f"cannot serve {root} on {bind}:{port}: {exc.strerror}. Fix: free the port or set "
            "model_weights_peer_port to a free one"
        ) from None


def serve(server: _ModelServer, lifetime_s: float, idle_s: float) -> None:
    """Serve until ``lifetime_s`` has passed or nothing was asked for ``idle_s``."""
    worker = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2})
    worker.daemon = True
    worker.start()
    end = time.monotonic() + lifetime_s
    while time.monotonic() < end and time.monotonic() - server.last_request < idle_s:
        time.sleep(0.5)
    server.shutdown()
    server.server_close()


def start_daemon(
    root: str,
    manifest: str,
    bind: str,
    port: int,
    token: str,
    lifetime_s: float,
    idle_s: float,
    state_file: str,
) -> dict:
    """Serve ``root`` from a detached process; returns its record (also in ``state_file``).

    The socket is bound here, before the fork, so a port in use fails this call. The server
    stops by itself after ``lifetime_s`` (or ``idle_s`` without a request); ``stop_daemon``
    ends it sooner.
    """
    server = make_server(root, manifest, bind, port, token)
    record = {
        "root": root,
        "bind": bind,
        "port": server.server_address[1],
        "until": time.time() + lifetime_s,
    }
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # first child: a new session, then the server's process
        os.close(read_end)
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.write(
            write_end, json.dumps({"pid": os.getpid(), "start": _start_time(os.getpid())}).encode()
        )
        os.close(write_end)
        try:
            serve(server, lifetime_s, idle_s)
        finally:
            os._exit(0)
    os.close(write_end)
    server.server_close()
    os.waitpid(pid, 0)
    with os.fdopen(read_end, "rb") as fh:
        record.update(json.loads(fh.read() or b"{}"))
    _write_json(state_file, record)
    return record


def stop_daemon(state_file: str) -> bool:
    """End the server recorded in ``state_file`` (when it is still that process)."""
    try:
        with open(state_file, encoding="utf-8") as fh:
            record = json.load(fh)
    except (OSError, ValueError):
        return False
    pid = record.get("pid")
    alive = isinstance(pid, int) and _start_time(pid) == record.get("start")
    if alive:
        os.kill(pid, signal.SIGTERM)
    os.unlink(state_file)
    return alive


def _start_time(pid: int) -> str:
    """The process's start time (field 22 of /proc/PID/stat): tells a reused PID apart;
    "" when there is no such process or it has ended (a zombie nobody reaped)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return ""
    return "" if len(fields) < 20 or fields[0] in ("Z", "X") else fields[19]


def _write_json(path: str, data: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def fetch_file(url: str, dest: str, want: str, token: str, stall_s: float, deadline: float) -> int:
    """Download ``url`` into ``dest`` (via ``dest.part``), checking sha256 ``want``.

    Raises TransferError on a connection error, an HTTP error, ``stall_s`` without a byte,
    the overall ``deadline`` (a monotonic time) or a mismatch; the partial file is removed.
    """
    part = f"{dest}.part"
    digest, got = hashlib.sha256(), 0
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TransferError(f"{url}: no time left within the transfer bound")
        with urllib.request.urlopen(request, timeout=min(stall_s, left)) as resp:
            size = int(resp.headers.get("Content-Length") or -1)
            with open(part, "wb") as out:
                while True:
                    if time.monotonic() > deadline:
                        raise TransferError(f"{url}: the transfer bound ran out after {got} bytes")
                    block = resp.read(BLOCK)
                    if not block:
                        break
                    digest.update(block)
                    out.write(block)
                    got += len(block)
        if size >= 0 and got != size:
            raise TransferError(f"{url}: the peer stopped after {got} of {size} bytes")
        if digest.hexdigest() != want:
            raise TransferError(
                f"{url}: sha256 {digest.hexdigest()[:16]}... != manifest {want[:16]}..."
            )
        os.replace(part, dest)
        return got
    except TransferError:
        _remove(part)
        raise
    except urllib.error.HTTPError as exc:
        _remove(part)
        raise TransferError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (OSError, http.client.HTTPException, ValueError) as exc:
        _remove(part)
        reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc
        raise TransferError(f"{url}: {reason} after {got} bytes") from None


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def fetch_model(
    staging: str,
    manifest: str,
    peers: list[str],
    token: str,
    stall_s: float = DEFAULT_STALL_S,
    bound_s: float = 3600.0,
    start: int = 0,
) -> dict:
    """Fetch every file of ``staging``'s manifest (already written there) from ``peers``.

    ``peers`` are base URLs (``http://10.0.0.5:8470``); each file is asked of them in turn
    starting at ``start`` (spreading a batch over its peers). Returns ``{"files", "bytes",
    "from": {peer: files}, "failed": [files no peer delivered], "errors": [...]}``.
    """
    if not peers:
        raise InputError("no peers to fetch the model from")
    entries = read_sums(manifest_path(staging, manifest))
    deadline = time.monotonic() + bound_s
    result: dict = {"files": 0, "bytes": 0, "from": {}, "failed": [], "errors": []}
    order = peers[start % len(peers) :] + peers[: start % len(peers)]
    for index, (rel, want) in enumerate(sorted(entries.items())):
        dest = os.path.join(staging, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        rotated = order[index % len(order) :] + order[: index % len(order)]
        for peer in rotated:
            url = f"{peer.rstrip('/')}/{urllib.parse.quote(rel)}"
            try:
                result["bytes"] += fetch_file(url, dest, want, token, stall_s, deadline)
            except TransferError as exc:
                result["errors"].append(str(exc))
                continue
            result["files"] += 1
            result["from"][peer] = result["from"].get(peer, 0) + 1
            break
        else:
            result["failed"].append(rel)
    return result
