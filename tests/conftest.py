"""Shared test fixtures and paths."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
SAMPLES = DATA / "samples"  # verbatim real outputs, copied from shared/reference/samples


@pytest.fixture
def samples_dir() -> Path:
    return SAMPLES


def sample(name: str) -> str:
    """The text of one verbatim sample file."""
    return (SAMPLES / name).read_text(encoding="utf-8")
