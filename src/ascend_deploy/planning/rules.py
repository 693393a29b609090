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


def rule_applies(
    when: dict, tp: int, version: tuple | None, hardware: str, model_type: str | None = None
) -> bool:
    """Whether a rule's ``when`` conditions hold (``version`` is a ``version_key`` or None;
    ``model_type_in`` holds only for a model whose config.json model_type is listed)."""
    if tp < when.get("tp_min", 1):
        return False
    if "hardware_in" in when and hardware not in when["hardware_in"]:
        return False
    if "model_type_in" in when and model_type not in when["model_type_in"]:
        return False
    bounds = [k for k in ("version_from", "version_below") if k in when]
    if bounds and version is None:
        return bool(when.get("if_version_unknown", False))
    if "version_from" in when and version < version_key(when["version_from"]):  # type: ignore[operator]
        return False
    return not ("version_below" in when and version >= version_key(when["version_below"]))  # type: ignore[operator]


BLOCK_FP8_OUTCOMES = ("refused", "load_error", "native")


def block_fp8_rule(rules: dict, vllm_ascend: str | None) -> dict | None:
    """The ``block_fp8`` entry whose tag range (``from``..``to``, inclusive) holds
    ``vllm_ascend``; None for an unknown release or one no entry covers."""
    if vllm_ascend is None:
        return None
    try:
        version = version_key(str(vllm_ascend).strip())
    except ValueError:
        raise InputError(
            f"vllm-ascend version {vllm_ascend!r} is not a version like v0.13.0 or v0.14.0rc1"
        ) from None
    section = rules.get("block_fp8") or {}
    for entry in section.get("releases") or []:
        if not isinstance(entry, dict) or entry.get("outcome") not in BLOCK_FP8_OUTCOMES:
            raise InputError(
                f"serving rules: block_fp8 entry {entry!r} needs an outcome in "
                f"{', '.join(BLOCK_FP8_OUTCOMES)}"
            )
        try:
            low, high = version_key(entry["from"]), version_key(entry["to"])
        except (KeyError, TypeError, ValueError):
            raise InputError(
                f"serving rules: block_fp8 entry {entry!r} needs 'from' and 'to' release tags"
            ) from None
        if low <= version <= high:
            return entry
    return None


def modelslim_autodetected(rules: dict, vllm_ascend: str | None) -> bool | None:
    """Whether the release detects a ModelSlim checkpoint without ``--quantization ascend``.

    From the ``--quantization ascend`` flag rule: ``auto_detected_in`` (single releases) or at
    least ``auto_detected_from``; None when the release is unknown.
    """
    if vllm_ascend is None:
        return None
    rule = rules["flags"]["--quantization ascend"]
    if vllm_ascend in rule.get("auto_detected_in", []):
        return True
    return version_key(vllm_ascend) >= version_key(rule["auto_detected_from"])


def block_fp8_native(rules: dict, hw: dict, vllm_ascend: str | None) -> tuple[bool, str]:
    """Whether the release serves a block-FP8 checkpoint as it is on ``hw``, and why not.

    True only where the hardware computes FP8 and the release's ``block_fp8`` entry says
    ``native``; the reason names the release's outcome (its error) or the missing rule.
    """
    if not hw.get("fp8_native"):
        return False, f"{hw['name']} has no FP8 compute"
    rule = block_fp8_rule(rules, vllm_ascend)
    if rule is not None and rule["outcome"] == "native":
        return True, ""
    if vllm_ascend is None:
        return False, (
            f"vllm-ascend release unknown, and no tagged release up to the last the rules know "
            f"serves generic block-FP8 on {hw['name']}"
        )
    if rule is None:
        return False, (
            f"no block_fp8 rule covers vllm-ascend {vllm_ascend}: whether it serves generic "
            f"block-FP8 on {hw['name']} is not known"
        )
    what = "refuses" if rule["outcome"] == "refused" else "fails to load"
    return False, (
        f"vllm-ascend {vllm_ascend} {what} a generic block-FP8 checkpoint on every device "
        f"({rule['error'].replace('{config_class}', '<config class>')}; "
        f"{rule['from']}-{rule['to']}: {rule['source']})"
    )
