"""OpenAI-compatible HTTP server of the emulated vLLM (standard library only).

Routes as vLLM's API server: ``GET /health``, ``GET /version``, ``GET /v1/models``,
``POST /v1/chat/completions``, ``POST /v1/completions``, ``GET /metrics``. Response shapes
follow vLLM's protocol models (vllm/entrypoints/openai/protocol.py): ids ``chatcmpl-*`` /
``cmpl-*``, ``usage`` with ``prompt_tokens_details: null``, ``finish_reason`` "stop" /
"length", ``stop_reason``, SSE chunks ``data: {...}`` ending with ``data: [DONE]``, errors
``{"object":"error","message":...,"type":"BadRequestError","param":null,"code":400}``.
``--api-key`` protects ``/v1/*`` (401 ``{"error":"Unauthorized"}``), as vLLM's
AuthenticationMiddleware does.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import messages as M
from .engine_adapter import LoadedModel
from .memory import BLOCK_SIZE
from .metrics import Metrics
from .scheduler import Request, Scheduler
from .startup import Deployment
from .versions import kv_usage_metric_names

REASONING_PARSERS = ("qwen3", "deepseek_r1")
THINK_START, THINK_END = "<think>", "</think>"


class ApiError(Exception):
    def __init__(self, status: int, message: str, err_type: str = "BadRequestError"):
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type

    def body(self) -> dict:
        return {
            "object": "error",
            "message": self.message,
            "type": self.err_type,
            "param": None,
            "code": self.status,
        }


def bad(message: str) -> ApiError:
    return ApiError(400, message)


@dataclass
class Params:
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    logprobs: int | None  # number of top logprobs wanted (0 = only the sampled token's)
    stop: list[str] = field(default_factory=list)
    stop_token_ids: set[int] = field(default_factory=set)
    ignore_eos: bool = False


@dataclass
class Step:
    token_id: int
    text: str
    logprob: float | None
    top: list | None


def _num(body: dict, key: str, kind: type, lo: float | None = None, hi: float | None = None):
    value = body.get(key)
    if value is None:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    if not ok:
        raise bad(f"'{key}' must be a {'integer' if kind is int else 'number'}, got {value!r}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise bad(f"'{key}' must be between {lo} and {hi}, got {value}")
    return value


class ReasoningSplitter:
    """vLLM's Qwen3 reasoning parser: text inside <think>...</think> is reasoning_content."""

    def __init__(self) -> None:
        self.phase = "start"  # start -> reasoning -> content

    def feed(self, text: str) -> tuple[str, str]:
        reasoning, content = "", ""
        while text:
            if self.phase == "start":
                if THINK_START in text:
                    before, _, text = text.partition(THINK_START)
                    content += before
                    self.phase = "reasoning"
                elif THINK_END in text:  # template already opened the think block
                    r, _, text = text.partition(THINK_END)
                    reasoning += r
                    self.phase = "content"
                else:
                    content += text
                    text = ""
            elif self.phase == "reasoning":
                if THINK_END in text:
                    r, _, text = text.partition(THINK_END)
                    reasoning += r
                    self.phase = "content"
                else:
                    reasoning += text
                    text = ""
            else:
                content += text
                text = ""
        return reasoning, content

    @staticmethod
    def split(text: str) -> tuple[str | None, str | None]:
        """Non-streaming: (reasoning_content, content) as vLLM returns them."""
        if THINK_START in text:
            text = text.partition(THINK_START)[2]
        if THINK_END not in text:
            return None, text
        reasoning, _, content = text.partition(THINK_END)
        return reasoning, content or None


