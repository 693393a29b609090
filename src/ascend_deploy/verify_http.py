"""A small OpenAI-compatible HTTP client for verification (standard library only).

Failures are classified the way an operator needs them: the service is not listening
(``Unreachable``), it closed the connection without answering (``Disconnected``: the
process died on the request), it did not answer in time (``Timeout``), or it answered
with an HTTP error (``HttpStatus`` with the body's message).
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any


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


def _error_message(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace").strip()
    try:
        doc = json.loads(text)
    except ValueError:
        return text[:300] or "(empty body)"
    if isinstance(doc, dict):
        err = doc.get("error")
        if isinstance(err, dict):
            return str(err.get("message") or err)[:300]
        if err is not None:
            return str(err)[:300]
        if doc.get("message"):
            return str(doc["message"])[:300]
        if doc.get("detail"):
            return str(doc["detail"])[:300]
    return text[:300]


class Client:
    """GET/POST against one base URL with an optional bearer key."""

    def __init__(self, url: str, api_key: str | None = None, timeout: float = 120.0):
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError("not an http(s) URL with a host (http://HOST:PORT)")
        _ = parsed.port  # ValueError for a port that is not a number or out of range
        self.base = url.rstrip("/")
        if self.base.endswith("/v1"):
            self.base = self.base[:-3]
        self.api_key = api_key
        self.timeout = timeout

    def _request(
        self, method: str, path: str, body: Any = None, timeout: float | None = None
    ) -> http.client.HTTPResponse:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            return urllib.request.urlopen(req, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as exc:
            raise HttpStatus(exc.code, _error_message(exc.read()), path) from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise Timeout(
                    f"{method} {path}: no answer within {timeout or self.timeout:.0f} s"
                ) from None
            if isinstance(reason, (ConnectionResetError, http.client.RemoteDisconnected)):
                raise Disconnected(
                    f"{method} {path}: the server closed the connection without answering"
                ) from None
            raise Unreachable(f"{method} {self.base}{path}: {reason}") from None
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            raise Disconnected(
                f"{method} {path}: the server closed the connection without answering"
            ) from None
        except TimeoutError:
            raise Timeout(
                f"{method} {path}: no answer within {timeout or self.timeout:.0f} s"
            ) from None
        except http.client.HTTPException as exc:
            raise BadResponse(f"{method} {path}: broken HTTP response ({exc!r})") from None

    def get(self, path: str, timeout: float | None = None) -> tuple[int, bytes]:
        with self._request("GET", path, timeout=timeout) as resp:
            try:
                return resp.status, resp.read()
            except (http.client.HTTPException, ConnectionError, TimeoutError) as exc:
                raise Disconnected(f"GET {path}: response cut off ({exc!r})") from None

    def get_json(self, path: str, timeout: float | None = None) -> Any:
        _status, body = self.get(path, timeout)
        try:
            return json.loads(body)
        except ValueError:
            raise BadResponse(f"GET {path}: not JSON: {body[:200]!r}") from None

    def post_json(self, path: str, body: dict, timeout: float | None = None) -> Any:
        with self._request("POST", path, body, timeout) as resp:
            try:
                raw = resp.read()
            except (http.client.HTTPException, ConnectionError) as exc:
                raise Disconnected(f"POST {path}: response cut off ({exc!r})") from None
            except TimeoutError:
                raise Timeout(f"POST {path}: response not finished in time") from None
        try:
            return json.loads(raw)
        except ValueError:
            raise BadResponse(f"POST {path}: not JSON: {raw[:200]!r}") from None

    def stream(
        self, path: str, body: dict, timeout: float | None = None
    ) -> Iterator[tuple[float, Any]]:
        """Yield ``(monotonic time, event)`` for each SSE ``data:`` event; ``"[DONE]"`` last.

        Raises BadResponse when the stream ends without ``[DONE]``.
        """
        resp = self._request("POST", path, dict(body, stream=True), timeout)
        done = False
        try:
            ctype = resp.headers.get("content-type", "")
            if not ctype.startswith("text/event-stream"):
                raise BadResponse(
                    f"POST {path} stream: content-type {ctype!r}, not text/event-stream"
                )
            while True:
                try:
                    line = resp.readline()
                except (http.client.HTTPException, ConnectionError) as exc:
                    raise Disconnected(f"POST {path}: stream cut off ({exc!r})") from None
                except TimeoutError:
                    raise Timeout(f"POST {path}: stream stalled") from None
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
                try:
                    yield now, json.loads(payload)
                except ValueError:
                    raise BadResponse(
                        f"POST {path}: SSE event is not JSON: {payload[:200]!r}"
                    ) from None
        finally:
            resp.close()
        if not done:
            raise BadResponse(f"POST {path}: the event stream ended without 'data: [DONE]'")
