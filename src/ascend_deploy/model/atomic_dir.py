"""Switch a complete directory into place with renames (the converter and model staging)."""

from __future__ import annotations

import os
import shutil


def fsync_dir(path: str) -> None:
    """Make a directory's entries (renames, new files) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def swap_into_place(tmp: str, dst: str, old_name: str) -> None:
    """Rename ``tmp`` to ``dst``; a previous ``dst`` is first renamed to the sibling ``old_name``
    and removed once the new copy is in place, so readers see the old or the new copy, never a mix.
    """
    parent = os.path.dirname(dst)
    old = None
    if os.path.lexists(dst):
        old = os.path.join(parent, old_name)
        os.rename(dst, old)
    os.rename(tmp, dst)
    fsync_dir(parent)
    if old is not None:
        if os.path.isdir(old) and not os.path.islink(old):
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.unlink(old)
