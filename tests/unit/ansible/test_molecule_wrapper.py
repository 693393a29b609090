"""The molecule wrapper turns a scenario green only when its verifier asserted something."""

from __future__ import annotations

import importlib.util
import re

import pytest
from conftest import REPO

WRAPPER = REPO / "tests" / "integration" / "test_molecule.py"
spec = importlib.util.spec_from_file_location("molecule_wrapper", WRAPPER)
wrapper = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wrapper)

PASSED = """INFO     Running default > verify
============================= test session starts ==============================
collected 20 items
tests/test_x.py ..........ss
======================== 18 passed, 2 skipped in 12.34s ========================
INFO     Verifier completed successfully.
"""
# As molecule prints it (frame, colours, the rule wrapped onto the next line).
FRAMED = (
    "  \x1b[2m\u2502\x1b[0m ============================== 20 passed in 4.15s\n"
    "  \x1b[2m\u2502\x1b[0m   ==============================\n"
)


def test_a_run_with_passed_tests_is_green():
    wrapper.assert_verified(PASSED, "default")
    wrapper.assert_verified(FRAMED, "sim")


@pytest.mark.parametrize(
    "log, why",
    [
        ("INFO Verifier completed successfully.\n", "no verifier (pytest) summary"),
        ("============ 20 skipped in 1.02s ============\n", "no test passed"),
        ("======= 1 failed, 3 passed in 1.0s =======\n", "1 failed, 3 passed"),
        ("==== 3 passed, 1 error in 2.0s ====\n", "1 error"),
    ],
)
def test_runs_without_assertions_or_with_failures_are_red(log, why):
    with pytest.raises(AssertionError, match=re.escape(why)):
        wrapper.assert_verified(log, "x")
