"""The repository stands alone, and the test tree keeps the shape tests/conftest.py relies on."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter

import pytest
from conftest import REPO

# Research notes kept outside the repository; the project cites public sources instead
# (docs/sources.md). Spelled in pieces so that this file does not match itself.
OUTSIDE = re.compile("|".join(["shared/" + "reference", "/work/" + "shared"]))
NOTES = re.compile(
    r"\b(?:"
    + "|".join(["ascend-host", "error-signatures", "peers", "ansible-style", "fp8", "vllm-ascend"])
    + r")\.md\b"
)


def tracked_files() -> list[str]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs a git checkout")
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout
    return [p for p in out.decode().split("\0") if p]


def test_no_tracked_file_cites_paths_outside_the_repository():
    offenders = []
    for rel in tracked_files():
        path = REPO / rel
        if not path.is_file():
            continue  # deleted in the working tree
        text = path.read_bytes().decode("utf-8", "replace")
        for n, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line) or NOTES.search(line):
                offenders.append(f"{rel}:{n}: {line.strip()[:120]}")
    assert not offenders, "cite a public URL or docs/sources.md instead:\n" + "\n".join(offenders)


TEST_PATH = re.compile(r"tests/(?:unit|integration)/[\w/]*test_[\w*]*\.py")


def test_every_test_file_named_in_the_repository_exists():
    """Docs, comments and scripts that name a test file follow it when tests move."""
    missing = []
    for rel in tracked_files():
        path = REPO / rel
        if not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        for name in sorted(set(TEST_PATH.findall(text))):
            if not list(REPO.glob(name)):
                missing.append(f"{rel}: {name}")
    assert not missing, "\n".join(missing)


def test_test_module_basenames_are_unique():
    """No __init__.py in tests/: pytest imports each test module by its basename."""
    names = Counter(p.name for p in (REPO / "tests").rglob("test_*.py"))
    assert not [n for n, c in names.items() if c > 1]
    assert not list((REPO / "tests").rglob("__init__.py"))


def test_one_conftest():
    """A second conftest.py would shadow tests/conftest.py for ``from conftest import ...``."""
    found = sorted(str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("conftest.py"))
    assert found == ["tests/conftest.py"], "put shared fixtures in tests/conftest.py"
