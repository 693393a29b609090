"""Stage a model directory atomically: check free space first, copy into a temporary
sibling, switch it into place with renames (as the converter does). Standard library only.

A failed copy leaves the previous model untouched and no partial files: the caller removes
the staging directory (``discard``); ``commit`` only runs once the copy is complete and
verified, and the serving containers keep reading the old inode until they are replaced.
"""

from __future__ import annotations

import os
import secrets
import shutil

from ..errors import CheckFailed, InputError
from .atomic_dir import swap_into_place

STAGING_TAG = ".staging"
OLD_TAG = ".replaced-"


def human(n: int) -> str:
    """``8,044,936,192 bytes (7.49 GiB)``, ``631,574 bytes (616.8 KiB)``."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n:,} bytes ({n / size:.{2 if unit == 'GiB' else 1}f} {unit})"
    return f"{n:,} bytes"


def staging_dir(target: str) -> str:
    """The temporary sibling a copy of ``target`` is made in: ``<parent>/.<name>.staging``."""
    target = os.path.normpath(target)
    if not os.path.isabs(target) or target == "/":
        raise InputError(f"model directory {target!r} must be an absolute path below /")
    return os.path.join(os.path.dirname(target), f".{os.path.basename(target)}{STAGING_TAG}")


def free_space(path: str) -> tuple[str, int]:
    """Free bytes (for this user) on the filesystem ``path`` is or will be on."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    return probe, shutil.disk_usage(probe).free


def check_space(target: str, need: int, replaced: int = 0, host: str = "") -> dict:
    """Fail before any copy when ``need`` bytes do not fit beside ``target``.

    ``replaced`` is what the previous copy holds: it stays until the switch, so it does not
    count as free. Raises CheckFailed naming both figures and the fix.
    """
    if need < 0:
        raise InputError(f"bytes needed must be >= 0, got {need}")
    where, free = free_space(staging_dir(target))
    result = {"path": target, "checked": where, "need_bytes": need, "free_bytes": free}
    if need > free:
        who = f"{host}: " if host else ""
        raise CheckFailed(
            f"{who}staging {target} needs {human(need)}, {human(free)} free on the filesystem "
            f"of {where} (the previous copy, {human(replaced)}, stays until the new one is "
            "complete). Fix: free at least "
            f"{human(need - free)} there, or set model_weights_root to a larger filesystem"
        )
    return result


def discard(target: str) -> bool:
    """Remove the staging directory of ``target`` (a failed or interrupted copy)."""
    tmp = staging_dir(target)
    if os.path.lexists(tmp):
        if os.path.isdir(tmp) and not os.path.islink(tmp):
            shutil.rmtree(tmp)
        else:
            os.unlink(tmp)
        return True
    return False


def commit(target: str) -> None:
    """Switch the complete staging directory into place; the previous copy is removed."""
    tmp = staging_dir(target)
    if not os.path.isdir(tmp):
        raise CheckFailed(f"{tmp} does not exist: nothing staged to switch into {target}")
    old_name = f".{os.path.basename(target)}{OLD_TAG}{secrets.token_hex(4)}"
    swap_into_place(tmp, target, old_name)


def dir_bytes(path: str) -> int:
    """Bytes of the regular files under ``path`` (0 when it does not exist)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if not os.path.islink(os.path.join(root, name)):
                total += st.st_size
    return total
