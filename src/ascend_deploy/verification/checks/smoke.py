"""``smoke``: "What is the capital of France?" at temperature 0 must mention Paris (the
answer of the first request; asked here when that check did not run)."""

from __future__ import annotations

from ..context import SMOKE_PROMPT, CheckResult, Context, smoke_case
from ..responses import excerpt

NAME = "smoke"


def run(ctx: Context) -> CheckResult:
    rec = ctx.smoke_reply if ctx.smoke_reply is not None else ctx.ask(smoke_case())
    check = CheckResult(NAME, seconds=rec.get("seconds", 0.0))
    check.ok = rec["ok"]
    check.detail = f"{SMOKE_PROMPT!r} -> {excerpt(rec.get('answer'), 120)!r}"
    if not rec["ok"]:
        check.detail += f": {'; '.join(rec['why'])}"
    check.data["case"] = rec
    return check