class App:
    """The serving state shared by all request threads."""

    def __init__(self, dep: Deployment, loaded: LoadedModel):
        self.dep = dep
        self.args = dep.args
        self.log = dep.log
        self.loaded = loaded
        self.tok = loaded.tokenizer
        self.model = loaded.model
        self.served_names = dep.served_names
        self.max_model_len = dep.max_model_len
        self.api_key = dep.args.api_key or os.environ.get("VLLM_API_KEY") or None
        self.created = int(time.time())
        self.eos_ids = set(int(i) for i in self.tok.eos_token_ids)
        self.think_ids = {
            i
            for name in (THINK_START, THINK_END)
            for i in [self.tok.special_tokens.get(name)]
            if i is not None
        }
        cache_info = {
            "block_size": str(BLOCK_SIZE),
            "gpu_memory_utilization": str(dep.args.gpu_memory_utilization),
            "num_gpu_blocks": str(dep.budget.num_blocks),
            "swap_space": str(dep.args.swap_space),
        }
        self.metrics = Metrics(
            dep.served_names[0], kv_usage_metric_names(dep.row["vllm"]), cache_info
        )
        self.scheduler = Scheduler(
            dep.budget.num_blocks, BLOCK_SIZE, dep.max_num_seqs, dep.log, self.metrics
        )
        self.defaults = self._generation_defaults()
        self._counter = 0
        self._counter_lock = threading.Lock()
        self._last_stats = (time.monotonic(), 0, 0)

    def _generation_defaults(self) -> dict:
        if self.args.generation_config == "vllm":
            return {}
        path = os.path.join(self.dep.args.model, "generation_config.json")
        try:
            with open(path, encoding="utf-8") as fh:
                cfg = json.load(fh)
        except (OSError, ValueError):
            return {}
        out = {k: cfg[k] for k in ("temperature", "top_p") if isinstance(cfg.get(k), (int, float))}
        if out:
            self.log.warning("__init__.py:1635", M.GENERATION_CONFIG_OVERRIDE)
        return out

    # -- request parsing ------------------------------------------------------------------
    def check_model(self, body: dict) -> str:
        name = body.get("model")
        if name is None:
            return self.served_names[0]
        if name not in self.served_names:
            raise ApiError(404, M.MODEL_NOT_FOUND.format(model=name), "NotFoundError")
        return name

    def params(self, body: dict, prompt_len: int, logprobs: int | None) -> Params:
        max_tokens = _num(body, "max_completion_tokens", int)
        if max_tokens is None:
            max_tokens = _num(body, "max_tokens", int)
        if max_tokens is not None and max_tokens < 1:
            raise bad(M.MAX_TOKENS_MIN.format(value=max_tokens))
        if max_tokens is None:
            if prompt_len >= self.max_model_len:
                raise bad(M.INPUT_TOO_LONG.format(max_len=self.max_model_len, prompt=prompt_len))
            max_tokens = self.max_model_len - prompt_len
        elif prompt_len + max_tokens > self.max_model_len:
            raise bad(
                M.CONTEXT_TOO_LONG.format(
                    max_len=self.max_model_len,
                    total=prompt_len + max_tokens,
                    prompt=prompt_len,
                    completion=max_tokens,
                )
            )
        temperature = _num(body, "temperature", float, 0.0, 2.0)
        top_p = _num(body, "top_p", float, 0.0, 1.0)
        if top_p is not None and top_p <= 0:
            raise bad(f"top_p must be in (0, 1], got {top_p}.")
        seed = _num(body, "seed", int)
        n = _num(body, "n", int, 1, 1)
        del n  # only n=1 is served (the range check above reports other values)
        stop = body.get("stop")
        if stop is None:
            stops: list[str] = []
        elif isinstance(stop, str):
            stops = [stop]
        elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
            stops = [s for s in stop if s]
        else:
            raise bad(f"'stop' must be a string or a list of strings, got {stop!r}")
        stop_ids = body.get("stop_token_ids") or []
        if not isinstance(stop_ids, list) or not all(isinstance(i, int) for i in stop_ids):
            raise bad("'stop_token_ids' must be a list of integers")
        ignore_eos = body.get("ignore_eos", False)
        if not isinstance(ignore_eos, bool):
            raise bad("'ignore_eos' must be a boolean")
        return Params(
            max_tokens=max_tokens,
            temperature=float(
                self.defaults.get("temperature", 1.0) if temperature is None else temperature
            ),
            top_p=float(self.defaults.get("top_p", 1.0) if top_p is None else top_p),
            seed=seed,
            logprobs=logprobs,
            stop=stops,
            stop_token_ids=set(stop_ids),
            ignore_eos=ignore_eos,
        )

    def request_id(self, prefix: str) -> str:
        return f"{prefix}-{uuid.uuid4().hex}"

    # -- generation -----------------------------------------------------------------------
    def generate(
        self, request_id: str, prompt_ids: list[int], p: Params, result: dict
    ) -> Iterator[Step]:
        """Yield the generated steps; ``result`` gets finish_reason / stop_reason / counts."""
        t0 = time.monotonic()
        req = Request(request_id, len(prompt_ids))
        self.scheduler.add(req)
        with self.metrics.lock:
            self.metrics.prompt_tokens += len(prompt_ids)
        dec = self.tok.incremental_decoder(skip_special_tokens=False)
        gen = self.model.generate(
            list(prompt_ids),
            p.max_tokens,
            temperature=p.temperature,
            top_p=p.top_p,
            seed=p.seed,
            stop_ids=[] if p.ignore_eos else None,
            logprobs=p.logprobs,
        )
        full = ""  # all text generated so far
        sent = 0  # how much of it was yielded
        # Like vLLM's detokenizer, hold back the characters that could start a stop string.
        hold = max((len(s) for s in p.stop), default=1) - 1
        result.update(finish_reason="length", stop_reason=None, completion_tokens=0)
        try:
            stopped_on_string = False
            for _ in range(p.max_tokens):
                self.scheduler.reserve_next(req)
                try:
                    token_id, logprob, top = next(gen)
                except StopIteration:
                    result["finish_reason"] = "stop"
                    break
                token_id = int(token_id)
                req.generated += 1
                result["completion_tokens"] = req.generated
                with self.metrics.lock:
                    self.metrics.generation_tokens += 1
                    if req.generated == 1:
                        self.metrics.ttft.observe(time.monotonic() - t0)
                if token_id in p.stop_token_ids:
                    result.update(finish_reason="stop", stop_reason=token_id)
                    break
                if token_id in self.eos_ids and not p.ignore_eos:
                    result["finish_reason"] = "stop"
                    break
                if not (self.tok.is_special(token_id) and token_id not in self.think_ids):
                    full += dec.feed(token_id)
                hits = [(full.find(s), s) for s in p.stop if s in full]
                if hits:
                    idx, s = min(hits)
                    yield Step(token_id, full[sent:idx], logprob, top)
                    sent = idx
                    result.update(finish_reason="stop", stop_reason=s)
                    stopped_on_string = True
                    break
                upto = max(sent, len(full) - hold)
                yield Step(token_id, full[sent:upto], logprob, top)
                sent = upto
            if not stopped_on_string:
                full += dec.flush()
                if len(full) > sent:
                    yield Step(-1, full[sent:], None, None)
        finally:
            gen.close()
            self.scheduler.finish(req)
            self.metrics.finished(
                result["finish_reason"], len(prompt_ids), req.generated, time.monotonic() - t0
            )

    def token_text(self, token_id: int) -> str:
        return self.tok.token_bytes(token_id).decode("utf-8", errors="replace")

    def chat_logprob(self, step: Step) -> dict:
        entry = {
            "token": self.token_text(step.token_id),
            "logprob": float(step.logprob) if step.logprob is not None else None,
            "bytes": list(self.tok.token_bytes(step.token_id)),
            "top_logprobs": [],
        }
        for tid, lp in step.top or []:
            entry["top_logprobs"].append(
                {
                    "token": self.token_text(int(tid)),
                    "logprob": float(lp),
                    "bytes": list(self.tok.token_bytes(int(tid))),
                }
            )
        return entry

    def stats_line(self) -> str | None:
        now = time.monotonic()
        t_last, p_last, g_last = self._last_stats
        with self.metrics.lock:
            p, g = self.metrics.prompt_tokens, self.metrics.generation_tokens
            running, waiting, usage = (
                self.metrics.running,
                self.metrics.waiting,
                self.metrics.kv_usage,
            )
        self._last_stats = (now, p, g)
        if p == p_last and g == g_last and not running and not waiting:
            return None
        dt = max(now - t_last, 1e-6)
        return M.STATS.format(
            prompt=(p - p_last) / dt,
            gen=(g - g_last) / dt,
            running=running,
            waiting=waiting,
            usage=usage * 100,
        )


