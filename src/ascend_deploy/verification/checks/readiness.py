"""``readiness``: ``/health`` answers 200, then ``/v1/models`` lists the model; retried with
exponential backoff until the timeout (a slow start is normal, minutes for big models);
while it waits it reports what it waits for every ``progress_every_s`` seconds, with the bound.
Records the served model, its ``max_model_len`` and the vLLM version for the later checks."""

from __future__ import annotations

import time

from ..context import CheckResult, Context
from ..http_client import BadResponse, HttpStatus, RequestFailed

NAME = "readiness"


def run(ctx: Context) -> CheckResult:
    check = CheckResult(NAME)
    t0 = time.monotonic()
    deadline = t0 + ctx.opts.ready_timeout
    delay = 0.5
    attempts = 0
    last = "no attempt"
    said = t0 - ctx.opts.progress_every_s  # the first failed try is reported at once
    while True:
        attempts += 1
        left = deadline - time.monotonic()
        try:
            status, _ = ctx.client.get("/health", timeout=max(1.0, min(10.0, left)))
            if status != 200:
                raise HttpStatus(status, "not healthy", "/health")
            models = ctx.client.get_json("/v1/models", timeout=max(1.0, min(10.0, left)))
            if not isinstance(models, dict) or not isinstance(models.get("data"), list):
                raise BadResponse("/v1/models is not an OpenAI model list")
            names = [m.get("id") for m in models["data"] if isinstance(m, dict)]
            if not names:
                raise BadResponse("/v1/models lists no model")
            if ctx.model is None:
                ctx.model = names[0]
            if ctx.model not in names:
                check.ok = False
                check.detail = (
                    f"the service serves {names}, not the expected model {ctx.model!r}; "
                    "fix --model / vllm_service_served_model_name"
                )
                break
            entry = next(
                m for m in models["data"] if isinstance(m, dict) and m.get("id") == ctx.model
            )
            ctx.server.update(
                models=names,
                max_model_len=entry.get("max_model_len"),
                root=entry.get("root"),
            )
            check.ok = True
            check.detail = f"healthy and serving {ctx.model!r} after {attempts} attempt(s)"
            break
        except HttpStatus as exc:
            if exc.status in (401, 403):
                check.ok = False
                check.detail = (
                    f"HTTP {exc.status} from {exc.path} ({exc.message}): the API key is "
                    "missing or wrong; pass the service's key in VLLM_API_KEY or "
                    "--api-key-file (bundle: vllm_service_api_key)"
                )
                break
            last = str(exc)
        except RequestFailed as exc:
            last = str(exc)
        now = time.monotonic()
        if ctx.opts.progress is not None and now - said >= ctx.opts.progress_every_s:
            said = now
            ctx.opts.progress(
                f"waiting for the service to be ready: {last} (try {attempts}, "
                f"{now - t0:.0f} s of {ctx.opts.ready_timeout:.0f} s)"
            )
        if now + 0.05 >= deadline:
            check.ok = False
            check.detail = (
                f"not ready after {ctx.opts.ready_timeout:.0f} s ({attempts} attempts); "
                f"last: {last}"
            )
            break
        time.sleep(min(delay, deadline - now))  # the last try comes at the deadline
        # Backoff up to 10 s; with progress, up to its interval (a line every few seconds).
        delay = min(delay * 2, 10.0 if ctx.opts.progress is None else ctx.opts.progress_every_s)
    check.seconds = time.monotonic() - t0
    check.data["attempts"] = attempts
    if check.ok:
        try:
            version = ctx.client.get_json("/version", timeout=10)
            ctx.server["version"] = version.get("version") if isinstance(version, dict) else None
        except RequestFailed:
            ctx.server["version"] = None
    else:
        ctx.stop = True
    return check
