"""Progress display on stderr: a bar on a terminal, periodic lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _sizes(done: float, total: float) -> tuple[str, str]:
    """Both figures in the unit that suits ``total`` (a small model is not "0.00 GB")."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if total >= size:
            return f"{done / size:.2f} {unit}", f"{total / size:.2f} {unit}"
    return f"{done:.0f} B", f"{total:.0f} B"


class ProgressDisplay:
    """Callable ``(done_bytes, total_bytes)``; never writes to stdout."""

    def __init__(
        self,
        stream: TextIO | None = None,
        tty: bool | None = None,
        interval: float = 10.0,
        label: str = "convert",
    ) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.interval = interval if not self.tty else 0.2
        self.label = label
        self.started = time.monotonic()
        self.last = 0.0
        self.finished = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        complete = total > 0 and done >= total
        if self.finished or (now - self.last < self.interval and not complete):
            return
        self.last = now
        elapsed = max(now - self.started, 1e-6)
        rate = done / elapsed
        frac = done / total if total else 1.0
        eta = (total - done) / rate if rate > 0 else 0.0
        shown_done, shown_total = _sizes(done, total)
        if self.tty:
            width = 30
            filled = int(width * frac)
            bar = "#" * filled + "." * (width - filled)
            self.stream.write(
                f"\r{self.label} [{bar}] {frac * 100:5.1f}% {shown_done}/{shown_total} "
                f"{rate / 1e6:6.0f} MB/s ETA {eta:4.0f}s"
            )
            if complete:
                self.stream.write("\n")
        else:
            self.stream.write(
                f"{self.label}: {frac * 100:.0f}% ({shown_done} of {shown_total}, "
                f"{rate / 1e6:.0f} MB/s, {elapsed:.0f}s elapsed)\n"
            )
        self.stream.flush()
        self.finished = complete
