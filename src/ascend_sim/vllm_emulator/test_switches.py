"""TEST-ONLY switches of the emulator, read from the replica's environment; never set in images or
playbooks. (``ASCEND_SIM_TEST_CRASH_ON_REQUEST`` lives next to the request handler, server.py.)

``ASCEND_SIM_TEST_HANG_AT_LOAD=1``: the engine stops before loading the weights and never answers,
the way a replica hangs in a stuck HCCL or storage read: it keeps running, /health never answers,
so a health wait lasts its whole timeout (tests/integration/test_interrupted_transitions.py
interrupts a deploy inside that wait without a race against a replica that exits at once).
"""

from __future__ import annotations

import os
import time

from .vlog import VLog

HANG_AT_LOAD = "ASCEND_SIM_TEST_HANG_AT_LOAD"


def maybe_hang_at_load(log: VLog) -> None:
    """Sleep for ever when ``ASCEND_SIM_TEST_HANG_AT_LOAD`` is set (emulated, not upstream)."""
    if os.environ.get(HANG_AT_LOAD, "") not in ("", "0"):
        log.raw_err(f"{HANG_AT_LOAD} is set: the emulated engine hangs before loading weights")
        while True:
            time.sleep(3600)
