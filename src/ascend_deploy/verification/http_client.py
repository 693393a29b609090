"""A small OpenAI-compatible HTTP client for verification (standard library only).

Failures are classified the way an operator needs them: the service is not listening
(``Unreachable``), it closed the connection without answering (``Disconnected``: the
process died on the request), it did not answer in time (``Timeout``), or it answered
with an HTTP error (``HttpStatus`` with the body's message), or with something that is not
a usable answer (``BadResponse``: not JSON, too large, nested too deeply, a redirect away).

Every request has one deadline on the monotonic clock covering connect, headers and body (a
watchdog shuts the socket down when it passes, so a server that trickles bytes cannot hold a
request longer); bodies are capped (``MAX_BODY``); redirects are followed only within the
service's own origin, so the API key never goes anywhere else. Connections are direct (no
HTTP proxy from the environment).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

from ..errors import InputError

MAX_BODY = 32 * 1024 * 1024  # a chat answer, /v1/models or /metrics is far smaller
MAX_ERROR_BODY = 64 * 1024
MAX_EVENT_LINE = 1024 * 1024
MAX_REDIRECTS = 5
_REDIRECTS = (301, 302, 303, 307, 308)


class RequestFailed(Exception):
    """Base class; ``str()`` is a one-line explanation."""


class Unreachable(RequestFailed):
    pass


class Disconnected(RequestFailed):
    pass


class Timeout(RequestFailed):
    pass


class HttpStatus(RequestFailed):
    def __init__(self, status: int, message: str, path: str):
        super().__init__(f"HTTP {status} from {path}: {message}")
        self.status = status
        self.message = message
        self.path = path


class BadResponse(RequestFailed):
    pass


class TooLarge(BadResponse):
    pass


def loads(raw: bytes | str, what: str) -> Any:
    """JSON of a response; BadResponse (one line) for anything else, deep nesting included."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise BadResponse(f"{what}: JSON nested too deeply to be an API answer") from None
    except ValueError:
        text = raw if isinstance(raw, str) else raw[:200].decode("utf-8", errors="replace")
        raise BadResponse(f"{what}: not JSON: {text[:200]!r}") from None


