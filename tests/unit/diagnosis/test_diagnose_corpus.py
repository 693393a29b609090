"""Top-1 accuracy of `ascend-deploy diagnose` on real logs copied from public threads.

Corpus: ``tests/data/diagnose/real/*.log`` (see its README.md) and the sealed holdout
``tests/data/diagnose/sealed.tar.gz``, loaded by ``tools/diagnose_corpus.py`` (one copy of the
format and of the splits for the tests, the training script and the evaluation).

Honest figures come from held-out logs: the learned stage is retrained without the held-out side
(by source thread, by whole repository, the newest threads) and the engine is run on it; the
sealed holdout (never read while writing rules, never trained on) is measured with the shipped
model and only its aggregate figures are printed.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections import Counter, defaultdict

import pytest
from conftest import REPO

from ascend_deploy.diagnosis.engine import diagnose_lines, load_rules
from ascend_deploy.diagnosis.learned import default_model


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


dc = _tool("diagnose_corpus")
ev = _tool("eval_diagnose")

TARGET = 0.90
CASES = dc.open_cases()
SEALED = dc.sealed_cases()
RULE_IDS = {r.id for r in load_rules()}
CLASSES = {str(i) for i in range(1, 9)} | {"none"} | RULE_IDS


@pytest.fixture(scope="module")
def outcomes() -> dict[str, tuple[object, dict]]:
    return {c.name: (c, diagnose_lines(c.body)) for c in CASES}


def test_corpus_shape():
    """400+ excerpts with provenance from many places; every pitfall and the new classes have
    examples; healthy logs (start-ups that talk about memory) are there too."""
    assert len(CASES) + len(SEALED) >= 400
    labels = Counter(c.label for c in CASES)
    for pitfall in range(1, 9):
        assert labels[str(pitfall)] >= 8, f"pitfall {pitfall}: only {labels[str(pitfall)]} examples"
    for neighbour in (
        "broken_install",
        "npu_forked_subprocess",
        "dtype_unsupported_soc",
        "model_download_failed",
        "hccl_timeout",
    ):
        assert labels[neighbour] >= 5, neighbour
    assert labels["none"] >= 25
    repos = Counter(dc.repo_of(c.source) for c in CASES + SEALED)
    assert len(repos) >= 60
    for c in CASES:
        assert c.source.startswith("https://"), f"{c.name}: source must be a public URL"
        assert c.label in CLASSES, f"{c.name}: label {c.label!r} is no pitfall, rule id or none"
        assert c.split == dc.hash_split_of(c.name), f"{c.name}: split is {dc.hash_split_of(c.name)}"
        assert c.accelerator in dc.ACCELERATORS, f"{c.name}: accelerator {c.accelerator!r}"
        assert any(line.strip() for line in c.body), f"{c.name}: no log text"


def test_sealed_holdout_is_well_formed():
    """The sealed set: sources and labels like the open corpus, no thread of the open corpus."""
    assert len(SEALED) >= 50
    open_threads = {dc.thread_of(c.source) for c in CASES}
    for c in SEALED:
        assert c.source.startswith("https://") and c.label in CLASSES, c.name
        assert dc.thread_of(c.source) not in open_threads, f"{c.name}: thread is in the corpus"


def test_failures_never_get_an_empty_answer(outcomes):
    empty = [n for n, (c, r) in outcomes.items() if c.label != "none" and not r.get("findings")]
    assert not empty, f"labelled failures with no finding: {empty}"


def test_healthy_logs_get_no_failure(outcomes):
    invented = {
        n: dc.predicted(r)
        for n, (c, r) in outcomes.items()
        if c.label == "none" and r.get("findings")
    }
    assert not invented, f"findings on logs that show no failure: {invented}"


def test_every_finding_says_which_stage_decided_and_ranks_three_classes(outcomes):
    for name, (_case, result) in outcomes.items():
        if not result["findings"]:
            continue
        assert result["stage"] in ("rules", "learned"), name
        assert result["findings"][0]["stage"] == result["stage"], name
        ranking = result["ranking"]
        assert len(ranking) == 3 and len({r["class"] for r in ranking}) == 3, name
        assert ranking[0]["class"] == dc.predicted(result), name
        assert all(0 <= r["confidence"] <= 1 for r in ranking), name
        confidences = [r["confidence"] for r in ranking]
        assert confidences == sorted(confidences, reverse=True), name


def test_top1_accuracy_on_the_old_hash_split(outcomes, capsys):
    """The old split (by file name) with the shipped model: in-sample for the learned stage,
    reported for comparison with the held-out figures below."""
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for case, result in outcomes.values():
        ok = dc.predicted(result) == case.label
        per[case.split][0] += ok
        per[case.split][1] += 1
    with capsys.disabled():
        print(
            "\nhash split, shipped model: "
            + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in per.items())
        )
    for split in ("tune", "holdout"):
        right, total = per[split]
        assert total and right / total >= TARGET, f"{split}: {right}/{total} below {TARGET:.0%}"


@pytest.mark.parametrize("split", ["thread", "time"])
def test_top1_on_held_out_threads_with_the_learned_stage_retrained(split, capsys):
    """Held out by source thread or the newest threads: the learned stage is retrained on the
    rest with the training script's procedure."""
    fn = dc.split_thread if split == "thread" else dc.time_slice(CASES)
    system, rules_only = ev.measure(CASES, fn, load_rules())
    with capsys.disabled():
        print(f"\n{split} split: {system.summary()}, rules only {rules_only.summary()['top1']}")
    assert system.right / system.total >= TARGET
    assert system.empty == 0 and system.invented == 0


def test_top1_with_whole_repositories_held_out(capsys):
    system = ev.Tally()
    for repo, fn in dc.repo_folds(CASES):
        s, _a = ev.measure(CASES, fn, load_rules())
        for attr in ("right", "total", "empty", "invented"):
            setattr(system, attr, getattr(system, attr) + getattr(s, attr))
        with capsys.disabled():
            print(f"\nrepository held out: {repo} {s.summary()['top1']}")
    assert system.right / system.total >= TARGET
    assert system.empty == 0 and system.invented == 0


@pytest.mark.skipif(not SEALED, reason="no sealed holdout")
def test_sealed_holdout_aggregate_only(capsys):
    """The sealed holdout with the shipped model; only aggregate figures are printed."""
    tally = ev.Tally()
    rules_only = ev.Tally()
    for case, result in zip(SEALED, ev.run(SEALED, load_rules(), None), strict=True):
        rules_only.add(case, result)
    for case, result in zip(SEALED, ev.run(SEALED, load_rules(), default_model()), strict=True):
        tally.add(case, result)
    summary = tally.summary()
    with capsys.disabled():
        print(f"\nsealed holdout: {summary}, rules only {rules_only.summary()['top1']}")
    # Guards at the first blind measurement of sealed set 2 (SEALED.md: 51/61, 2 failures without
    # a finding, 0 healthy logs with one). The targets (>= 90%, no failure without a
    # finding) are not met here; the guard only stops the figure from getting worse.
    assert tally.invented == 0
    assert tally.empty <= 2
    assert tally.right >= 51


def test_training_reproduces_the_shipped_model_byte_for_byte():
    """The weights file is what the training script writes, whatever the string hash seed."""
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(REPO / "src"))
        proc = subprocess.run(
            [sys.executable, str(REPO / "tools" / "train_diagnose_model.py"), "--check"],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
