"""verify's HTTP client against hostile and broken servers (real HTTP on 127.0.0.1, in threads)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ascend_deploy.errors import InputError
from ascend_deploy.verification.checks import max_length
from ascend_deploy.verification.context import Context
from ascend_deploy.verification.http_client import (
    MAX_BODY,
    BadResponse,
    Client,
    HttpStatus,
    Timeout,
    TooLarge,
)
from ascend_deploy.verification.verifier import Options, run_verify

KEY = "sk-secret-verify-http"
Handler = Callable[[BaseHTTPRequestHandler], None]


class Server:
    """A ThreadingHTTPServer whose GET/POST call ``handle(request_handler)``; records headers."""

    def __init__(self, handle: Handler):
        seen: list[dict[str, str]] = []
        self.seen = seen
        self.sent = 0
        server = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            owner = server

            def log_message(self, *a):  # quiet
                pass

            def _any(self):
                seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
                n = int(self.headers.get("content-length") or 0)
                if n:
                    self.rfile.read(n)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    handle(self)

            do_GET = do_POST = _any

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], Server]]:
    servers: list[Server] = []

    def start(handle: Handler) -> Server:
        servers.append(Server(handle))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def reply(h: BaseHTTPRequestHandler, body: bytes, status: int = 200, **headers: str) -> None:
    h.send_response(status)
    h.send_header("Content-Length", str(len(body)))
    h.send_header("Content-Type", headers.pop("ctype", "application/json"))
    for k, v in headers.items():
        h.send_header(k.replace("_", "-"), v)
    h.end_headers()
    h.wfile.write(body)


def trickle(h: BaseHTTPRequestHandler) -> None:
    """Answers 200 and then one byte per second of a long body."""
    h.send_response(200)
    h.send_header("Content-Length", "100000")
    h.end_headers()
    for _ in range(100000):
        h.wfile.write(b" ")
        h.wfile.flush()
        time.sleep(1)


def cli(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    full.pop("VLLM_API_KEY", None)
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "ascend_deploy.cli", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=timeout,
    )


# -- an overall deadline per request -----------------------------------------------------------
def test_a_server_trickling_one_byte_per_second_is_cut_at_the_deadline(serve):
    srv = serve(trickle)
    t0 = time.monotonic()
    with pytest.raises(Timeout, match="within 2 s"):
        Client(srv.url, timeout=2).get("/health")
    assert time.monotonic() - t0 < 3.5


def test_trickled_headers_are_cut_at_the_deadline_too(serve):
    def slow_headers(h):
        for ch in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 1000:
            h.wfile.write(bytes([ch]))
            h.wfile.flush()
            time.sleep(0.5)

    srv = serve(slow_headers)
    t0 = time.monotonic()
    with pytest.raises(Timeout):
        Client(srv.url, timeout=1.5).get("/health")
    assert time.monotonic() - t0 < 3


def test_verify_against_a_trickling_server_ends_within_its_timeouts(serve):
    """The reported fault: --timeout 10 --request-timeout 5 ran for more than 400 s."""
    srv = serve(trickle)
    t0 = time.monotonic()
    res = cli("verify", "--url", srv.url, "--timeout", "4", "--request-timeout", "2")
    took = time.monotonic() - t0
    assert res.returncode == 1, res.stderr
    assert "not ready after 4 s" in res.stdout
    assert "within" in res.stdout
    assert took < 15, took


# -- the key never leaves the service's origin -------------------------------------------------
def test_cross_origin_redirect_is_refused_and_never_gets_the_key(serve):
    other = serve(lambda h: reply(h, b'{"status": "ok"}'))
    srv = serve(lambda h: reply(h, b"", 302, Location=other.url + "/health"))
    with pytest.raises(BadResponse, match="another origin"):
        Client(srv.url, api_key=KEY, timeout=5).get("/health")
    assert srv.seen[0]["authorization"] == f"Bearer {KEY}"
    assert not any("authorization" in s for s in other.seen)
    assert other.seen == []  # not even contacted


def test_redirect_to_other_scheme_or_host_is_refused(serve):
    for location in ("https://127.0.0.1:1/health", "http://localhost:1/x", "file:///etc/passwd"):
        srv = serve(lambda h, loc=location: reply(h, b"", 307, Location=loc))
        with pytest.raises(BadResponse, match="another origin"):
            Client(srv.url, api_key=KEY, timeout=5).get("/health")


def test_same_origin_redirect_is_followed_with_the_key(serve):
    def handle(h):
        if h.path == "/v1/models":
            reply(h, b"", 308, Location="/v1/models/")
        else:
            reply(h, b'{"data": []}')

    srv = serve(handle)
    assert Client(srv.url, api_key=KEY, timeout=5).get_json("/v1/models") == {"data": []}
    assert [s["path"] for s in srv.seen] == ["/v1/models", "/v1/models/"]
    assert all(s["authorization"] == f"Bearer {KEY}" for s in srv.seen)


def test_redirect_loop_ends(serve):
    srv = serve(lambda h: reply(h, b"", 302, Location="/again"))
    with pytest.raises(BadResponse, match="more than 5 redirects"):
        Client(srv.url, timeout=5).get("/health")


# -- bounded bodies and JSON -------------------------------------------------------------------
def flood(declare: bool) -> Handler:
    def handle(h):
        h.send_response(200)
        if declare:
            h.send_header("Content-Length", str(1500 * 1024 * 1024))
        h.send_header("Connection", "close")
        h.end_headers()
        block = b"x" * (1024 * 1024)
        for _ in range(1500):
            h.wfile.write(block)
            h.owner.sent += len(block)

    return handle


@pytest.mark.parametrize("declare", [True, False], ids=["content-length", "no-length"])
def test_a_huge_body_is_refused_without_reading_it(serve, declare):
    srv = serve(flood(declare))
    with pytest.raises(TooLarge, match="MiB"):
        Client(srv.url, timeout=30).get("/metrics")
    time.sleep(0.3)
    # the client stopped reading at the cap: the server could not push much more than that
    assert srv.sent <= MAX_BODY + 16 * 1024 * 1024


def test_deeply_nested_json_is_a_bad_response_not_a_recursion_error(serve):
    deep = b"[" * 200000 + b"]" * 200000
    srv = serve(lambda h: reply(h, deep))
    with pytest.raises(BadResponse, match="nested too deeply"):
        Client(srv.url, timeout=10).get_json("/v1/models")
    with pytest.raises(BadResponse, match="nested too deeply"):
        Client(srv.url, timeout=10).post_json("/v1/chat/completions", {})


def test_verify_reports_deep_json_and_huge_answers_as_failed_checks(serve):
    models = json.dumps({"data": [{"id": "m", "max_model_len": 64}]}).encode()

    def handle(h):
        if h.path == "/health":
            reply(h, b"")
        elif h.path == "/v1/models":
            reply(h, models)
        elif h.path == "/version":
            reply(h, b"[" * 100000)
        else:  # the chat answer: deeply nested
            reply(h, b'{"choices": ' + b"[" * 100000 + b"]" * 100000 + b"}")

    srv = serve(handle)
    report = run_verify(Options(url=srv.url, ready_timeout=5, request_timeout=5))
    assert not report["ok"]
    first = next(c for c in report["checks"] if c["name"] == "first_request")
    assert first["status"] == "fail"
    assert "nested too deeply" in first["detail"]
    res = cli("verify", "--url", srv.url, "--timeout", "5", "--request-timeout", "5", "--json")
    assert res.returncode == 1
    assert "Traceback" not in res.stderr
    assert json.loads(res.stdout)["ok"] is False


def test_huge_model_list_fails_readiness_with_the_size(serve):
    def handle(h):
        if h.path == "/health":
            reply(h, b"")
        else:
            flood(True)(h)

    srv = serve(handle)
    report = run_verify(Options(url=srv.url, ready_timeout=2, request_timeout=5))
    ready = report["checks"][0]
    assert ready["name"] == "readiness" and ready["status"] == "fail"
    assert "MiB" in ready["detail"] and "check --url" in ready["detail"]


def test_error_statuses_keep_their_message_and_cap_the_body(serve):
    srv = serve(lambda h: reply(h, json.dumps({"error": {"message": "x" * 5000}}).encode(), 400))
    with pytest.raises(HttpStatus) as exc:
        Client(srv.url, timeout=5).get("/health")
    assert exc.value.status == 400 and len(exc.value.message) == 300


# -- the key from a file or the environment ----------------------------------------------------
def key_checking(h):
    """401 without the key; with it a service that refuses every chat request (ends fast)."""
    if h.headers.get("Authorization") != f"Bearer {KEY}":
        reply(h, b'{"error": {"message": "Unauthorized"}}', 401)
    elif h.path == "/health":
        reply(h, b"")
    elif h.path == "/v1/models":
        reply(h, b'{"data": [{"id": "m"}]}')
    else:
        reply(h, b'{"error": {"message": "refused"}}', 400)


def test_api_key_from_a_file_and_from_the_environment(serve, tmp_path):
    srv = serve(key_checking)
    keyfile = tmp_path / "key"
    keyfile.write_text(KEY + "\n")
    base = ("verify", "--url", srv.url, "--timeout", "2", "--request-timeout", "2")
    # without a key: refused at once with the ways to give it
    res = cli(*base)
    assert res.returncode == 1 and "VLLM_API_KEY or --api-key-file" in res.stdout
    for extra, env in (
        (("--api-key-file", str(keyfile)), {}),
        ((), {"VLLM_API_KEY": KEY}),
        (("--api-key", KEY), {}),
    ):
        srv.seen.clear()
        cli(*base, *extra, env=env)
        assert srv.seen and srv.seen[0].get("authorization") == f"Bearer {KEY}", extra
    # the file wins over the environment
    srv.seen.clear()
    cli(*base, "--api-key-file", str(keyfile), env={"VLLM_API_KEY": "wrong"})
    assert srv.seen[0]["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize(
    "content, needle",
    [("", "empty"), ("two\nlines\n", "one line"), ("sk with space", "one line")],
)
def test_bad_key_files_are_exit_2_without_echoing_the_key(tmp_path, content, needle):
    keyfile = tmp_path / "key"
    keyfile.write_text(content)
    res = cli("verify", "--url", "http://127.0.0.1:1", "--api-key-file", str(keyfile))
    assert res.returncode == 2 and needle in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    if content.strip():
        assert content.split()[0] not in res.stderr.replace(str(keyfile), "")


def test_key_file_that_is_a_fifo_or_missing_is_refused_at_once(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    res = cli("verify", "--url", "http://127.0.0.1:1", "--api-key-file", str(fifo), timeout=20)
    assert res.returncode == 2 and "not a regular file" in res.stderr
    res = cli("verify", "--url", "http://127.0.0.1:1", "--api-key-file", str(tmp_path / "no"))
    assert res.returncode == 2 and "cannot open" in res.stderr


def test_help_says_how_to_keep_the_key_out_of_argv():
    out = " ".join(cli("verify", "--help").stdout.split())
    assert "--api-key-file" in out and "$VLLM_API_KEY" in out and "visible" in out
    res = cli("verify", "--url", "http://x", "--api-key", "a", "--api-key-file", "b")
    assert res.returncode == 2 and "not allowed with" in res.stderr


def test_a_key_that_cannot_be_a_header_is_refused_before_any_request(serve):
    srv = serve(key_checking)
    for key in ("two\nlines", "sk with space", "ключ"):
        with pytest.raises(InputError, match="visible ASCII"):
            run_verify(Options(url=srv.url, api_key=key, ready_timeout=1))
    assert srv.seen == []


def vllm_like(max_model_len: int, chat: Handler) -> Handler:
    """A server that answers /health, /v1/models (model "m") and /version as vLLM does and hands
    every other request to ``chat``."""

    def handle(h):
        if h.path == "/health":
            reply(h, b"")
        elif h.path == "/v1/models":
            reply(h, json.dumps({"data": [{"id": "m", "max_model_len": max_model_len}]}).encode())
        elif h.path == "/version":
            reply(h, b'{"version": "0.0"}')
        else:
            chat(h)

    return handle


def test_a_replica_that_stalls_mid_suite_ends_the_run_after_one_deadline(serve):
    """A half-broken replica must not hold a rollout for a deadline per remaining request."""
    answer = json.dumps(
        {"choices": [{"message": {"content": "Paris."}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 9, "completion_tokens": 2}}
    ).encode()  # fmt: skip
    chats = []

    def chat(h):
        chats.append(h.path)
        if len(chats) == 1:
            reply(h, answer)
        else:
            trickle(h)

    srv = serve(vllm_like(64, chat))
    t0 = time.monotonic()
    report = run_verify(Options(url=srv.url, ready_timeout=5, request_timeout=1))
    assert time.monotonic() - t0 < 6
    suite = next(c for c in report["checks"] if c["name"] == "suite")
    assert suite["status"] == "fail" and "stopped answering" in suite["detail"]
    assert "within 1 s" in report["cases"][0]["why"][0]
    assert len(chats) == 2  # the smoke request and one suite case, nothing after
    assert {c["name"]: c["status"] for c in report["checks"]}["streaming"] == "skipped"


@pytest.mark.parametrize("counts", [[40, 40], [40, 39]], ids=["constant", "shrinking"])
def test_token_counts_that_do_not_follow_the_prompt_fail_max_length_boundedly(serve, counts):
    """A server that reports a constant usage.prompt_tokens: sizing from it asked for a prompt of
    about 4e9 sentences (MemoryError, report lost). It fails the check, naming the counts."""
    sizes = []

    def chat(h):
        sizes.append(int(h.headers.get("content-length") or 0))
        prompt = counts[min(len(sizes) - 1, 1)] if len(sizes) <= 2 else counts[0]
        reply(h, json.dumps(
            {"choices": [{"message": {"content": "OK"}, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": prompt, "completion_tokens": 1}}
        ).encode())  # fmt: skip

    srv = serve(vllm_like(4096, chat))
    ctx = Context(Options(url=srv.url, model="m", ready_timeout=5, request_timeout=5))
    ctx.server["max_model_len"] = 4096
    check = max_length.run(ctx)
    assert check.ok is False
    assert f"usage.prompt_tokens is {counts[0]} for one sentence of filler and {counts[1]}" in (
        check.detail
    )
    assert max(sizes) < 10_000  # only the two sizing probes, both small
