"""One module per check of ``ascend-deploy verify``, each ``NAME`` and ``run(ctx)`` returning a
``CheckResult`` (or None when it does not apply). ``DEFAULT_CHECKS`` is the order they run in."""

from __future__ import annotations

from ..context import CheckUnit
from . import (
    concurrency,
    first_request,
    kv_cache,
    max_length,
    precision,
    readiness,
    smoke,
    streaming,
    suite,
)

DEFAULT_CHECKS: tuple[CheckUnit, ...] = (
    readiness,
    first_request,
    smoke,
    suite,
    streaming,
    concurrency,
    kv_cache,
    max_length,
    precision,
)
