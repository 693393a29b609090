"""``suite``: every case of the suite (keywords on the answer with the Qwen3 thinking block
removed; thinking present when asked), each answer checked for garbage (pitfall 7). A service
that stops answering ends the run: the remaining cases would only repeat that."""

from __future__ import annotations

import time

from ..context import GONE, CheckResult, Context

NAME = "suite"


def run(ctx: Context) -> CheckResult:
    t0 = time.monotonic()
    for case in ctx.suite:
        rec = ctx.ask(case)
        ctx.cases.append(rec)
        if rec.get("error_type") in GONE:
            ctx.stop = True  # the service is gone or stalled
            break
    failed = [c for c in ctx.cases if not c["ok"]]
    check = CheckResult(NAME, seconds=time.monotonic() - t0)
    check.ok = not failed and len(ctx.cases) == len(ctx.suite)
    check.detail = f"{len(ctx.cases) - len(failed)}/{len(ctx.suite)} cases passed"
    if failed:
        check.detail += "; failed: " + "; ".join(
            f"{c['id']} ({'; '.join(c['why'])[:200]})" for c in failed[:5]
        )
    if len(ctx.cases) < len(ctx.suite):
        check.detail += "; the service stopped answering (in time); the rest was not run"
    check.data["suite"] = ctx.suite_name
    return check
