"""Role variables checked against their argument spec, before any host changes (stdlib only).

One copy of the rule the first play of deploy.yml, undeploy.yml and verify.yml applies (action
plugin ``ascend_role_vars``): every variable a role documents in ``meta/argument_specs.yml`` is
converted as Ansible's argument spec would (type, ``elements``, ``choices``), then held to the
bounds of the role's ``meta/value_bounds.yml`` sidecar, the ranges an argument spec cannot say:

``min`` / ``max``
    Inclusive bounds of a number (of every element of a list).
``above``
    Exclusive lower bound (``above: 0`` is "positive" for a float such as a fraction).
``pattern``
    A regular expression a string (every element of a list) must match in full.
``fix``
    The fix the message offers (default: a value inside the bounds).

``null`` is always accepted: the bundle's optional numbers default to null ("not set").
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping

from ..errors import InputError, shown

BOUND_KEYS = frozenset({"min", "max", "above", "pattern", "fix"})
TYPES = frozenset({"str", "path", "raw", "int", "float", "bool", "list", "dict"})
_TRUE = frozenset({"y", "yes", "on", "1", "true", "t"})
_FALSE = frozenset({"n", "no", "off", "0", "false", "f"})
_INT = re.compile(r"[+-]?[0-9]+")


class Invalid(ValueError):
    """One value that does not fit its option; the text says what it must be."""


def _to_int(value: object) -> int:
    if isinstance(value, bool):
        raise Invalid("a whole number, not true/false")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INT.fullmatch(value.strip()):
        return int(value.strip())
    raise Invalid("a whole number")


def _to_float(value: object) -> float:
    if isinstance(value, bool):
        raise Invalid("a number, not true/false")
    try:
        number = float(value) if isinstance(value, (int, float, str)) else math.nan
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise Invalid("a finite number")
    return number


def _to_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if isinstance(value, (str, int)) else None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise Invalid("true or false")


def _to_str(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise Invalid("a string")


def _to_list(value: object) -> list:
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):  # Ansible splits a string on commas
        return [] if value == "" else value.split(",")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [str(value)]
    raise Invalid("a list")


def _to_dict(value: object) -> dict:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            loaded = json.loads(value)
        except ValueError:
            loaded = None
        if isinstance(loaded, dict):
            return loaded
    raise Invalid("a mapping (a YAML dict, or JSON {...} with -e)")


_CONVERT = {
    "str": _to_str,
    "path": _to_str,
    "raw": lambda v: v,
    "int": _to_int,
    "float": _to_float,
    "bool": _to_bool,
    "list": _to_list,
    "dict": _to_dict,
}


def _range_text(low: object, high: object, above: object) -> str:
    """The bounds in words: from 1 to 65535, >= 1, more than 0 and at most 1."""
    if above is not None:
        return f"more than {above}" + (f" and at most {high}" if high is not None else "")
    if low is not None and high is not None:
        return f"from {low} to {high}"
    return f">= {low}" if low is not None else f"<= {high}"


def _scalar(kind: str, option: Mapping, bounds: Mapping, value: object) -> object:
    """``value`` converted to ``kind`` and held to ``choices`` and ``bounds``."""
    converted = _CONVERT[kind](value)
    choices = option.get("choices")
    if choices is not None and converted not in choices:
        raise Invalid("one of " + ", ".join(str(c) for c in choices))
    if isinstance(converted, (int, float)) and not isinstance(converted, bool):
        low, high, above = bounds.get("min"), bounds.get("max"), bounds.get("above")
        if (
            (low is not None and converted < low)
            or (high is not None and converted > high)
            or (above is not None and converted <= above)
        ):
            raise Invalid(_range_text(low, high, above))
    pattern = bounds.get("pattern")
    if pattern is not None and isinstance(converted, str) and not re.fullmatch(pattern, converted):
        raise Invalid(f"a string matching {pattern}")
    return converted


def convert(option: Mapping, bounds: Mapping, value: object) -> object:
    """``value`` as the role will see it; Invalid names what it must be."""
    if value is None:
        return None
    kind = option.get("type", "str")
    if kind not in TYPES:
        raise InputError(f"argument spec type {kind!r} is not one of {', '.join(sorted(TYPES))}")
    if kind != "list":
        return _scalar(kind, option, bounds, value)
    items = _to_list(value)
    element = {"type": option.get("elements", "raw"), "choices": option.get("choices")}
    out = []
    for index, item in enumerate(items):
        try:
            out.append(_scalar(element["type"], element, bounds, item))
        except Invalid as exc:
            raise Invalid(
                f"a list whose every element is {exc} (element {index} is {shown(item)})"
            ) from None
    return out


def _quote(value: object) -> str:
    """A value as the operator wrote it; repr when it is empty or holds unprintable characters."""
    if isinstance(value, str) and value and value.isprintable() and value.strip() == value:
        return value if len(value) <= 80 else value[:77] + "..."
    return shown(value)


def check_bounds(options: Mapping, bounds: Mapping, where: str) -> None:
    """InputError unless every sidecar entry names an option of the spec with known keys."""
    for name, entry in bounds.items():
        if name not in options:
            raise InputError(f"{where}: {name} is not an option of the role's argument spec")
        if not isinstance(entry, Mapping) or not set(entry) <= BOUND_KEYS:
            raise InputError(f"{where}: {name} takes only {', '.join(sorted(BOUND_KEYS))}")


def check_values(
    options: Mapping, bounds: Mapping, values: Mapping, fix_hint: str = ""
) -> list[str]:
    """One operator message per value of ``values`` that does not fit its option.

    ``options`` is the ``options`` mapping of an argument spec entry point, ``bounds`` the
    role's sidecar, ``values`` the variables set (only those are checked). A value of an option
    with ``no_log`` is never quoted.
    """
    problems = []
    for name in sorted(values):
        option = options.get(name)
        if option is None:
            continue
        entry = bounds.get(name, {})
        value = values[name]
        try:
            convert(option, entry, value)
        except Invalid as exc:
            quoted = "(hidden: no_log)" if option.get("no_log") else _quote(value)
            what = str(option.get("description", "")).strip().split("\n")[0]
            fix = entry.get("fix") or f"give {exc}, or leave it unset for the role's default"
            problems.append(
                f"{name} is {quoted}: it must be {exc}"
                + (f" ({what if len(what) <= 120 else what[:117] + '...'})" if what else "")
                + f". Fix: {fix}{fix_hint}"
            )
    return problems
