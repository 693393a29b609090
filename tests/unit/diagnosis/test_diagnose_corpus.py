"""Top-1 accuracy of `ascend-deploy diagnose` on real logs copied from public issue threads.

Corpus: ``tests/data/diagnose/real/*.log`` (see its README.md). Each file starts with
``# source: URL``, ``# label: L`` (pitfall 1-8, a neighbour rule id, or ``none``) and
``# split: tune|holdout``; the split is fixed by a hash of the file name, so rules are
written on the tune split and only measured on the holdout split.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass

import pytest
from conftest import DATA

from ascend_deploy.diagnosis.engine import diagnose_lines, load_rules

CORPUS = DATA / "diagnose" / "real"
TARGET = 0.90
HEADER = ("source", "label", "split")


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    label: str
    split: str
    body: list[str]


def split_of(name: str) -> str:
    """The split a file belongs to: a quarter of the names (by SHA-256) are held out."""
    return "holdout" if hashlib.sha256(name.encode()).digest()[0] % 4 == 0 else "tune"


def load_case(path) -> Case:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    meta = {}
    for key, line in zip(HEADER, lines[:3], strict=False):
        prefix = f"# {key}:"
        assert line.startswith(prefix), f"{path.name}: line for {key!r} must start with {prefix!r}"
        meta[key] = line[len(prefix) :].strip()
    return Case(path.name, meta["source"], meta["label"], meta["split"], lines[3:])


CASES = [load_case(p) for p in sorted(CORPUS.glob("*.log"))]
RULE_IDS = {r.id for r in load_rules()}


def predicted(result: dict) -> str:
    """Class of the best finding: its pitfall, else its rule id; ``none`` without findings."""
    findings = result.get("findings") or []
    if not findings:
        return "none"
    top = findings[0]
    return str(top["pitfall"]) if top.get("pitfall") is not None else str(top["rule"])


@pytest.fixture(scope="module")
def outcomes() -> dict[str, tuple[Case, dict]]:
    return {c.name: (c, diagnose_lines(c.body)) for c in CASES}


def test_corpus_shape():
    """At least 100 excerpts with provenance; every pitfall has at least 8; some healthy logs."""
    assert len(CASES) >= 100
    labels = Counter(c.label for c in CASES)
    for pitfall in range(1, 9):
        assert labels[str(pitfall)] >= 8, f"pitfall {pitfall}: only {labels[str(pitfall)]} examples"
    assert labels["none"] >= 5
    for c in CASES:
        assert c.source.startswith("https://"), f"{c.name}: source must be a public URL"
        assert c.label in {str(i) for i in range(1, 9)} | {"none"} | RULE_IDS, (
            f"{c.name}: label {c.label!r} is no pitfall, rule id or none"
        )
        assert c.split == split_of(c.name), f"{c.name}: split is {split_of(c.name)} by its name"
        assert any(line.strip() for line in c.body), f"{c.name}: no log text"


def test_failures_never_get_an_empty_answer(outcomes):
    empty = [n for n, (c, r) in outcomes.items() if c.label != "none" and not r.get("findings")]
    assert not empty, f"labelled failures with no finding: {empty}"


def test_healthy_logs_get_no_failure(outcomes):
    invented = {
        n: predicted(r) for n, (c, r) in outcomes.items() if c.label == "none" and r.get("findings")
    }
    assert not invented, f"findings on logs that show no failure: {invented}"


def test_top1_accuracy_per_split(outcomes, capsys):
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    misses: list[str] = []
    for name, (case, result) in outcomes.items():
        guess = predicted(result)
        ok = guess == case.label
        for key in (case.split, f"{case.split} label {case.label}"):
            per[key][0] += ok
            per[key][1] += 1
        if not ok:
            misses.append(f"  {case.split:7} {case.label:>24} -> {guess:<24} {name}")
    report = ["diagnose corpus top-1 accuracy:"]
    report += [f"  {k:40} {v[0]:3}/{v[1]:<3} {v[0] / v[1]:6.1%}" for k, v in sorted(per.items())]
    report += ["misses:", *misses] if misses else []
    with capsys.disabled():
        print("\n" + "\n".join(report))
    for split in ("tune", "holdout"):
        right, total = per[split]
        assert total and right / total >= TARGET, f"{split}: {right}/{total} below {TARGET:.0%}"
