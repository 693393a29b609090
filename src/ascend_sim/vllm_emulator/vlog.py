"""Log lines in vLLM's format (see messages.py for the format's sources).

vLLM's default handler writes to standard output; uvicorn's lines keep uvicorn's
``INFO:     text`` form. Error text that real vLLM prints as a traceback goes to stderr.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TextIO


class VLog:
    """Writes ``(Proc pid=N) LEVEL MM-DD HH:MM:SS [file.py:line] message`` lines."""

    def __init__(self, process_prefix: bool, out: TextIO | None = None, err: TextIO | None = None):
        self.process_prefix = process_prefix
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.pid = os.getpid()
        self._lock = threading.Lock()

    def _prefix(self, proc: str) -> str:
        return f"({proc} pid={self.pid}) " if self.process_prefix else ""

    def line(self, level: str, loc: str, msg: str, proc: str = "APIServer") -> str:
        stamp = time.strftime("%m-%d %H:%M:%S")
        return f"{self._prefix(proc)}{level} {stamp} [{loc}] {msg}"

    def _write(self, stream: TextIO, text: str) -> None:
        with self._lock:
            stream.write(text + "\n")
            stream.flush()

    def info(self, loc: str, msg: str, proc: str = "APIServer") -> None:
        self._write(self.out, self.line("INFO", loc, msg, proc))

    def warning(self, loc: str, msg: str, proc: str = "APIServer") -> None:
        self._write(self.out, self.line("WARNING", loc, msg, proc))

    def error(self, loc: str, msg: str, proc: str = "APIServer") -> None:
        self._write(self.out, self.line("ERROR", loc, msg, proc))

    def uvicorn(self, msg: str, proc: str = "APIServer") -> None:
        self._write(self.out, f"{self._prefix(proc)}INFO:     {msg}")

    def raw_err(self, text: str) -> None:
        """Traceback-style text (the exception line real vLLM ends with) on stderr."""
        self._write(self.err, text)

    @staticmethod
    def acl_stamp() -> str:
        """The ``2025-03-26-17:01:03`` stamp of ACL/HCCL error lines."""
        return time.strftime("%Y-%m-%d-%H:%M:%S")

    @staticmethod
    def plog_stamp() -> str:
        """The ``2025-03-26-17:01:02.816.428`` stamp of CANN plog lines."""
        now = time.time()
        ms = int(now * 1000) % 1000
        us = int(now * 1_000_000) % 1000
        return time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime(now)) + f".{ms:03d}.{us:03d}"
