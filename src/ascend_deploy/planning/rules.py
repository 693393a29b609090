"""The serving rules (``data/serve_rules.json``): read once, checked, matched.

The rules are data the caller passes in: the CLI reads the shipped file with ``load_rules``,
the Ansible role reads it on the controller and hands the dict to the module. ``rule_applies``
decides whether a rule's ``when`` holds for one deployment. Standard library only.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache

from ..errors import InputError
from ..resources import data_path
from ..versioning import version_key

RULES_RESOURCE = "data/serve_rules.json"
_REQUIRED = ("hardware", "env", "flags")


def check_rules(rules: object, where: str = "serving rules") -> dict:
    """``rules`` when it has the sections the planner reads, else InputError."""
    if not isinstance(rules, dict) or not all(k in rules for k in _REQUIRED):
        raise InputError(f"{where}: serving rules need 'hardware', 'env' and 'flags'")
    return rules


def load_rules(path: str | None = None) -> dict:
    """The serving rules in ``path`` (default: a copy of the shipped ones)."""
    return _read(path) if path else copy.deepcopy(shipped_rules())


@lru_cache(maxsize=1)
def shipped_rules() -> dict:
    """The shipped rules, read once per process (shared: do not modify)."""
    return _read(data_path("serve_rules.json"), f"ascend_deploy/{RULES_RESOURCE}")


def _read(path: str, where: str | None = None) -> dict:
    where = where or path
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise InputError(f"{where}: cannot read the serving rules ({exc.strerror})") from None
    try:
        rules = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{where}: serving rules are not valid JSON ({exc})") from None
    return check_rules(rules, where)


def rule_applies(when: dict, tp: int, version: tuple | None, hardware: str) -> bool:
    """Whether a rule's ``when`` conditions hold (``version`` is a ``version_key`` or None)."""
    if tp < when.get("tp_min", 1):
        return False
    if "hardware_in" in when and hardware not in when["hardware_in"]:
        return False
    bounds = [k for k in ("version_from", "version_below") if k in when]
    if bounds and version is None:
        return bool(when.get("if_version_unknown", False))
    if "version_from" in when and version < version_key(when["version_from"]):  # type: ignore[operator]
        return False
    return not ("version_below" in when and version >= version_key(when["version_below"]))  # type: ignore[operator]
