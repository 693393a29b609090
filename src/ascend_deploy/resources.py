"""Where the package's data files are (matrix, serving and diagnosis rules, verification suite)."""

from __future__ import annotations

import os

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def data_path(name: str) -> str:
    """The path of ``data/<name>`` inside the installed package."""
    return os.path.join(DATA_DIR, name)