# -- HTTP ---------------------------------------------------------------------------------
def _messages_ok(messages: object) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise bad("'messages' must be a non-empty list of message objects")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise bad(f"messages[{i}] must be an object with a 'role'")
        content = m.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                if not isinstance(part, dict) or part.get("type") != "text":
                    raise bad(f"messages[{i}]: only text content parts are supported")
                parts.append(str(part.get("text", "")))
            content = "".join(parts)
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise bad(f"messages[{i}].content must be a string or a list of text parts")
        out.append({**m, "content": content})
    return out


# TEST-ONLY switch (tests/unit/verification/test_verify*.py): ASCEND_SIM_TEST_CRASH_ON_REQUEST=N
# makes the engine die on the N-th generation request, the way a ready service can still die on its
# first request (a device fault at the first forward pass): the EngineCore error is printed and
# the process exits without answering. Never set in images or playbooks.
_test_requests = 0
_test_lock = threading.Lock()


def _maybe_test_crash(app: App) -> None:
    global _test_requests
    limit = os.environ.get("ASCEND_SIM_TEST_CRASH_ON_REQUEST")
    if not limit:
        return
    with _test_lock:
        _test_requests += 1
        if _test_requests < int(limit):
            return
    pid = os.getpid()
    app.log.error("core.py:866", "EngineCore encountered a fatal error.", proc="EngineCore_DP0")
    app.log.raw_err(f"RuntimeError: {M.EZ9999}")
    app.log.raw_err(f"{M.EZ9999.split(':')[0]}: [PID: {pid}] {app.log.plog_stamp()} test crash")
    app.log.raw_err("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.")
    os._exit(1)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""
    app: App  # set on the class by make_server

    def log_message(self, format: str, *args) -> None:
        pass

    def _access(self, status: int) -> None:
        if self.app.args.disable_log_requests and status == 200:
            return
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = ""
        self.app.log.uvicorn(
            M.UVICORN_ACCESS.format(
                client=f"{self.client_address[0]}:{self.client_address[1]}",
                method=self.command,
                path=self.path,
                status=status,
                reason=reason,
            )
        )

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self._access(status)

    def _json(self, status: int, obj: object) -> None:
        self._send(status, json.dumps(obj).encode("utf-8"))

    def _error(self, err: ApiError) -> None:
        self._json(err.status, err.body())

    def _authorised(self) -> bool:
        key = self.app.api_key
        if not key or not self.path.startswith("/v1"):
            return True
        if self.headers.get("Authorization", "") == f"Bearer {key}":
            return True
        self._json(401, {"error": M.UNAUTHORIZED})
        return False

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if not self._authorised():
            return
        if path == "/health":
            self._send(200, b"", "application/json")
        elif path == "/version":
            self._json(200, {"version": self.app.dep.row["vllm"].lstrip("v")})
        elif path == "/metrics":
            body = self.app.metrics.render().encode("utf-8")
            self._send(200, body, "text/plain; version=0.0.4; charset=utf-8")
        elif path == "/v1/models":
            self._json(200, self._models())
        else:
            self._json(404, {"detail": "Not Found"})

    def _models(self) -> dict:
        app = self.app
        data = []
        for name in app.served_names:
            data.append(
                {
                    "id": name,
                    "object": "model",
                    "created": app.created,
                    "owned_by": "vllm",
                    "root": app.dep.args.model,
                    "parent": None,
                    "max_model_len": app.max_model_len,
                    "permission": [
                        {
                            "id": f"modelperm-{uuid.uuid4().hex}",
                            "object": "model_permission",
                            "created": app.created,
                            "allow_create_engine": False,
                            "allow_sampling": True,
                            "allow_logprobs": True,
                            "allow_search_indices": False,
                            "allow_view": True,
                            "allow_fine_tuning": False,
                            "organization": "*",
                            "group": None,
                            "is_blocking": False,
                        }
                    ],
                }
            )
        return {"object": "list", "data": data}

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        if not self._authorised():
            return
        if path not in ("/v1/chat/completions", "/v1/completions"):
            self._json(404, {"detail": "Not Found"})
            return
        _maybe_test_crash(self.app)
        try:
            try:
                body = json.loads(raw.decode("utf-8")) if raw else None
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise bad(f"request body is not valid JSON: {exc}") from None
            if not isinstance(body, dict):
                raise bad("request body must be a JSON object")
            if path == "/v1/chat/completions":
                self._chat(body)
            else:
                self._completion(body)
        except ApiError as err:
            self._error(err)
        except TimeoutError as exc:
            self._error(ApiError(503, str(exc), "ServiceUnavailableError"))
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:  # an engine failure must not kill the server
            self.app.log.error("serving_engine.py:700", f"Error in request: {exc!r}")
            with contextlib.suppress(OSError):
                self._error(ApiError(500, str(exc), "InternalServerError"))

    # -- streaming helpers ------------------------------------------------------------------
    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self._access(200)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _event(self, obj: object) -> None:
        self._chunk(b"data: " + json.dumps(obj).encode("utf-8") + b"\n\n")

    def _end_stream(self) -> None:
        self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    @staticmethod
    def _usage(prompt: int, completion: int) -> dict:
        return {
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion,
            "completion_tokens": completion,
            "prompt_tokens_details": None,
        }

    # -- chat -------------------------------------------------------------------------------
    def _chat(self, body: dict) -> None:
        app = self.app
        model = app.check_model(body)
        messages = _messages_ok(body.get("messages"))
        kwargs = body.get("chat_template_kwargs") or {}
        if not isinstance(kwargs, dict):
            raise bad("'chat_template_kwargs' must be an object")
        enable_thinking = kwargs.get("enable_thinking", True)
        if not isinstance(enable_thinking, bool):
            raise bad("chat_template_kwargs.enable_thinking must be a boolean")
        try:
            prompt = app.tok.apply_chat_template(
                messages, add_generation_prompt=True, enable_thinking=enable_thinking
            )
        except Exception as exc:  # the tokenizer's own validation (InputError)
            raise bad(f"invalid messages: {exc}") from None
        prompt_ids = app.tok.encode(prompt)
        want_lp = body.get("logprobs", False)
        if not isinstance(want_lp, bool):
            raise bad("'logprobs' must be a boolean")
        top_n = _num(body, "top_logprobs", int, 0, app.args.max_logprobs)
        if top_n and not want_lp:
            raise bad("when using `top_logprobs`, `logprobs` must be set to true.")
        params = app.params(body, len(prompt_ids), (top_n or 0) if want_lp else None)
        stream = body.get("stream", False)
        opts = body.get("stream_options") or {}
        if not isinstance(stream, bool) or not isinstance(opts, dict):
            raise bad("'stream' must be a boolean and 'stream_options' an object")
        rid = app.request_id("chatcmpl")
        reasoning = app.args.reasoning_parser in REASONING_PARSERS
        result: dict = {}
        steps = app.generate(rid, prompt_ids, params, result)
        if not stream:
            text, lps = [], []
            for st in steps:
                text.append(st.text)
                if want_lp and st.token_id >= 0:
                    lps.append(app.chat_logprob(st))
            full = "".join(text)
            message: dict = {"role": "assistant", "content": full, "tool_calls": []}
            if reasoning:
                r, c = ReasoningSplitter.split(full)
                message = {
                    "role": "assistant",
                    "reasoning_content": r,
                    "content": c,
                    "tool_calls": [],
                }
            self._json(
                200,
                {
                    "id": rid,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": message,
                            "logprobs": {"content": lps} if want_lp else None,
                            "finish_reason": result["finish_reason"],
                            "stop_reason": result["stop_reason"],
                        }
                    ],
                    "usage": self._usage(len(prompt_ids), result["completion_tokens"]),
                    "prompt_logprobs": None,
                },
            )
            return
        created = int(time.time())

        def chunk(delta: dict, finish=None, logprobs=None, stop_reason=None) -> dict:
            choice = {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
            if finish is not None:
                choice["stop_reason"] = stop_reason
            return {
                "id": rid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [choice],
            }

        self._start_stream()
        splitter = ReasoningSplitter() if reasoning else None
        try:
            self._event(chunk({"role": "assistant", "content": ""}))
            for st in steps:
                lp = {"content": [app.chat_logprob(st)]} if want_lp and st.token_id >= 0 else None
                if splitter:
                    r, c = splitter.feed(st.text)
                    delta = {}
                    if r:
                        delta["reasoning_content"] = r
                    if c:
                        delta["content"] = c
                    if not delta and lp is None:
                        continue
                else:
                    if not st.text and lp is None:
                        continue
                    delta = {"content": st.text}
                self._event(chunk(delta, logprobs=lp))
            self._event(
                chunk({}, finish=result["finish_reason"], stop_reason=result["stop_reason"])
            )
            if opts.get("include_usage"):
                usage_chunk = chunk({})
                usage_chunk["choices"] = []
                usage_chunk["usage"] = self._usage(len(prompt_ids), result["completion_tokens"])
                self._event(usage_chunk)
            self._end_stream()
        finally:
            steps.close()

    # -- completions ------------------------------------------------------------------------
    def _completion(self, body: dict) -> None:
        app = self.app
        model = app.check_model(body)
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if isinstance(prompt, str):
            prompt_ids = app.tok.encode(prompt)
        elif isinstance(prompt, list) and prompt and all(isinstance(i, int) for i in prompt):
            vocab = app.tok.vocab_size
            if any(i < 0 or i >= vocab for i in prompt):
                raise bad(f"token ids in 'prompt' must be in [0, {vocab})")
            prompt_ids = list(prompt)
        else:
            raise bad("'prompt' must be a string, a list with one string, or a list of token ids")
        if not prompt_ids:
            raise bad("'prompt' is empty")
        top_n = _num(body, "logprobs", int, 0, app.args.max_logprobs)
        params = app.params(body, len(prompt_ids), top_n)
        stream = body.get("stream", False)
        opts = body.get("stream_options") or {}
        if not isinstance(stream, bool) or not isinstance(opts, dict):
            raise bad("'stream' must be a boolean and 'stream_options' an object")
        rid = app.request_id("cmpl")
        result: dict = {}
        steps = app.generate(rid, prompt_ids, params, result)
        created = int(time.time())

        def lp_block(items: list[Step], offset0: int) -> dict:
            out = {"text_offset": [], "token_logprobs": [], "tokens": [], "top_logprobs": []}
            off = offset0
            for st in items:
                out["text_offset"].append(off)
                out["token_logprobs"].append(float(st.logprob) if st.logprob is not None else None)
                out["tokens"].append(app.token_text(st.token_id))
                out["top_logprobs"].append(
                    {app.token_text(int(t)): float(v) for t, v in (st.top or [])}
                )
                off += len(st.text)
            return out

        if not stream:
            items = [st for st in steps]
            text = "".join(st.text for st in items)
            toks = [st for st in items if st.token_id >= 0]
            self._json(
                200,
                {
                    "id": rid,
                    "object": "text_completion",
                    "created": created,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "text": text,
                            "logprobs": lp_block(toks, 0) if top_n is not None else None,
                            "finish_reason": result["finish_reason"],
                            "stop_reason": result["stop_reason"],
                            "prompt_logprobs": None,
                        }
                    ],
                    "usage": self._usage(len(prompt_ids), result["completion_tokens"]),
                },
            )
            return
        self._start_stream()
        offset = 0
        try:
            for st in steps:
                lp = lp_block([st], offset) if top_n is not None and st.token_id >= 0 else None
                offset += len(st.text)
                if not st.text and lp is None:
                    continue
                choice = {"index": 0, "text": st.text, "logprobs": lp, "finish_reason": None}
                self._event(
                    {
                        "id": rid,
                        "object": "text_completion",
                        "created": created,
                        "model": model,
                        "choices": [choice],
                    }
                )
            final = {
                "index": 0,
                "text": "",
                "logprobs": None,
                "finish_reason": result["finish_reason"],
                "stop_reason": result["stop_reason"],
            }
            self._event(
                {
                    "id": rid,
                    "object": "text_completion",
                    "created": created,
                    "model": model,
                    "choices": [final],
                }
            )
            if opts.get("include_usage"):
                self._event(
                    {
                        "id": rid,
                        "object": "text_completion",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": self._usage(len(prompt_ids), result["completion_tokens"]),
                    }
                )
            self._end_stream()
        finally:
            steps.close()


