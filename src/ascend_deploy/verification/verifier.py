"""Prove a running vLLM(-Ascend) deployment answers correctly before it takes traffic.

The checks run in order, each one a named entry of the report and one module of
``checks/``: ``readiness``, ``first_request``, ``smoke``, ``suite``, ``streaming``,
``concurrency``, ``kv_cache``, ``max_length`` and, with a reference model, ``precision``.
A failed readiness or first request, or a service that stops answering during the suite, ends
the run; the checks that did not run are listed as skipped.

Standard library only; runs on the controller or on the host.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Sequence
from typing import Any

from .checks import DEFAULT_CHECKS
from .context import CheckResult, CheckUnit, Context, Options
from .report import render_human, render_markdown

__all__ = ["Options", "Verifier", "render_human", "render_markdown", "run_verify"]

# Listed as "not run" when an earlier check ended the run (the others are simply absent).
ALWAYS_REPORTED = ("first_request", "suite", "streaming", "concurrency", "max_length")


class Verifier:
    """Runs the selected checks against one endpoint, in order, and builds the report."""

    def __init__(self, opts: Options, checks: Sequence[CheckUnit] = DEFAULT_CHECKS):
        self.ctx = Context(opts)
        self.units = tuple(checks)

    def run(self) -> dict[str, Any]:
        ctx = self.ctx
        started = _dt.datetime.now(_dt.timezone.utc)
        t0 = time.monotonic()
        results: list[CheckResult] = []
        for unit in self.units:
            result = unit.run(ctx)
            if result is not None:
                results.append(result)
            if ctx.stop:
                break
        done = {r.name for r in results}
        results += [
            CheckResult(unit.NAME, None, "not run: an earlier check failed")
            for unit in self.units
            if unit.NAME in ALWAYS_REPORTED and unit.NAME not in done
        ]
        ok = (
            bool(results)
            and all(r.ok is not False for r in results)
            and any(r.name == "smoke" and r.ok for r in results)
        )
        return {
            "ok": ok,
            "url": ctx.client.base,
            "model": ctx.model,
            "suite": ctx.suite_name,
            "started": started.isoformat(timespec="seconds"),
            "seconds": round(time.monotonic() - t0, 3),
            "server": ctx.server,
            "checks": [r.as_dict() for r in results],
            "cases": ctx.cases,
            "performance": ctx.performance,
            "failures": [f"{r.name}: {r.detail}" for r in results if r.ok is False],
        }


def run_verify(opts: Options) -> dict[str, Any]:
    return Verifier(opts).run()
