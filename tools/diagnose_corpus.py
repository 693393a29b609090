"""The real-log corpus of ``ascend-deploy diagnose`` and the ways it is split for measuring.

Open corpus: ``tests/data/diagnose/real/*.log``, one excerpt per file, copied verbatim from a
public page; the first lines are ``# source: URL``, ``# label: CLASS``, ``# split: tune|holdout``
(the old split by a hash of the file name) and optionally ``# accelerator: gpu|cpu|xpu|mps``
(a log from another accelerator, for classes that do not depend on it). Sealed holdout:
``tests/data/diagnose/sealed.tar.gz`` (the same file format inside, names without hints, labels in
the files only); nobody writing rules reads it, and :func:`sealed_cases` is only used by the
evaluation, which prints aggregate figures and file names.

Splits (each a function from a case to ``"train"`` or ``"test"``):

- ``hash``: the old split, SHA-256 of the file name (a quarter held out);
- ``thread``: SHA-256 of the source thread (issue/PR/page), so excerpts of one thread never land
  on both sides (a quarter held out);
- ``repo``: whole repositories held out (:func:`repo_folds`, one fold per repository with enough
  excerpts, the rest grouped);
- ``time``: the newest threads held out (per repository the highest quarter of thread numbers).

Standard library only; used by ``tools/train_diagnose_model.py``, ``tools/eval_diagnose.py`` and
the corpus tests.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "data" / "diagnose" / "real"
SEALED = REPO / "tests" / "data" / "diagnose" / "sealed.tar.gz"
HEADER = ("source", "label", "split")
OPTIONAL = ("accelerator",)
ACCELERATORS = ("npu", "gpu", "cpu", "xpu", "mps")

_GH_RE = re.compile(r"^https://github\.com/([^/]+)/([^/]+)/(?:issues|pull|discussions)/(\d+)")
_GH_REPO_RE = re.compile(r"^https://github\.com/([^/]+)/([^/#?]+)")


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    label: str
    split: str  # the old hash split recorded in the file
    accelerator: str
    body: tuple[str, ...]  # the log lines (with their line ends)

    @property
    def text(self) -> str:
        return "".join(self.body)


def hash_split_of(name: str) -> str:
    """The old split of a file name: a quarter (by SHA-256 of the name) is held out."""
    return "holdout" if hashlib.sha256(name.encode()).digest()[0] % 4 == 0 else "tune"


def thread_of(url: str) -> str:
    """The thread an excerpt comes from: ``owner/repo#N`` on GitHub (issues and pull requests
    share the numbers), else the page address without fragment, query or trailing slash."""
    m = _GH_RE.match(url)
    if m:
        return f"{m.group(1).lower()}/{m.group(2).lower()}#{m.group(3)}"
    return url.split("#", 1)[0].split("?", 1)[0].rstrip("/").lower()


def repo_of(url: str) -> str:
    """``owner/repo`` of a GitHub source, else the site's host name."""
    m = _GH_RE.match(url) or _GH_REPO_RE.match(url)
    if m:
        return f"{m.group(1).lower()}/{m.group(2).lower()}"
    return url.split("/")[2].lower() if "://" in url else url


def thread_number(url: str) -> int | None:
    m = _GH_RE.match(url)
    return int(m.group(3)) if m else None


def parse_case(name: str, text: str) -> Case:
    lines = text.splitlines(keepends=True)
    meta: dict[str, str] = {}
    for key, line in zip(HEADER, lines[:3], strict=False):
        prefix = f"# {key}:"
        if not line.startswith(prefix):
            raise ValueError(f"{name}: line for {key!r} must start with {prefix!r}")
        meta[key] = line[len(prefix) :].strip()
    body = lines[3:]
    while body and any(body[0].startswith(f"# {k}:") for k in OPTIONAL):
        key, _, value = body[0][2:].partition(":")
        meta[key.strip()] = value.strip()
        body = body[1:]
    return Case(
        name,
        meta["source"],
        meta["label"],
        meta["split"],
        meta.get("accelerator", "npu"),
        tuple(body),
    )


def open_cases(root: Path = CORPUS) -> list[Case]:
    """The open corpus, sorted by file name."""
    return [parse_case(p.name, p.read_text(encoding="utf-8")) for p in sorted(root.glob("*.log"))]


def sealed_cases(path: Path = SEALED) -> list[Case]:
    """The sealed holdout (empty when the archive does not exist)."""
    if not path.exists():
        return []
    out = []
    with tarfile.open(path, "r:gz") as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if not member.isfile() or not member.name.endswith(".log"):
                continue
            fh = tar.extractfile(member)
            assert fh is not None
            text = io.TextIOWrapper(fh, encoding="utf-8").read()
            out.append(parse_case(Path(member.name).name, text))
    return out


def write_sealed(cases: Iterable[tuple[str, str]], path: Path = SEALED) -> None:
    """Write ``(name, text)`` pairs as the sealed archive, byte-reproducible (fixed mtimes,
    owners and order)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, text in sorted(cases):
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode, info.uname, info.gname = len(data), 0, 0o644, "", ""
            tar.addfile(info, io.BytesIO(data))
    import gzip

    with open(path, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0) as gz:
        gz.write(buf.getvalue())


# --- splits ---------------------------------------------------------------------------------


def _quarter(key: str) -> bool:
    return hashlib.sha256(key.encode()).digest()[0] % 4 == 0


def split_hash(case: Case) -> str:
    return "test" if hash_split_of(case.name) == "holdout" else "train"


def split_thread(case: Case) -> str:
    return "test" if _quarter(thread_of(case.source)) else "train"


def time_slice(cases: list[Case]) -> Callable[[Case], str]:
    """Newest threads held out: per repository with at least four numbered threads, the
    threads whose number is in the highest quarter; pages without numbers stay in training."""
    numbers: dict[str, set[int]] = defaultdict(set)
    for c in cases:
        n = thread_number(c.source)
        if n is not None:
            numbers[repo_of(c.source)].add(n)
    cut: dict[str, int] = {}
    for repo, nums in numbers.items():
        if len(nums) >= 4:
            ordered = sorted(nums)
            cut[repo] = ordered[len(ordered) - max(1, len(ordered) // 4)]

    def split(case: Case) -> str:
        n = thread_number(case.source)
        c = cut.get(repo_of(case.source))
        return "test" if n is not None and c is not None and n >= c else "train"

    return split


def repo_folds(cases: list[Case], minimum: int = 8) -> list[tuple[str, Callable[[Case], str]]]:
    """One held-out fold per repository with at least ``minimum`` excerpts; the other
    repositories form one more fold ("other repositories") together."""
    counts = Counter(repo_of(c.source) for c in cases)
    big = sorted(r for r, n in counts.items() if n >= minimum)
    folds: list[tuple[str, Callable[[Case], str]]] = []
    for repo in big:
        folds.append((repo, lambda c, r=repo: "test" if repo_of(c.source) == r else "train"))
    small = {r for r in counts if r not in big}
    if small:
        folds.append(
            ("other repositories", lambda c: "test" if repo_of(c.source) in small else "train")
        )
    return folds


def predicted(result: dict) -> str:
    """Class of the best finding: its pitfall, else its rule id; ``none`` without findings."""
    findings = result.get("findings") or []
    if not findings:
        return "none"
    top = findings[0]
    return str(top["pitfall"]) if top.get("pitfall") is not None else str(top["rule"])
