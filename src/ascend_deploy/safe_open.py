"""Open a file the tool reads only when it is a regular file (standard library only).

A FIFO without a writer would block the read forever, a device never end, a socket cannot be
read: the file is opened without blocking and without becoming the controlling terminal, checked
with ``fstat`` and refused with a message naming it and what to give instead.
"""

from __future__ import annotations

import os
import stat

from .errors import InputError


def open_regular(path: str, what: str, instead: str = "") -> int | None:
    """A read-only descriptor of ``path`` (blocking mode restored); None when it does not exist.

    InputError when it cannot be opened, is a directory or is not a regular file; ``instead``
    is added to the message (what to give instead)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        return None
    except PermissionError:
        raise InputError(f"{path}: permission denied reading the {what}; run as root") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what} ({exc.strerror})") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InputError(f"{path}: is a directory, expected the {what}{instead}")
        if not stat.S_ISREG(mode):
            raise InputError(
                f"{path}: is not a regular file (a FIFO, socket or device), expected the "
                f"{what}{instead}"
            )
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd
