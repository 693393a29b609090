"""The emulator's behaviour table (src/ascend_sim/data/behaviour_sources.json) against its code.

Every message constant, per-release wording, per-release behaviour, memory term, device rule
and start-up refusal the emulator implements has a row; every row has an upstream source (a
URL or a vllm-ascend path@tag) or says it is an assumption; the assumptions are the ones the
docs list.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from dataclasses import fields
from pathlib import Path

import pytest

from ascend_sim.vllm_emulator import device, memory, messages, model_config, startup, versions

REPO = Path(__file__).resolve().parents[4]
TABLE = REPO / "src" / "ascend_sim" / "data" / "behaviour_sources.json"
SIMULATOR_DOC = REPO / "docs" / "reference" / "simulator.md"
TAG = re.compile(r"#\s*behaviour:\s*(check\.\w+)")
URL = re.compile(r"^https://[^\s]+$")
PATH_AT_TAG = re.compile(r"^[\w.-]+(/[\w.-]+)*@(v\d+\.\d+\.\d+(rc\d+)?|main)(:\d+(-\d+)?)?$")

# Names that are the emulator's plumbing (where the sandbox keeps its files, lookups, test
# helpers), not behaviour taken from upstream.
PLUMBING = {
    "message.for_release",
    "release.version_key",
    "release.at_least",
    "release.behaviour_for",
    "release.load_row",
    "memory.MIB",
    "memory.GIB",
    "memory.utilization_for_blocks",
    "device.root",
    "device.path",
    "device.registry_dir",
    "device.STATE_REL",
    "device.DRIVER_VERSION_REL",
    "device.REGISTRY_REL",
    "device.CANN_INFO_GLOBS",
}


def _table() -> dict[str, dict]:
    return json.loads(TABLE.read_text(encoding="utf-8"))["behaviours"]


def _names(module, prefix: str, constants: bool = True) -> set[str]:
    """``prefix.NAME`` for the UPPER_CASE constants (unless ``constants`` is false) and the
    public functions defined in ``module``."""
    out = set()
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        constant = constants and name.isupper() and isinstance(value, (str, int, tuple))
        function = inspect.isfunction(value) and value.__module__ == module.__name__
        if constant or function:
            out.add(f"{prefix}.{name}")
    return out


def _startup_source() -> str:
    return Path(inspect.getsourcefile(startup)).read_text(encoding="utf-8")


def implemented() -> set[str]:
    """Every behaviour key the code defines."""
    keys = _names(messages, "message")
    keys |= {f"wording.{k}" for k in messages.BY_RELEASE}
    keys |= {f"release.{f.name}" for f in fields(versions.Behaviour)}
    keys |= _names(versions, "release", constants=False)
    keys |= _names(memory, "memory") | _names(device, "device")
    keys |= _names(model_config, "model_config")
    keys |= set(TAG.findall(_startup_source()))
    return keys - PLUMBING


def test_every_implemented_behaviour_has_a_row_and_every_row_a_behaviour():
    table, code = set(_table()), implemented()
    assert not code - table, f"behaviours without a row in {TABLE.name}: {sorted(code - table)}"
    assert not table - code, f"rows for nothing the emulator implements: {sorted(table - code)}"


def test_every_refusal_in_startup_is_tagged():
    """Each _fail_api/_fail_engine call carries a '# behaviour: check.*' tag since the previous
    call, so a new refusal cannot be added without a row."""
    src = _startup_source()
    lines = src.splitlines()
    calls = sorted(
        node.lineno
        for node in ast.walk(ast.parse(src))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("_fail_api", "_fail_engine")
    )
    assert len(calls) >= 20
    previous = 0
    for line in calls:
        assert any(TAG.search(t) for t in lines[previous : line - 1]), (
            f"startup.py:{line}: refusal without a '# behaviour: check.<name>' tag"
        )
        previous = line


@pytest.mark.parametrize("key", sorted(_table()))
def test_each_row_has_a_public_source_or_an_assumption(key):
    row = _table()[key]
    assert set(row) <= {"what", "sources", "assumption"}, key
    assert row["what"].strip(), key
    assert row["sources"] or row.get("assumption", "").strip(), f"{key}: no source, no assumption"
    for src in row["sources"]:
        assert URL.match(src) or PATH_AT_TAG.match(src), f"{key}: {src!r} is no URL or path@tag"
        assert "shared/" not in src and not src.startswith("."), f"{key}: {src!r} is a local path"


def test_assumptions_are_listed_in_the_simulator_docs_and_readme_points_there():
    doc = SIMULATOR_DOC.read_text(encoding="utf-8")
    section = doc.split("## What the emulator assumes", 1)
    assert len(section) == 2, "docs/reference/simulator.md lacks '## What the emulator assumes'"
    listed = set(re.findall(r"^- `([\w.]+)`", section[1].split("\n## ", 1)[0], re.M))
    assumed = {k for k, row in _table().items() if row.get("assumption")}
    assert listed == assumed, (
        f"missing: {sorted(assumed - listed)}; not assumptions: {sorted(listed - assumed)}"
    )
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "docs/reference/simulator.md#what-the-emulator-assumes" in readme


def test_per_release_wording_rows_name_releases_in_order():
    for key, entries in messages.BY_RELEASE.items():
        firsts = [versions.version_key(first) for first, _text in entries]
        assert firsts == sorted(firsts) and len(set(firsts)) == len(firsts), key
        assert any(text for _first, text in entries), key
