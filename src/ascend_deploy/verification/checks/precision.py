"""``precision`` (only with a reference model): served top-5 logprobs and their KL divergence
against a CPU reference, within tolerances derived from BF16 rounding
(``verification.precision``)."""

from __future__ import annotations

import time

from ..context import CheckResult, Context
from ..http_client import RequestFailed

NAME = "precision"


def run(ctx: Context) -> CheckResult | None:
    if not ctx.opts.reference_model:
        return None
    from ..precision import compare_logprobs

    t0 = time.monotonic()
    check = CheckResult(NAME)
    try:
        res = compare_logprobs(
            ctx.client, ctx.model, ctx.opts.reference_model, ctx.opts.precision_tolerance
        )
    except ImportError as exc:
        check.detail = f"skipped: the CPU reference needs torch and transformers ({exc})"
        return check
    except RequestFailed as exc:
        check.ok = False
        check.detail = f"precision requests failed: {exc}"
        return check
    check.seconds = time.monotonic() - t0
    check.ok = res["ok"]
    check.detail = (
        f"top-5 logprobs over {res['prompts']} prompts: largest difference "
        f"{res['max_abs_diff']:.4f} (tolerance {res['lp_tolerance']:.4f}), largest KL "
        f"{res['max_kl']:.2e} (tolerance {res['kl_tolerance']:.2e}); top-1 agrees on "
        f"{res['top1_agree']}/{res['prompts']}"
        + (f"; outside on: {'; '.join(res['failed_prompts'])}" if res["failed_prompts"] else "")
    )
    check.data["precision"] = res
    return check
