"""argparse value types shared by the commands: a bad value is a one-line usage error (exit 2)."""

from __future__ import annotations

import argparse


def _whole(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected a number >= {minimum}, got {value}")
    return value


def _above_zero(text: str, unit: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {unit or 'a number'}, got {text!r}") from None
    if not value > 0:
        kind = f"a number of {unit}" if unit else "a number"
        raise argparse.ArgumentTypeError(f"expected {kind} above 0, got {text}")
    return value


def positive_int(text: str) -> int:
    """A whole number >= 1."""
    return _whole(text, 1)


def non_negative_int(text: str) -> int:
    """A whole number >= 0."""
    return _whole(text, 0)


def positive_float(text: str) -> float:
    """A number above 0."""
    return _above_zero(text, "")


def positive_seconds(text: str) -> float:
    """Seconds above 0 (0 or less would report a healthy driver or server as hung)."""
    return _above_zero(text, "seconds")


def add_matrix_argument(parser: argparse.ArgumentParser) -> None:
    """``--matrix FILE``: a site matrix merged over the shipped one (compat, preflight)."""
    parser.add_argument(
        "--matrix",
        metavar="FILE",
        help="site matrix: a JSON file of rows merged over the shipped matrix (a row of the "
        "same vllm_ascend replaces the shipped one, a new release is added)",
    )