ROUTES = [
    ("/health", "GET"),
    ("/version", "GET"),
    ("/v1/models", "GET"),
    ("/v1/chat/completions", "POST"),
    ("/v1/completions", "POST"),
    ("/metrics", "GET"),
]


def make_server(dep: Deployment, loaded: LoadedModel) -> tuple[ThreadingHTTPServer, App]:
    """An HTTP server on the socket start-up already bound."""
    app = App(dep, loaded)
    handler = type("BoundHandler", (Handler,), {"app": app})
    server = ThreadingHTTPServer(dep.sock.getsockname()[:2], handler, bind_and_activate=False)
    server.socket.close()
    server.socket = dep.sock
    server.daemon_threads = True
    return server, app


def _stats_loop(app: App, stop: threading.Event, interval: float) -> None:
    while not stop.wait(interval):
        line = app.stats_line()
        if line:
            app.log.info("loggers.py:118", line)


def run_server(dep: Deployment) -> int:
    """Load the model, print the start-up lines and serve until SIGTERM/SIGINT."""
    loaded = LoadedModel(dep.model_dir, dep.quantization)
    server, app = make_server(dep, loaded)
    log = dep.log
    host = dep.args.host or "0.0.0.0"
    port = dep.sock.getsockname()[1]  # the real port when --port 0 asked for any free one
    log.info("api_server.py:1912", M.STARTING_SERVER.format(n=0, host=host, port=port))
    log.info("launcher.py:37", M.AVAILABLE_ROUTES)
    for route, method in ROUTES:
        log.info("launcher.py:46", M.ROUTE.format(path=route, methods=method))
    log.uvicorn(M.UVICORN_STARTED.format(pid=os.getpid()))
    log.uvicorn(M.UVICORN_WAITING)
    log.uvicorn(M.UVICORN_COMPLETE)
    stop = threading.Event()
    interval = float(os.environ.get("ASCEND_SIM_STATS_INTERVAL", "10"))
    if not dep.args.disable_log_stats and interval > 0:
        threading.Thread(target=_stats_loop, args=(app, stop, interval), daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        stop.set()
        # uvicorn's shutdown lines (same format as its start-up lines).
        log.uvicorn("Shutting down")
        log.uvicorn("Waiting for application shutdown.")
        log.uvicorn("Application shutdown complete.")
        log.uvicorn(f"Finished server process [{os.getpid()}]")
        server.server_close()
        loaded.close()
        if dep.hccl_sock:
            dep.hccl_sock.close()
    return 0
