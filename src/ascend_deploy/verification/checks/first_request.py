"""``first_request``: one real request (the smoke question), since a ready service can still
die on its first one (graph capture of a new shape, a kernel fault: the log then explains
it). Its answer is kept for the ``smoke`` check."""

from __future__ import annotations

from ..context import CheckResult, Context, smoke_case

NAME = "first_request"


def run(ctx: Context) -> CheckResult:
    rec = ctx.ask(smoke_case())
    check = CheckResult(NAME, seconds=rec.get("seconds", 0.0))
    if rec.get("error_type") in ("Disconnected", "Unreachable", "Timeout", "BadResponse"):
        check.ok = False
        check.detail = (
            f"the service was ready but failed its first request: {rec['why'][0]}; "
            f"{ctx.alive()}. Read the container log (ascend-deploy diagnose)"
        )
    elif rec.get("error_type") == "HttpStatus":
        check.ok = False
        check.detail = f"the first request was refused: {rec['why'][0]}"
    else:
        check.ok = True
        check.detail = f"answered in {rec['seconds']:.2f} s"
        ctx.smoke_reply = rec
    ctx.stop = not check.ok
    return check
