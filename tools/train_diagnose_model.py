#!/usr/bin/env python3
"""Train the learned stage of ``ascend-deploy diagnose`` and write its weights file.

Reads the open real-log corpus (``tests/data/diagnose/real/``; never the sealed holdout), runs
each excerpt through the rule engine (rules only) to get the lines and shape flags the engine
hands to the learned stage, and fits multinomial naive Bayes over the features of
``ascend_deploy.diagnosis.features``:

- counts of training logs per class containing each feature (features seen in at least
  ``MIN_DOCS`` logs); Laplace ``alpha`` chosen by 4-fold cross-validation grouped by source
  repository (accuracy on failure logs, then log-loss);
- the temperature that calibrates the probabilities, fitted on the cross-validated scores
  (least log-loss on a fixed grid);
- the precision of rule findings per specificity band (on all logs: optimistic);
- the weight of the rules' weak vote against the classifier (cross-validated accuracy of the
  combination on the logs where the rules only guess);
- a discount of the displayed confidences to the first blind measurement (``BLIND``): the open
  corpus was read by the rule author, so its precision figures are optimistic.

Everything is integers or values from fixed grids, iterated in sorted order, so the output is
the same bytes on every machine::

    .venv/bin/python tools/train_diagnose_model.py          # writes data/diagnose_model.json
    .venv/bin/python tools/train_diagnose_model.py --check  # exit 1: the shipped file differs

Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import diagnose_corpus as dc

from ascend_deploy.diagnosis.engine import Diagnoser
from ascend_deploy.diagnosis.learned import FORMAT, MODEL_PATH, NONE, Model, parse_model
from ascend_deploy.diagnosis.rules import RuleSet, load_rules

MIN_DOCS = 2
ALPHAS = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
TEMPERATURES = (1, 1.5, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 150, 200)
FOLDS = 4
WEAK_BELOW = 20  # rule findings less specific than this are weak: the learned stage decides
BANDS = (45, 35, WEAK_BELOW)
CALIBRATION_EDGES = (0.2, 0.4, 0.6, 0.8, 0.9, 0.97, 1.0)
VOTE_WEIGHTS = (0.5, 1.0, 1.5, 2.0, 3.0)
# The first blind measurement (tests/data/diagnose/SEALED.md, sealed set 1 with the rules and
# weights frozen at c9e6509): (right, decided) of the rule stage and of the learned stage.
BLIND = {
    "source": "tests/data/diagnose/SEALED.md sealed set 1",
    "rules": [33, 37],
    "learned": [9, 18],
}


@dataclass(frozen=True)
class Doc:
    name: str
    thread: str
    repo: str  # cross-validation folds are whole repositories (logs from unseen places)
    label: str
    feats: frozenset[str]
    rule_label: str | None  # class the rules name (None: no vote)
    rule_spec: int
    rule_kind: str  # "rules" (a cause finding), "guess" (keywords, codes) or "" (no vote)


def rules_view(case: dc.Case, rules: RuleSet) -> Doc:
    """What the rule engine makes of one excerpt: the learned stage's features and the rules'
    own answer."""
    d = Diagnoser(rules, model=False)
    d.feed_text(case.text)
    result = d.result()
    top = next((f for f in result["findings"] if f["kind"] == "cause" and not f["guess"]), None)
    guess = next(
        (
            f
            for f in result["findings"]
            if (f["guess"] and f["pitfall"]) or (f["guess"] and f["rule"] != "unclassified")
        ),
        None,
    )
    spec, kind, label = 0, "", None
    if top is not None:
        spec = max(d.hits[top["rule"]].rule.specificity, d.hits[top["rule"]].bonus)
        kind, label = "rules", dc.predicted({"findings": [top]})
    elif guess is not None:
        kind, label = "guess", dc.predicted({"findings": [guess]})
    return Doc(
        case.name,
        dc.thread_of(case.source),
        dc.repo_of(case.source),
        case.label,
        frozenset(d.learned_features()),
        label,
        spec,
        kind,
    )


def fit(docs: Sequence[Doc], classes: Sequence[str], alpha: float, temperature: float) -> dict:
    """The model document (as written to the data file) for these training logs."""
    index = {c: i for i, c in enumerate(classes)}
    df: dict[str, int] = defaultdict(int)
    for doc in docs:
        for f in doc.feats:
            df[f] += 1
    counts: dict[str, dict[int, int]] = {}
    for doc in docs:
        ci = index[doc.label]
        for f in doc.feats:
            if df[f] >= MIN_DOCS:
                counts.setdefault(f, {}).setdefault(ci, 0)
                counts[f][ci] += 1
    class_docs = [0] * len(classes)
    for doc in docs:
        class_docs[index[doc.label]] += 1
    class_features = [0] * len(classes)
    for entries in counts.values():
        for ci, n in entries.items():
            class_features[ci] += n
    return {
        "format": FORMAT,
        "classes": list(classes),
        "class_docs": class_docs,
        "class_features": class_features,
        "alpha": alpha,
        "temperature": temperature,
        "weak_below": WEAK_BELOW,
        "features": {f: sorted(entries.items()) for f, entries in sorted(counts.items())},
    }


def fold_of(doc: Doc) -> int:
    return hashlib.sha256(doc.repo.encode()).digest()[1] % FOLDS


def cv_scores(
    docs: Sequence[Doc], classes: Sequence[str], alpha: float
) -> list[tuple[Doc, list[float]]]:
    """Cross-validated class scores of every failure log (folds grouped by repository)."""
    out = []
    for k in range(FOLDS):
        train = [d for d in docs if fold_of(d) != k]
        model = parse_model(fit(train, classes, alpha, 1.0))
        for d in docs:
            if fold_of(d) == k and d.label != NONE:
                out.append((d, model.scores(d.feats)))
    return out


def _probs(scores: Sequence[float], classes: Sequence[str], temperature: float) -> list[float]:
    keep = [s if c != NONE else -math.inf for c, s in zip(classes, scores, strict=True)]
    top = max(keep)
    w = [math.exp((s - top) / temperature) if s > -math.inf else 0.0 for s in keep]
    total = sum(w)
    return [x / total for x in w]


def evaluate(scored, classes, temperature: float) -> tuple[float, float]:
    """(accuracy, mean log-loss) of cross-validated scores at one temperature."""
    right, loss = 0, 0.0
    for doc, scores in scored:
        probs = _probs(scores, classes, temperature)
        best = max(range(len(classes)), key=lambda i: (probs[i], -i))
        right += classes[best] == doc.label
        loss -= math.log(max(probs[classes.index(doc.label)], 1e-12))
    return right / len(scored), loss / len(scored)


def calibration(scored, classes, temperature: float) -> list[list[float]]:
    """How often the first class was right, per band of its cross-validated probability
    (smoothed (right + 1) / (n + 2), made non-decreasing)."""
    tally = [[0, 0] for _ in CALIBRATION_EDGES]
    for doc, scores in scored:
        probs = _probs(scores, classes, temperature)
        best = max(range(len(classes)), key=lambda i: (probs[i], -i))
        band = next(i for i, e in enumerate(CALIBRATION_EDGES) if probs[best] <= e + 1e-12)
        tally[band][0] += classes[best] == doc.label
        tally[band][1] += 1
    out, floor = [], 0.0
    for edge, (right, n) in zip(CALIBRATION_EDGES, tally, strict=True):
        acc = max(floor, round((right + 1) / (n + 2), 3))
        floor = acc
        out.append([edge, acc])
    return out


def rule_confidence(docs: Iterable[Doc]) -> dict[str, float]:
    """Precision of the rules' findings per specificity band (smoothed: (right + 1) / (n + 2)).

    Every log of the corpus was available to the rule authors, so this is optimistic; it is
    measured on all of them (the calibration of the learned stage is the one that is fitted)."""
    tally: dict[str, list[int]] = {str(band): [0, 0] for band in (*BANDS, 0)}
    tally["guess"] = [0, 0]
    for d in docs:
        if d.rule_label is None:
            continue
        if d.rule_kind == "guess":
            key = "guess"
        else:
            key = str(next((b for b in BANDS if d.rule_spec >= b), 0))
        tally[key][0] += d.rule_label == d.label
        tally[key][1] += 1
    return {k: round((r + 1) / (n + 2), 3) for k, (r, n) in sorted(tally.items())}


def blind_discount(doc: dict, docs: Sequence[Doc], scored, classes: Sequence[str]) -> None:
    """Scale the displayed confidences to what a blind measurement found: the rule bands that
    decide by the rule stage's precision on logs nobody had read (``BLIND``) over its precision
    on the open corpus (which the rule author read), the learned stage's calibration table by its
    blind accuracy over its cross-validated one. The weak-vote bands feeding ``combine`` stay as
    they are (the vote weight was fitted with them)."""
    decided = [d for d in docs if d.rule_kind == "rules" and d.rule_spec >= WEAK_BELOW]
    corpus = (sum(d.rule_label == d.label for d in decided) + 1) / (len(decided) + 2)
    right, n = BLIND["rules"]
    ratio = min(1.0, (right / n) / corpus)
    conf = doc["rule_confidence"]
    for key in [k for k in conf if k.isdigit() and int(k) >= WEAK_BELOW]:
        conf[key] = round(conf[key] * ratio, 3)
    cv_right = 0
    for d, scores in scored:
        probs = _probs(scores, classes, doc["temperature"])
        cv_right += classes[max(range(len(classes)), key=lambda i: (probs[i], -i))] == d.label
    right, n = BLIND["learned"]
    ratio = min(1.0, (right / n) / (cv_right / len(scored)))
    doc["calibration"] = [[edge, round(acc * ratio, 3)] for edge, acc in doc["calibration"]]
    doc["blind_discount"] = dict(BLIND)


def vote_weight(doc: dict, scored, classes: Sequence[str]) -> float:
    """The weight of the rules' weak vote (a low-specificity finding or the keyword/code guess)
    against the classifier: the grid value whose combination names the right class most often
    on the cross-validated logs with such a vote (ties: lower log-loss, then the smaller)."""
    best: tuple[float, float, float] | None = None
    for w in VOTE_WEIGHTS:
        model = parse_model({**doc, "vote_weight": w})
        right, loss, n = 0, 0.0, 0
        for d, scores in scored:
            weak = d.rule_kind == "guess" or (d.rule_kind == "rules" and d.rule_spec < WEAK_BELOW)
            if not weak or d.rule_label is None:
                continue
            probs = _probs(scores, classes, model.temperature)
            post = sorted(
                ((c, p) for c, p in zip(classes, probs, strict=True) if c != NONE),
                key=lambda t: (-t[1], t[0]),
            )
            precision = (
                model.guess_confidence
                if d.rule_kind == "guess"
                else model.rule_precision(d.rule_spec)
            )
            ranking = model.combine(post, d.rule_label, precision)
            right += ranking[0][0] == d.label
            loss -= math.log(max(dict(ranking).get(d.label, 0.0), 1e-12))
            n += 1
        if n == 0:
            return 1.0
        key = (-right / n, loss / n, w)
        if best is None or key < best:
            best = key
    assert best is not None
    return best[2]


def train(cases: Sequence[dc.Case], rules: RuleSet) -> tuple[dict, dict]:
    """(model document, cross-validation report) for these cases."""
    docs = [rules_view(c, rules) for c in cases]
    classes = sorted({d.label for d in docs})
    best = None
    for alpha in ALPHAS:
        scored = cv_scores(docs, classes, alpha)
        acc, _ = evaluate(scored, classes, 1.0)
        if best is None or acc > best[0] + 1e-12:
            best = (acc, alpha, scored)
    assert best is not None
    _acc, alpha, scored = best
    temperature, best_loss = 1.0, math.inf
    for t in TEMPERATURES:
        acc, loss = evaluate(scored, classes, float(t))
        if loss < best_loss - 1e-12:
            temperature, best_loss = float(t), loss
    acc, loss = evaluate(scored, classes, temperature)
    doc = fit(docs, classes, alpha, temperature)
    doc["rule_confidence"] = rule_confidence(docs)
    doc["calibration"] = calibration(scored, classes, temperature)
    doc["vote_weight"] = vote_weight(doc, scored, classes)
    blind_discount(doc, docs, scored, classes)
    digest = hashlib.sha256()
    for c in sorted(cases, key=lambda c: c.name):
        digest.update(c.name.encode() + b"\0" + c.text.encode() + b"\0" + c.label.encode())
    doc["trained_on"] = {
        "files": len(cases),
        "corpus_sha256": digest.hexdigest(),
        "script": "tools/train_diagnose_model.py",
        "cv_accuracy": round(acc, 4),
        "cv_log_loss": round(loss, 4),
    }
    return doc, {
        "alpha": alpha,
        "temperature": temperature,
        "vote_weight": doc["vote_weight"],
        "cv_accuracy": acc,
        "cv_log_loss": loss,
    }


def dumps(doc: dict) -> str:
    """The model file: header keys sorted, then one feature per line (reviewable diffs)."""
    head = {k: v for k, v in doc.items() if k != "features"}
    lines = ["{"]
    for k in sorted(head):
        lines.append(
            f"  {json.dumps(k)}: {json.dumps(head[k], sort_keys=True, ensure_ascii=False)},"
        )
    lines.append('  "features": {')
    feats = doc["features"]
    for i, (f, entries) in enumerate(feats.items()):
        comma = "," if i < len(feats) - 1 else ""
        body = json.dumps([list(e) for e in entries], separators=(",", ":"))
        lines.append(f"    {json.dumps(f, ensure_ascii=False)}: {body}{comma}")
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def build(cases: Sequence[dc.Case] | None = None) -> tuple[str, dict]:
    cases = dc.open_cases() if cases is None else cases
    doc, report = train(cases, load_rules())
    return dumps(doc), report


def model_from_text(text: str) -> Model:
    return parse_model(json.loads(text))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=MODEL_PATH, help="where to write the model")
    ap.add_argument("--check", action="store_true", help="compare with the file, write nothing")
    args = ap.parse_args()
    text, report = build()
    if args.check:
        try:
            current = Path(args.out).read_text(encoding="utf-8")
        except FileNotFoundError:
            current = ""
        if current != text:
            print(
                f"{args.out} differs from what training writes: run {sys.argv[0]}", file=sys.stderr
            )
            return 1
        print(f"{args.out} is what training writes ({len(text)} bytes)")
        return 0
    Path(args.out).write_text(text, encoding="utf-8")
    print(json.dumps({"out": str(args.out), "bytes": len(text), **report}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