def _error_message(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace").strip()
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return text[:300] or "(empty body)"
    if isinstance(doc, dict):
        err = doc.get("error")
        if isinstance(err, dict):
            return str(err.get("message") or "(error without message)")[:300]
        if err is not None:
            return str(err)[:300]
        for key in ("message", "detail"):
            if isinstance(doc.get(key), (str, int, float)) and doc[key]:
                return str(doc[key])[:300]
    return text[:300]


def _origin(parts: urllib.parse.SplitResult) -> tuple[str, str, int]:
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, (parts.hostname or "").lower(), port


class _Watchdog:
    """Shuts a connection's socket down when the request's deadline passes."""

    def __init__(self, conn: http.client.HTTPConnection, seconds: float):
        self.conn = conn
        self.fired = False
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        sock = self.conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()


class Response:
    """An open response: status, headers and capped, deadline-bound reads."""

    def __init__(self, resp, conn, guard: _Watchdog, what: str, limit: float):
        self.resp = resp
        self.conn = conn
        self.guard = guard
        self.what = what
        self.limit = limit
        self.status: int = resp.status
        self.headers = resp.headers
        self.received = 0

    def __enter__(self) -> Response:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.guard.cancel()
        try:
            self.resp.close()
        finally:
            self.conn.close()

    def _failed(self, exc: BaseException) -> RequestFailed:
        if self.guard.fired or isinstance(exc, TimeoutError):
            return Timeout(f"{self.what}: no complete answer within {self.limit:g} s")
        if isinstance(exc, http.client.HTTPException) and not isinstance(
            exc, http.client.IncompleteRead
        ):
            return BadResponse(f"{self.what}: broken HTTP response ({type(exc).__name__})")
        return Disconnected(f"{self.what}: response cut off ({type(exc).__name__})")

    def _count(self, n: int, cap: int) -> None:
        self.received += n
        if self.received > cap:
            raise TooLarge(
                f"{self.what}: response larger than {cap // (1024 * 1024)} MiB; "
                "this is not the vLLM service's answer (check --url)"
            )

    def read(self, cap: int = MAX_BODY) -> bytes:
        """The whole body, at most ``cap`` bytes (TooLarge beyond)."""
        declared = self.resp.length
        if declared is not None and declared > cap:
            raise TooLarge(
                f"{self.what}: response declares {declared} bytes, more than the "
                f"{cap // (1024 * 1024)} MiB accepted; this is not the vLLM service's answer "
                "(check --url)"
            )
        parts: list[bytes] = []
        while True:
            try:
                block = self.resp.read(65536)
            except (OSError, http.client.HTTPException) as exc:
                raise self._failed(exc) from None
            if self.guard.fired:
                raise self._failed(TimeoutError())
            if not block:
                return b"".join(parts)
            self._count(len(block), cap)
            parts.append(block)

    def readline(self, cap: int = MAX_BODY) -> bytes:
        """One line (b"" at the end); lines over MAX_EVENT_LINE and totals over cap fail."""
        try:
            line = self.resp.readline(MAX_EVENT_LINE + 1)
        except (OSError, http.client.HTTPException) as exc:
            raise self._failed(exc) from None
        if self.guard.fired:
            raise self._failed(TimeoutError())
        if len(line) > MAX_EVENT_LINE:
            raise TooLarge(f"{self.what}: an event line longer than 1 MiB")
        self._count(len(line), cap)
        return line


class Client:
    """GET/POST against one base URL with an optional bearer key."""

    def __init__(self, url: str, api_key: str | None = None, timeout: float = 120.0):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError("not an http(s) URL with a host (http://HOST:PORT)")
        _ = parsed.port  # ValueError for a port that is not a number or out of range
        self.base = url.rstrip("/")
        if self.base.endswith("/v1"):
            self.base = self.base[:-3]
        self.origin = _origin(parsed)
        if api_key and any(not ("!" <= ch <= "~") for ch in api_key):
            raise InputError(
                "the API key must be one line of visible ASCII characters (no spaces or "
                "control characters); check the vaulted key or the key file"
            )
        self.api_key = api_key
        self.timeout = timeout

    def open(
        self, method: str, path: str, body: Any = None, timeout: float | None = None
    ) -> Response:
        """Send the request; the open response (status < 400) within one deadline."""
        limit = timeout or self.timeout
        deadline = time.monotonic() + limit
        what = f"{method} {path}"
        data = None if body is None else json.dumps(body).encode("utf-8")
        url = self.base + path
        for _hop in range(MAX_REDIRECTS + 1):
            parts = urllib.parse.urlsplit(url)
            headers = {"Accept": "application/json", "Connection": "close"}
            if data is not None:
                headers["Content-Type"] = "application/json"
            if self.api_key:  # only ever to our own origin (checked before each hop)
                headers["Authorization"] = f"Bearer {self.api_key}"
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(f"{what}: no complete answer within {limit:g} s")
            cls = (
                http.client.HTTPSConnection
                if parts.scheme == "https"
                else http.client.HTTPConnection
            )
            conn = cls(parts.hostname or "", parts.port, timeout=left)
            guard = _Watchdog(conn, left)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            try:
                try:
                    conn.request(method, target, body=data, headers=headers)
                except (ConnectionRefusedError, socket.gaierror) as exc:
                    raise Unreachable(f"{method} {url}: {exc.strerror or exc}") from None
                except OSError as exc:
                    if guard.fired or isinstance(exc, TimeoutError):
                        raise Timeout(f"{what}: no connection within {limit:g} s") from None
                    raise Unreachable(f"{method} {url}: {exc.strerror or exc}") from None
                try:
                    resp = conn.getresponse()
                except (OSError, http.client.HTTPException) as exc:
                    if guard.fired or isinstance(exc, TimeoutError):
                        raise Timeout(f"{what}: no answer within {limit:g} s") from None
                    if isinstance(exc, (http.client.RemoteDisconnected, ConnectionError)):
                        raise Disconnected(
                            f"{what}: the server closed the connection without answering"
                        ) from None
                    raise BadResponse(
                        f"{what}: broken HTTP response ({type(exc).__name__})"
                    ) from None
            except RequestFailed:
                guard.cancel()
                conn.close()
                raise
            answer = Response(resp, conn, guard, what, limit)
            if resp.status in _REDIRECTS and resp.getheader("Location"):
                location = resp.getheader("Location", "")
                answer.close()
                url = urllib.parse.urljoin(url, location)
                target_parts = urllib.parse.urlsplit(url)
                if target_parts.scheme not in ("http", "https") or (
                    _origin(target_parts) != self.origin
                ):
                    raise BadResponse(
                        f"{what}: redirected (HTTP {resp.status}) to another origin "
                        f"{location[:200]!r}; not followed so the API key stays with the "
                        "service: point --url at the service itself"
                    )
                if resp.status in (301, 302, 303) and method != "GET":
                    method, data = "GET", None
                continue
            if resp.status >= 400:
                try:
                    raw = answer.read(MAX_ERROR_BODY)
                except TooLarge:
                    raw = b"(error body too large)"
                except RequestFailed:
                    raw = b""
                finally:
                    answer.close()
                raise HttpStatus(resp.status, _error_message(raw), path)
            return answer
        raise BadResponse(f"{what}: more than {MAX_REDIRECTS} redirects")

    def get(self, path: str, timeout: float | None = None) -> tuple[int, bytes]:
        with self.open("GET", path, timeout=timeout) as resp:
            return resp.status, resp.read()

    def get_json(self, path: str, timeout: float | None = None) -> Any:
        _status, body = self.get(path, timeout)
        return loads(body, f"GET {path}")

    def post_json(self, path: str, body: dict, timeout: float | None = None) -> Any:
        with self.open("POST", path, body, timeout) as resp:
            raw = resp.read()
        return loads(raw, f"POST {path}")

    def stream(
        self, path: str, body: dict, timeout: float | None = None
    ) -> Iterator[tuple[float, Any]]:
        """Yield ``(monotonic time, event)`` for each SSE ``data:`` event; ``"[DONE]"`` last.

        Raises BadResponse when the stream ends without ``[DONE]``.
        """
        resp = self.open("POST", path, dict(body, stream=True), timeout)
        done = False
        try:
            ctype = resp.headers.get("content-type", "")
            if not ctype.startswith("text/event-stream"):
                raise BadResponse(
                    f"POST {path} stream: content-type {ctype[:100]!r}, not text/event-stream"
                )
            while True:
                line = resp.readline()
                if not line:
                    break
                text = line.decode("utf-8", errors="replace").strip()
                if not text.startswith("data:"):
                    continue
                payload = text[5:].strip()
                now = time.monotonic()
                if payload == "[DONE]":
                    done = True
                    yield now, "[DONE]"
                    break
                yield now, loads(payload, f"POST {path}: SSE event")
        finally:
            resp.close()
        if not done:
            raise BadResponse(f"POST {path}: the event stream ended without 'data: [DONE]'")
