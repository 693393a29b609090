"""Names that become paths or container names, and deletes contained in their parent.

Standard library only (shipped to hosts as module_utils). The one copy of the rule used by the
``ascend_names`` module, which the roles and playbooks call before any change to a host.

A service name becomes ``<config_dir>/<name>/`` (removed by undeploy) and the container names
``<name>-<replica>`` and ``<name>-lb``; it is a DNS-label-like word: letters, digits, ``-``, ``_``
and ``.``, starting with a letter or digit, at most 63 characters. So it is never empty, never
``.``/``..``, never holds ``/`` and never starts with ``-`` (read as an option by docker).
"""

from __future__ import annotations

import os
import re
import shutil

from ..errors import InputError

SERVICE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
# A model directory name (<root>/<name>, <root>/<name>-bf16): spaces and non-ASCII letters are
# fine, but never empty, never a path ('/', '.', '..'), no ':' (docker's volume spec separator), no
# control characters, no leading '-' or '.' (staging copies are .<name>.staging), at most 200.
MODEL_NAME_PATTERN = r"^[^\x00-\x1f\x7f/:.-][^\x00-\x1f\x7f/:]{0,199}$"
_PATTERNS = {"service": SERVICE_NAME_PATTERN, "model": MODEL_NAME_PATTERN}
_RULES = {
    "service": "letters, digits, '-', '_', '.', starting with a letter or digit, at most 63"
    " characters; never empty, '..', '/' or a leading '-'",
    "model": "never empty, '..', '/', ':' or control characters, no leading '-' or '.',"
    " at most 200 characters",
}


def check_name(variable: str, value: object, kind: str = "service") -> str:
    """``value`` when it is a safe name of ``kind``; else InputError naming the variable."""
    pattern = _PATTERNS[kind]
    if not isinstance(value, str) or not re.match(pattern, value) or value.endswith("\n"):
        shown = "empty" if value in ("", None) else repr(value)
        raise InputError(
            f"{variable} is {shown}: a {kind} name becomes a directory"
            f"{' and container names' if kind == 'service' else ' and a volume mount'}, so it must "
            f"match {pattern} ({_RULES[kind]}). Fix: set {variable} to a name such as qwen3"
        )
    return value


def contained(parent: str, path: str) -> str:
    """The resolved ``path`` when it lies strictly inside resolved ``parent``, else InputError."""
    if not parent or not path:
        raise InputError(f"refusing to remove {path!r}: parent {parent!r} and path must be set")
    root = os.path.realpath(parent)
    # The entry itself may be a symlink: resolve its directory, keep its own name.
    target = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    if not os.path.basename(path) or os.path.basename(path) in (".", ".."):
        raise InputError(f"refusing to remove {path!r}: it names no entry inside {parent}")
    if root == os.sep or os.path.commonpath([root, target]) != root or target == root:
        raise InputError(
            f"refusing to remove {path!r}: it resolves to {target}, which is not inside {root}. "
            "Fix: check the service name and the config directory variables"
        )
    return target


def remove_contained(parent: str, path: str, check_mode: bool = False) -> bool:
    """Remove ``path`` (file, symlink or tree) after ``contained``; True when it existed."""
    target = contained(parent, path)
    if not os.path.lexists(target):
        return False
    if not check_mode:
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
        else:
            os.unlink(target)
    return True
