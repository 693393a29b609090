#!/usr/bin/env python3
"""Measure ``ascend-deploy diagnose`` (rules + learned stage) on real logs it was not trained on.

For each split of the open corpus (``tools/diagnose_corpus.py``: the old hash split, by source
thread, whole repositories held out, the newest threads held out) the learned stage is retrained
on the training side with the training script's own procedure, and the whole engine is run on the
held-out side. The sealed holdout is measured with the shipped model (trained on the whole open
corpus); for it only aggregate figures and file names are printed, never log text or labels::

    .venv/bin/python tools/eval_diagnose.py                 # every split, a table
    .venv/bin/python tools/eval_diagnose.py --json          # the same as JSON
    .venv/bin/python tools/eval_diagnose.py --split thread --misses   # misses of the thread split

Per split: top-1 accuracy (class of the first finding), failures left without a finding, healthy
logs given a finding, and how the learned stage's confidence matches its accuracy (expected
calibration error over 5 bins). Rules were written on the open corpus, so the open splits measure
the learned stage honestly and the rules optimistically; the sealed holdout measures both.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import diagnose_corpus as dc
import train_diagnose_model as tm

from ascend_deploy.diagnosis.engine import Diagnoser
from ascend_deploy.diagnosis.learned import Model, default_model, parse_model
from ascend_deploy.diagnosis.rules import RuleSet, load_rules


@dataclass
class Tally:
    right: int = 0
    total: int = 0
    empty: int = 0  # failure logs without a finding
    failures: int = 0
    invented: int = 0  # healthy logs with a finding
    healthy: int = 0
    conf: list[tuple[float, bool]] = field(default_factory=list)  # (confidence, right) of stage 1
    stages: dict[str, list[int]] = field(default_factory=dict)
    misses: list[str] = field(default_factory=list)

    def add(self, case: dc.Case, result: dict) -> None:
        guess = dc.predicted(result)
        ok = guess == case.label
        self.right += ok
        self.total += 1
        if case.label == "none":
            self.healthy += 1
            self.invented += bool(result["findings"])
        else:
            self.failures += 1
            self.empty += not result["findings"]
        stage = result.get("stage") or "none"
        st = self.stages.setdefault(stage, [0, 0])
        st[0] += ok
        st[1] += 1
        if result["findings"] and result.get("ranking"):
            self.conf.append((result["ranking"][0]["confidence"], ok))
        if not ok:
            self.misses.append(f"{case.label:>24} -> {guess:<24} {case.name}")

    def ece(self, bins: int = 5) -> float | None:
        if not self.conf:
            return None
        total = 0.0
        for b in range(bins):
            lo, hi = b / bins, (b + 1) / bins
            part = [(c, r) for c, r in self.conf if lo <= c < hi or (b == bins - 1 and c == 1)]
            if part:
                acc = sum(r for _c, r in part) / len(part)
                mean = sum(c for c, _r in part) / len(part)
                total += len(part) / len(self.conf) * abs(acc - mean)
        return round(total, 3)

    def summary(self) -> dict:
        return {
            "top1": f"{self.right}/{self.total}",
            "accuracy": round(self.right / self.total, 3) if self.total else None,
            "failures_without_finding": f"{self.empty}/{self.failures}",
            "healthy_with_finding": f"{self.invented}/{self.healthy}",
            "ece": self.ece(),
            "by_stage": {k: f"{v[0]}/{v[1]}" for k, v in sorted(self.stages.items())},
        }


def run(cases: Sequence[dc.Case], rules: RuleSet, model: Model | None) -> list[dict]:
    out = []
    for case in cases:
        d = Diagnoser(rules, model=model if model is not None else False)
        d.feed_text(case.text)
        out.append(d.result())
    return out


def retrained(train: Sequence[dc.Case], rules: RuleSet) -> Model:
    doc, _report = tm.train(train, rules)
    return parse_model(doc)


def measure(
    cases: Sequence[dc.Case], split: Callable[[dc.Case], str], rules: RuleSet
) -> tuple[Tally, Tally]:
    """(system, rules only) on the test side, the learned stage retrained on the train side."""
    train = [c for c in cases if split(c) == "train"]
    test = [c for c in cases if split(c) == "test"]
    model = retrained(train, rules)
    system, alone = Tally(), Tally()
    for case, result in zip(test, run(test, rules, model), strict=True):
        system.add(case, result)
    for case, result in zip(test, run(test, rules, None), strict=True):
        alone.add(case, result)
    return system, alone


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--split", choices=["hash", "thread", "repo", "time", "sealed", "all"], default="all"
    )
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--misses",
        action="store_true",
        help="list the misses (open splits only; never for the sealed holdout)",
    )
    args = ap.parse_args()
    rules = load_rules()
    cases = dc.open_cases()
    report: dict[str, dict] = {}
    wanted = ["hash", "thread", "repo", "time", "sealed"] if args.split == "all" else [args.split]
    misses: dict[str, list[str]] = {}
    for name in wanted:
        if name == "sealed":
            sealed = dc.sealed_cases()
            if not sealed:
                continue
            system, alone = Tally(), Tally()
            shipped = default_model()
            for case, result in zip(sealed, run(sealed, rules, shipped), strict=True):
                system.add(case, result)
            for case, result in zip(sealed, run(sealed, rules, None), strict=True):
                alone.add(case, result)
            report[name] = {
                **system.summary(),
                "rules_only": alone.summary()["top1"],
                "files": len(sealed),
                "missed_files": sorted(m.split()[-1] for m in system.misses),
            }
            continue
        if name == "repo":
            system, alone = Tally(), Tally()
            folds = {}
            for repo, split in dc.repo_folds(cases):
                s, a = measure(cases, split, rules)
                folds[repo] = s.summary()["top1"]
                for attr in ("right", "total", "empty", "failures", "invented", "healthy"):
                    setattr(system, attr, getattr(system, attr) + getattr(s, attr))
                    setattr(alone, attr, getattr(alone, attr) + getattr(a, attr))
                system.conf += s.conf
                system.misses += s.misses
                for k, v in s.stages.items():
                    acc = system.stages.setdefault(k, [0, 0])
                    acc[0] += v[0]
                    acc[1] += v[1]
            report[name] = {
                **system.summary(),
                "rules_only": alone.summary()["top1"],
                "folds": folds,
            }
        else:
            split = {
                "hash": dc.split_hash,
                "thread": dc.split_thread,
                "time": dc.time_slice(cases),
            }[name]
            system, alone = measure(cases, split, rules)
            report[name] = {**system.summary(), "rules_only": alone.summary()["top1"]}
        misses[name] = system.misses
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(
            f"{'split':8} {'top-1':>9} {'acc':>6} {'rules only':>10} {'empty':>7} "
            f"{'invented':>8} {'ECE':>6}  by stage"
        )
        for name, r in report.items():
            print(
                f"{name:8} {r['top1']:>9} {r['accuracy']:>6} {r['rules_only']:>10} "
                f"{r['failures_without_finding']:>7} {r['healthy_with_finding']:>8} "
                f"{r['ece']!s:>6}  {r['by_stage']}"
            )
            if name == "repo":
                print("         folds: " + ", ".join(f"{k} {v}" for k, v in r["folds"].items()))
            if name == "sealed":
                print(f"         missed: {', '.join(r['missed_files']) or '-'}")
    if args.misses:
        for name, lines in misses.items():
            print(f"\nmisses ({name}):")
            print("\n".join(lines) or "  -")
    return 0


if __name__ == "__main__":
    sys.exit(main())
