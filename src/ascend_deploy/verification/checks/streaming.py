"""``streaming``: the smoke question as SSE; the chunks end with ``data: [DONE]`` and the
answer passes the smoke expectation and the garbage checks."""

from __future__ import annotations

from .. import garbage
from ..context import CheckResult, Context, smoke_case
from ..responses import excerpt

NAME = "streaming"


def run(ctx: Context) -> CheckResult:
    case = smoke_case("stream", kind="")
    res = ctx.stream_one(ctx.chat_body(case, logprobs=False))
    check = CheckResult(NAME, seconds=res.get("seconds", 0.0))
    if not res["ok"]:
        check.ok = False
        check.detail = res["error"]
        return check
    why = case.check(res["answer"]) + garbage.detect(res["raw_answer"], res["reasoning"])
    check.ok = not why
    check.detail = (
        f"{res['chunks']} chunks ending with [DONE], first token after {res['ttft_s'] or 0:.3f} s"
    )
    if not check.ok:
        check.detail += f"; answer {excerpt(res['answer'], 120)!r}: {'; '.join(why)}"
    check.data["ttft_s"] = res["ttft_s"]
    return check
