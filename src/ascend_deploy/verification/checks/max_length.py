"""``max_length``: a request that fills the served ``max_model_len`` is served, and that
length is the planned one. The prompt is sized from two probes of the filler's token count."""

from __future__ import annotations

import math
import time
from typing import Any

from ..context import CheckResult, Context
from ..http_client import BadResponse, Disconnected, HttpStatus, RequestFailed, Timeout, Unreachable

NAME = "max_length"
# Filler of the long prompts: the sentence the tiny model was trained with.
FILLER = "This sentence is filler text that makes the prompt longer. "


def _body(ctx: Context, repeat: int, max_tokens: int) -> dict[str, Any]:
    return {
        "model": ctx.model,
        "messages": [{"role": "user", "content": FILLER * repeat + "\n\nReply with OK."}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "chat_template_kwargs": {"enable_thinking": False},
    }


def _prompt_tokens(ctx: Context, repeat: int) -> int:
    doc = ctx.client.post_json("/v1/chat/completions", _body(ctx, repeat, 1))
    return int(doc["usage"]["prompt_tokens"])


def run(ctx: Context) -> CheckResult:
    check = CheckResult(NAME)
    served = ctx.server.get("max_model_len")
    planned = ctx.opts.expect_max_model_len
    if planned and served and int(served) != planned:
        check.ok = False
        check.detail = (
            f"the service runs with max_model_len {served}, the plan says {planned}: it was "
            "started with other arguments than planned"
        )
        return check
    limit = int(served or planned or 0)
    if not ctx.opts.max_len_probe or limit <= 0:
        check.detail = "skipped (" + ("disabled" if limit else "max_model_len unknown") + ")"
        return check
    t0 = time.monotonic()
    out_tokens = 8
    try:
        p1, p5 = _prompt_tokens(ctx, 1), _prompt_tokens(ctx, 5)
        per = (p5 - p1) / 4
        if per < 1:
            # Four more sentences of filler are at least four tokens for any tokenizer: counts
            # that do not grow are not counts, and sizing from them asks for an unbounded prompt.
            raise BadResponse(
                f"usage.prompt_tokens is {p1} for one sentence of filler and {p5} for five: the "
                "server's token counts do not follow the prompt, so no prompt can be sized to "
                "max_model_len"
            )
        base = p1 - per
        # at least one token per sentence: never more sentences than the limit has tokens
        repeat = min(limit, max(1, int((limit - out_tokens - base) // per)))
        used = None
        for _ in range(4):
            try:
                doc = ctx.client.post_json("/v1/chat/completions", _body(ctx, repeat, out_tokens))
            except HttpStatus as exc:
                if exc.status == 400 and "context length" in exc.message:
                    repeat -= max(1, math.ceil(2 / per))
                    continue
                raise
            used = doc["usage"]
            break
        if used is None:
            raise BadResponse("could not size a prompt that fits max_model_len")
        total = used["prompt_tokens"] + used.get("completion_tokens", 0)
        check.ok = True
        check.detail = (
            f"a {used['prompt_tokens']}-token prompt (+{out_tokens} output) fits the "
            f"max_model_len of {limit} and was served"
        )
        check.data.update(prompt_tokens=used["prompt_tokens"], max_model_len=limit, total=total)
    except (Disconnected, Unreachable, Timeout) as exc:
        check.ok = False
        check.detail = (
            f"a request at the maximum length ({limit} tokens) failed: {exc}; {ctx.alive()}"
        )
    except (RequestFailed, KeyError, TypeError, ValueError) as exc:
        check.ok = False
        check.detail = f"a request at the maximum length ({limit} tokens) failed: {exc}"
    check.seconds = time.monotonic() - t0
    return check
