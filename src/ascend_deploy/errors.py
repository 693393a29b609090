"""Exceptions whose messages are written for operators.

The CLI prints them as one line and maps them to exit codes; Ansible modules turn
them into ``fail_json(msg=...)``.
"""

from __future__ import annotations


class AscendDeployError(Exception):
    """Base class: the message is complete and names the value and the fix."""

    exit_code = 1


class InputError(AscendDeployError):
    """Bad input: missing, empty, truncated, binary or malformed files and arguments."""

    exit_code = 2


class CheckFailed(AscendDeployError):
    """A check ran and the answer is no (incompatible versions, plan not feasible, ...)."""

    exit_code = 1


def describe_path(path: object) -> str:
    """Render a path (or ``-`` for standard input) for an error message."""
    text = str(path)
    return "standard input" if text == "-" else text


def shown(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for quoting input in a message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
