"""Reading standard input without a silent wait: on a terminal, say what is awaited.

A command given ``-`` (or no file) reads its input from stdin; typed on a terminal with
nothing piped in, it would otherwise just wait. Standard library only.
"""

from __future__ import annotations

import sys


def read_stdin(what: str, limit: int | None = None) -> bytes:
    """Up to ``limit`` bytes of stdin (all when None); on a terminal, first one line on stderr
    naming ``what`` and how to end or avoid the input."""
    stream = sys.stdin
    if stream is None:
        return b""
    if stream.isatty():
        print(
            f"reading {what} from standard input (end it with Ctrl-D, or pass a FILE)",
            file=sys.stderr,
            flush=True,
        )
    buffer = stream.buffer
    return buffer.read() if limit is None else buffer.read(limit)
