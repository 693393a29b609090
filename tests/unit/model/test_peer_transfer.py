"""Weights from peers (model.peer_transfer): real HTTP between servers and fetchers on
loopback, on the committed tiny model; peers that refuse, die mid-file, stall or send other
bytes are left for the next peer, and files nobody delivered are reported."""

from __future__ import annotations

import filecmp
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest
from conftest import DATA

from ascend_deploy.errors import CheckFailed
from ascend_deploy.model import peer_transfer as pt
from ascend_deploy.model.checksums import read_sums, verify_dir

TOKEN = "rollout-token-0123456789"
MODEL = None  # set by the module fixture below: the tiny model with coreutils' SHA256SUMS


@pytest.fixture(scope="module", autouse=True)
def model(tmp_path_factory):
    global MODEL
    root = tmp_path_factory.mktemp("peer") / "qwen3"
    shutil.copytree(DATA / "tiny-qwen3-fp8", root)
    names = sorted(p.name for p in root.iterdir())
    sums = subprocess.run(["sha256sum", *names], cwd=root, capture_output=True, check=True)
    (root / "SHA256SUMS").write_bytes(sums.stdout)
    MODEL = root
    return root


@pytest.fixture
def peer():
    """A server for the tiny model on a free loopback port; yields its base URL."""
    servers = []

    def start(root=None, token=TOKEN):
        root = root or MODEL
        server = pt.make_server(str(root), "SHA256SUMS", "127.0.0.1", 0, token)
        threading.Thread(target=pt.serve, args=(server, 60, 60), daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()


def _staging(tmp_path):
    staging = tmp_path / ".qwen3.staging"
    staging.mkdir()
    shutil.copy(MODEL / "SHA256SUMS", staging / "SHA256SUMS")
    return staging


def _bad_peer(mode: str) -> str:
    """A peer that answers the first bytes of each file, then closes (``die``), goes quiet
    (``stall``), or sends the right length of wrong bytes (``corrupt``)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def answer(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            conn.sendall(b"x" * (100000 if mode == "corrupt" else 5000))
            if mode == "stall":
                time.sleep(30)

    def loop() -> None:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_fetches_every_file_from_two_peers_checked(tmp_path, peer):
    a, b = peer(), peer()
    staging = _staging(tmp_path)
    result = pt.fetch_model(str(staging), "SHA256SUMS", [a, b], TOKEN)
    names = sorted(read_sums(str(MODEL / "SHA256SUMS")))
    assert result["failed"] == [] and result["files"] == len(names)
    assert sum(result["from"].values()) == len(names) and set(result["from"]) == {a, b}
    assert result["bytes"] == sum(os.path.getsize(MODEL / n) for n in names)
    assert filecmp.cmpfiles(MODEL, staging, names, shallow=False)[0] == names
    assert verify_dir(str(staging), record=False)["files"] == len(names)
    assert not list(staging.glob("*.part"))


@pytest.mark.parametrize("mode", ["die", "stall", "corrupt"])
def test_a_failing_peer_is_left_for_the_next(tmp_path, peer, mode):
    bad, good = _bad_peer(mode), peer()
    staging = _staging(tmp_path)
    start = time.monotonic()
    result = pt.fetch_model(str(staging), "SHA256SUMS", [bad, good], TOKEN, stall_s=1.0)
    assert result["failed"] == [] and result["from"] == {good: result["files"]}
    assert result["errors"] and all(e.startswith(bad) for e in result["errors"])
    if mode == "stall":  # every file asked of the quiet peer costs one stall bound, no more
        assert time.monotonic() - start < 2.0 * len(result["errors"]) + 5
    expect = {"die": "stopped after 5000 of 100000", "stall": "timed out", "corrupt": "sha256"}
    assert expect[mode] in result["errors"][0]
    assert verify_dir(str(staging), record=False)["files"] == result["files"]
    assert not list(staging.glob("*.part"))


def test_files_no_peer_delivers_are_reported(tmp_path, peer):
    staging = _staging(tmp_path)
    refused = f"http://127.0.0.1:{_closed_port()}"
    result = pt.fetch_model(
        str(staging), "SHA256SUMS", [refused, peer(token="another-token-123456")], TOKEN
    )
    assert result["files"] == 0 and result["failed"] == sorted(read_sums(str(MODEL / "SHA256SUMS")))
    assert any("HTTP 403 token required" in e for e in result["errors"])
    assert any("refused" in e.lower() for e in result["errors"])
    assert sorted(p.name for p in staging.iterdir()) == ["SHA256SUMS"]


def test_the_bound_covers_the_whole_model(tmp_path):
    staging = _staging(tmp_path)
    start = time.monotonic()
    result = pt.fetch_model(str(staging), "SHA256SUMS", [_bad_peer("stall")], TOKEN, 5.0, 1.5)
    assert time.monotonic() - start < 8
    assert result["files"] == 0 and any("bound" in e for e in result["errors"])


def test_only_manifest_files_with_the_token_are_served(tmp_path, peer):
    root = tmp_path / "model"
    shutil.copytree(MODEL, root)
    (root / "secret.txt").write_text("not in the manifest")
    (tmp_path / "outside.txt").write_text("beside the model")
    base = peer(root)

    def get(path: str, token: str = TOKEN) -> int:
        req = urllib.request.Request(base + path, headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code

    assert get("/config.json") == 200 and get("/SHA256SUMS") == 200
    assert get("/config.json", token="wrong-token-0123456789") == 403
    assert get("/secret.txt") == 404
    assert get("/../outside.txt") == 404 and get("/%2e%2e/outside.txt") == 404


def test_a_port_in_use_is_refused_naming_the_fix():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(CheckFailed, match="model_weights_peer_port"):
            pt.make_server(str(MODEL), "SHA256SUMS", "127.0.0.1", taken.getsockname()[1], TOKEN)


def test_the_daemon_serves_then_stops_on_request_or_by_its_lifetime(tmp_path):
    state = tmp_path / "peer.json"
    record = pt.start_daemon(str(MODEL), "SHA256SUMS", "127.0.0.1", 0, TOKEN, 60, 60, str(state))
    base = f"http://127.0.0.1:{record['port']}"
    staging = _staging(tmp_path)
    assert pt.fetch_model(str(staging), "SHA256SUMS", [base], TOKEN)["failed"] == []
    assert pt.stop_daemon(str(state)) is True and not state.exists()
    _wait_refused(record["port"])

    short = pt.start_daemon(str(MODEL), "SHA256SUMS", "127.0.0.1", 0, TOKEN, 1, 60, str(state))
    _wait_refused(short["port"])
    time.sleep(0.5)  # the process exits right after closing its socket
    assert pt.stop_daemon(str(state)) is False  # it ended by itself; the record goes


def _wait_refused(port: int, within: float = 10) -> None:
    end = time.monotonic() + within
    while time.monotonic() < end:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) != 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"port {port} still answers after {within} s")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
