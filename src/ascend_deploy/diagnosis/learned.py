"""The learned stage of ``ascend-deploy diagnose``: naive Bayes over the features of
:mod:`.features`, trained offline on the real-log corpus by ``tools/train_diagnose_model.py``
(which rebuilds ``data/diagnose_model.json`` byte for byte).

The model file holds, per feature, how many training logs of each class contain it; at run time
a log's class scores are ``log P(class) + sum over its known features of log P(feature | class)``
(Laplace smoothing ``alpha``), turned into probabilities with a temperature fitted on
cross-validated scores (calibration: a class given 70% is right about 70% of the time). Standard
library only: the Ansible modules ship it to the hosts.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from ..resources import data_path

MODEL_PATH = data_path("diagnose_model.json")
FORMAT = 1
NONE = "none"


@dataclass(frozen=True)
class Model:
    classes: tuple[str, ...]
    log_prior: tuple[float, ...]
    denom: tuple[float, ...]  # log(features counted in class c + alpha * vocabulary)
    alpha: float
    temperature: float
    counts: dict[str, tuple[tuple[int, int], ...]]  # feature -> ((class index, docs), ...)
    rule_confidence: tuple[tuple[int, float], ...] = ()  # (min specificity, precision), desc
    weak_below: int = 20
    guess_confidence: float = 0.5  # precision of the rules' keyword/code guesses
    calibration: tuple[tuple[float, float], ...] = ()  # (upper edge, accuracy) of the top class
    vote_weight: float = 1.0  # exponent of the rules' weak vote against the classifier (fitted)
    meta: dict[str, Any] = field(default_factory=dict)

    def _log_alpha(self) -> float:
        return math.log(self.alpha)

    def scores(self, feats: Iterable[str]) -> list[float]:
        """Log joint score of each class for a set of features (unknown features ignored)."""
        la = self._log_alpha()
        known = [self.counts[f] for f in sorted(feats) if f in self.counts]
        out = [p + len(known) * (la - d) for p, d in zip(self.log_prior, self.denom, strict=True)]
        for entries in known:
            for ci, n in entries:
                out[ci] += math.log(n + self.alpha) - la
        return out

    def posterior(
        self, feats: Iterable[str], exclude: Iterable[str] = ()
    ) -> list[tuple[str, float]]:
        """(class, calibrated probability), best first, over the classes not excluded."""
        skip = set(exclude)
        pairs = [
            (c, s) for c, s in zip(self.classes, self.scores(feats), strict=True) if c not in skip
        ]
        if not pairs:
            return []
        top = max(s for _c, s in pairs)
        weights = [(c, math.exp((s - top) / self.temperature)) for c, s in pairs]
        total = sum(w for _c, w in weights)
        return sorted(((c, w / total) for c, w in weights), key=lambda t: (-t[1], t[0]))

    def calibrated(self, ranking: list[tuple[str, float]]) -> list[tuple[str, float]]:
        """The ranking with its first probability replaced by how often a first class of that
        probability was right in cross-validation (the others share the rest in proportion,
        none above the first: the order stays the classifier's)."""
        if not ranking or not self.calibration:
            return ranking
        top, p = ranking[0]
        acc = next((a for edge, a in self.calibration if p <= edge), self.calibration[-1][1])
        rest = ranking[1:]
        out: dict[str, float] = {}
        mass = 1 - acc
        while rest:
            pool = sum(q for _c, q in rest)
            scale = mass / pool if pool > 0 else 0.0
            capped = [(c, q) for c, q in rest if q * scale > acc]
            if not capped:
                out.update((c, q * scale) for c, q in rest)
                break
            for c, _q in capped:
                out[c] = acc
                mass -= acc
            rest = [(c, q) for c, q in rest if c not in out]
        return [(top, acc)] + [(c, out.get(c, 0.0)) for c, _q in ranking[1:]]

    def weight(self, feat: str, ci: int) -> float:
        """log P(feat | class ci) for a known feature."""
        n = dict(self.counts[feat]).get(ci, 0)
        return math.log(n + self.alpha) - self.denom[ci]

    def lean(self, feats: Iterable[str], a: str, b: str) -> float:
        """How much a line's features favour class ``a`` over class ``b`` (log-odds)."""
        ia, ib = self.classes.index(a), self.classes.index(b)
        return sum(self.weight(f, ia) - self.weight(f, ib) for f in feats if f in self.counts)

    def rule_precision(self, specificity: int) -> float:
        """How often a rule finding of this specificity named the right class in training."""
        for minimum, precision in self.rule_confidence:
            if specificity >= minimum:
                return precision
        return 0.5

    def combine(
        self, post: list[tuple[str, float]], label: str | None, precision: float
    ) -> list[tuple[str, float]]:
        """The classifier's probabilities times the rules' vote for ``label`` (right with
        ``precision``, the rest spread evenly over the other classes; raised to the fitted
        ``vote_weight``), renormalised. A class
        the classifier was never trained on (a rule newer than the model, or a class absent from
        a held-out training set) gets an even share first: the classifier has no opinion on it."""
        if label is None or not post:
            return post
        if all(c != label for c, _p in post):
            share = 1 / (len(post) + 1)
            post = [(c, p * (1 - share)) for c, p in post] + [(label, share)]
        others = max(1, len(post) - 1)
        weighted = [
            (c, p * (precision if c == label else (1 - precision) / others) ** self.vote_weight)
            for c, p in post
        ]
        total = sum(p for _c, p in weighted) or 1.0
        return sorted(((c, p / total) for c, p in weighted), key=lambda t: (-t[1], t[0]))


def parse_model(doc: Any, where: str = "diagnose model") -> Model:
    """The model from its parsed JSON document; InputError names what is wrong."""
    try:
        if doc.get("format") != FORMAT:
            raise ValueError(f"format must be {FORMAT}, got {doc.get('format')!r}")
        classes = tuple(str(c) for c in doc["classes"])
        docs = [int(n) for n in doc["class_docs"]]
        totals = [int(n) for n in doc["class_features"]]
        alpha = float(doc["alpha"])
        temperature = float(doc["temperature"])
        counts = {
            str(f): tuple((int(ci), int(n)) for ci, n in entries)
            for f, entries in doc["features"].items()
        }
        if len(docs) != len(classes) or len(totals) != len(classes) or alpha <= 0:
            raise ValueError("class_docs/class_features must have one entry per class, alpha > 0")
        if temperature <= 0 or float(doc.get("vote_weight", 1.0)) <= 0:
            raise ValueError("temperature and vote_weight must be > 0")
        if any(not 0 <= ci < len(classes) for e in counts.values() for ci, _n in e):
            raise ValueError("a feature names a class index out of range")
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise InputError(
            f"{where}: not a diagnose model ({exc}); rebuild it with tools/train_diagnose_model.py"
        ) from None
    n_docs = sum(docs)
    vocab = len(counts)
    log_prior = tuple(math.log((d + 1) / (n_docs + len(classes))) for d in docs)
    denom = tuple(math.log(t + alpha * vocab) for t in totals)
    bands = doc.get("rule_confidence", {})
    rule_conf = tuple(
        sorted(((int(k), float(v)) for k, v in bands.items() if k.isdigit()), reverse=True)
    )
    return Model(
        classes,
        log_prior,
        denom,
        alpha,
        temperature,
        counts,
        rule_conf,
        int(doc.get("weak_below", 20)),
        float(bands.get("guess", 0.5)),
        tuple((float(e), float(a)) for e, a in doc.get("calibration", [])),
        float(doc.get("vote_weight", 1.0)),
        dict(doc.get("trained_on", {})),
    )


def load_model(path: str = MODEL_PATH) -> Model:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise InputError(f"{path}: diagnose model not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: unreadable diagnose model ({exc})") from None
    return parse_model(doc, path)


_DEFAULT: list[Any] = [None, None]  # (mtime, Model) of the packaged model


def default_model() -> Model | None:
    """The packaged model, parsed once per process; None where it is not shipped (the Ansible
    modules pass it as an argument instead)."""
    try:
        mtime = os.stat(MODEL_PATH).st_mtime_ns
    except OSError:
        return None
    if _DEFAULT[0] != mtime:
        _DEFAULT[:] = [mtime, load_model()]
    return _DEFAULT[1]
