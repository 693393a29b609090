#!/usr/bin/env python3
"""The matrix rows vllm-ascend's own files imply, and their diff against the shipped matrix.

A maintainer tool (run on a workstation, not on the hosts). It reads text files an operator
downloaded from https://github.com/vllm-project/vllm-ascend:

- ``--policy FILE``: ``docs/source/community/versioning_policy.md`` (any tag or main). Each row
  of its "Release compatibility matrix" table becomes a matrix row (vLLM, Python, CANN,
  torch / torch_npu, Triton Ascend, Mooncake);
- ``--tag TAG`` with ``--requirements``, ``--pyproject`` and ``--dockerfile`` (files at that
  tag): the release's package pins, its image's ``FROM`` line, ``VLLM_TAG`` and ``MOONCAKE_TAG``.

For the tag, the policy's row wins on the versions it names; a package pin that differs from it
is kept as ``<key>_pip`` (what pip installs on a host, docs/compat-sources.md); the Dockerfile
gives ``base_image``. A tag without a policy row gets a tag-only row (``official_matrix: false``)
from its files alone. Fields the files do not hold (``hardware``, ``released``) come from the
shipped row of that release, or from ``--hardware`` / ``--released``.

Prints the rows as a site matrix document (JSON on stdout, usable with ``ascend-deploy compat
resolve --matrix FILE``), each row checked with the matrix's row checker, and the diff against
the shipped matrix on stderr: ``added``, ``changed REL: FIELD: OLD -> NEW``, ``same``. Exit 0;
2 when a file cannot be read (the message names the file and line) or a row breaks the schema.

Example::

    python tools/compat_from_upstream.py --policy versioning_policy.md --tag v0.25.1rc1 \\
        --requirements requirements.txt --pyproject pyproject.toml --dockerfile Dockerfile \\
        > site.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = None  # type: ignore[assignment]

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from ascend_deploy.errors import InputError  # noqa: E402
from ascend_deploy.planning import compat  # noqa: E402

POLICY_HEADING = re.compile(r"^#+\s*release compatibility matrix\s*$", re.IGNORECASE)
# versioning_policy.md column headers -> matrix keys (a torch cell holds "torch / torch_npu")
COLUMNS = {
    "vllm ascend": "vllm_ascend",
    "vllm": "vllm",
    "python": "python",
    "stable cann": "cann",
    "cann": "cann",
    "pytorch/torch_npu": "torch",
    "triton ascend": "triton_ascend",
    "mooncake": "mooncake",
}
EMPTY_CELLS = {"", "-", "–", "—", "n/a", "none"}
PACKAGES = {
    "torch": "torch",
    "torch-npu": "torch_npu",
    "torch_npu": "torch_npu",
    "triton-ascend": "triton_ascend",
}
REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")
PIN = re.compile(r"^==\s*([0-9][0-9A-Za-z.+!-]*)$")
CANN_IMAGE = re.compile(r"/cann:([0-9]+\.[0-9]+\.(?:[0-9]+|rc[0-9]+))-", re.IGNORECASE)


class UpstreamFileError(Exception):
    """A downloaded upstream file the tool cannot read; the message names the file and line."""


@dataclass
class Implied:
    """The fields one release's files imply, with where each came from (``FILE:LINE``)."""

    release: str
    fields: dict[str, object] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)

    def put(self, key: str, value: object, where: str) -> None:
        self.fields[key] = value
        self.where[key] = where


def _read(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise UpstreamFileError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise UpstreamFileError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise UpstreamFileError(f"{path}: unreadable ({exc.strerror or exc})") from None


# ----------------------------------------------------------------------------- versioning policy


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _python_range(cell: str) -> str:
    return re.sub(r"\s+", "", cell)


def _policy_row(cells: list[str], keys: list[str | None], where: str) -> Implied:
    values = dict(zip(keys, cells, strict=True))
    release = values.get("vllm_ascend") or ""
    if not re.match(compat.ROW_PATTERNS["vllm_ascend"][0], release):
        raise UpstreamFileError(
            f"{where}: {release!r} is not a vllm-ascend release tag such as v0.24.0rc1"
        )
    row = Implied(release)
    row.put("official_matrix", True, where)
    for key, cell in values.items():
        if key in (None, "vllm_ascend") or cell.lower() in EMPTY_CELLS:
            continue
        if key == "torch":
            parts = [p.strip() for p in cell.split("/")]
            if len(parts) != 2 or not all(parts):
                raise UpstreamFileError(
                    f"{where}: PyTorch/torch_npu cell {cell!r} is not 'TORCH / TORCH_NPU'"
                )
            row.put("torch", parts[0], where)
            row.put("torch_npu", parts[1], where)
        elif key == "python":
            row.put("python", _python_range(cell), where)
        else:
            row.put(key, cell, where)
    return row


def read_policy(path: Path) -> list[Implied]:
    """The rows of the "Release compatibility matrix" table in versioning_policy.md ``path``."""
    lines = _read(path)
    start = next((i for i, line in enumerate(lines) if POLICY_HEADING.match(line.strip())), None)
    if start is None:
        raise UpstreamFileError(
            f"{path}: no '## Release compatibility matrix' heading; is it versioning_policy.md?"
        )
    header = next(
        (i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("|")), None
    )
    if header is None:
        raise UpstreamFileError(
            f"{path}:{start + 1}: no table after the 'Release compatibility matrix' heading"
        )
    names = _cells(lines[header])
    keys = [COLUMNS.get(re.sub(r"\s+", " ", n.lower())) for n in names]
    if "vllm_ascend" not in keys or "torch" not in keys:
        raise UpstreamFileError(
            f"{path}:{header + 1}: table header {lines[header].strip()!r} has no 'vLLM Ascend' or "
            "'PyTorch/torch_npu' column"
        )
    rows: list[Implied] = []
    for i in range(header + 1, len(lines)):
        line = lines[i].strip()
        if not line.startswith("|"):
            break
        cells = _cells(line)
        if all(re.fullmatch(r":?-+:?", c) for c in cells):
            continue
        where = f"{path}:{i + 1}"
        if len(cells) != len(names):
            raise UpstreamFileError(
                f"{where}: {len(cells)} cells, the table header has {len(names)}"
            )
        rows.append(_policy_row(cells, keys, where))
    if not rows:
        raise UpstreamFileError(
            f"{path}:{header + 1}: the release compatibility matrix has no rows"
        )
    return rows


# ----------------------------------------------------------------------------- a tag's files


def _requirement(text: str, where: str) -> tuple[str, str] | None:
    """``(matrix key, pinned version)`` of a torch / torch-npu / triton-ascend pin, else None."""
    text = text.split(";", 1)[0].strip()
    m = REQUIREMENT.match(text)
    if not m:
        return None
    key = PACKAGES.get(m.group(1).lower())
    if key is None:
        return None
    spec = m.group(3).strip()
    if "==" not in spec:
        return None  # a range (torch>=2.5.1) or no version: not a pin
    pin = PIN.match(spec)
    if not pin:
        raise UpstreamFileError(f"{where}: {text!r} is not a pin NAME==VERSION")
    return key, pin.group(1)


def read_requirements(path: Path) -> dict[str, tuple[str, str]]:
    """``{key: (version, FILE:LINE)}`` of the torch / torch-npu / triton-ascend pins."""
    out: dict[str, tuple[str, str]] = {}
    for i, raw in enumerate(_read(path)):
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        where = f"{path}:{i + 1}"
        found = _requirement(line, where)
        if found:
            out[found[0]] = (found[1], where)
    return out


def read_pyproject(path: Path) -> tuple[dict[str, tuple[str, str]], tuple[str, str] | None]:
    """The pins of pyproject.toml (``[project] dependencies``, ``[build-system] requires``) and its
    ``requires-python`` (value, FILE)."""
    if tomllib is None:
        raise UpstreamFileError(
            f"{path}: reading pyproject.toml needs Python 3.11 or later (tomllib)"
        )
    try:
        doc = tomllib.loads("\n".join(_read(path)))
    except tomllib.TOMLDecodeError as exc:
        raise UpstreamFileError(f"{path}: not TOML ({exc})") from None
    project = doc.get("project") if isinstance(doc.get("project"), dict) else {}
    build = doc.get("build-system") if isinstance(doc.get("build-system"), dict) else {}
    out: dict[str, tuple[str, str]] = {}
    for section, entries in (
        ("build-system.requires", build.get("requires")),
        ("project.dependencies", project.get("dependencies")),
    ):
        if entries is None:
            continue
        if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
            raise UpstreamFileError(f"{path}: [{section}] is not a list of requirement strings")
        for entry in entries:
            where = f"{path} ({section})"
            found = _requirement(entry, where)
            if found:
                out.setdefault(found[0], (found[1], where))
    python = project.get("requires-python")
    return out, (
        (_python_range(python), f"{path} (project.requires-python)")
        if isinstance(python, str)
        else None
    )


def _substitute(text: str, args: dict[str, str], where: str) -> str:
    def value(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in args:
            raise UpstreamFileError(f"{where}: ${name} has no ARG default before it")
        return args[name]

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", value, text)


def read_dockerfile(path: Path) -> dict[str, tuple[str, str]]:
    """``base_image`` (the first ``FROM``), ``cann`` (its tag), ``vllm`` (``VLLM_TAG``) and
    ``mooncake`` (``MOONCAKE_TAG``) of a Dockerfile, each with its FILE:LINE."""
    args: dict[str, str] = {}
    out: dict[str, tuple[str, str]] = {}
    for i, raw in enumerate(_read(path)):
        line = raw.strip()
        where = f"{path}:{i + 1}"
        arg = re.match(r"^ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?$", line, re.IGNORECASE)
        if arg:
            if arg.group(2) is not None:
                args[arg.group(1)] = arg.group(2).strip().strip("\"'")
            continue
        frm = re.match(r"^FROM\s+(?:--platform=\S+\s+)?(\S+)", line, re.IGNORECASE)
        if frm and "base_image" not in out:
            image = _substitute(frm.group(1), args, where)
            if not re.match(compat.ROW_PATTERNS["base_image"][0], image):
                raise UpstreamFileError(
                    f"{where}: FROM {image!r} is not an image reference registry/name:tag"
                )
            out["base_image"] = (image, where)
            cann = CANN_IMAGE.search(image)
            if cann:
                out["cann"] = (re.sub(r"rc", "RC", cann.group(1), flags=re.IGNORECASE), where)
    for name, key in (("VLLM_TAG", "vllm"), ("MOONCAKE_TAG", "mooncake")):
        if args.get(name):
            value = args[name] if args[name].startswith("v") else f"v{args[name]}"
            out[key] = (value, f"{path} (ARG {name})")
    if "base_image" not in out:
        raise UpstreamFileError(f"{path}: no FROM line")
    return out


# ----------------------------------------------------------------------------- rows and the diff


@dataclass
class TagFiles:
    release: str
    requirements: Path | None = None
    pyproject: Path | None = None
    dockerfile: Path | None = None


def tag_row(files: TagFiles, policy: Implied | None) -> Implied:
    """The release's row: its policy row with the tag's pins and image, or a tag-only row."""
    row = (
        Implied(files.release, dict(policy.fields), dict(policy.where))
        if policy
        else Implied(files.release)
    )
    if policy is None:
        row.put("official_matrix", False, "no versioning-policy row for the tag")
    pins: dict[str, tuple[str, str]] = {}
    python = None
    if files.pyproject:
        pins, python = read_pyproject(files.pyproject)
    if files.requirements:
        pins.update(read_requirements(files.requirements))
    if python and "python" not in row.fields:
        row.put("python", *python)
    for key, (version, where) in pins.items():
        if key not in row.fields:
            row.put(key, version, where)
        elif row.fields[key] != version:
            row.put(f"{key}_pip", version, where)
    if files.dockerfile:
        for key, (value, where) in read_dockerfile(files.dockerfile).items():
            if key == "base_image" or key not in row.fields:
                row.put(key, value, where)
    return row


def implied_rows(policy: Path | None, tag: TagFiles | None) -> list[Implied]:
    rows = read_policy(policy) if policy else []
    if tag is None:
        return rows
    own = next((r for r in rows if r.release == tag.release), None)
    mine = tag_row(tag, own)
    return [mine if r is own else r for r in rows] + ([] if own else [mine])


def complete_row(implied: Implied, shipped: dict | None, extra: dict[str, object]) -> dict:
    """The matrix row: the shipped row (if any) with the implied fields over it, then ``extra``.

    UpstreamFileError when the row breaks the matrix's row schema (naming each field's source).
    """
    row: dict[str, object] = {"vllm_ascend": implied.release}
    row.update({k: v for k, v in (shipped or {}).items() if k != compat.ORIGIN})
    row.update(implied.fields)
    row.update(extra)
    if row.get("official_matrix") is True:
        del row["official_matrix"]  # the matrix's default: rows omit it
    problems = compat.row_problems(row)
    if problems:
        details = []
        for problem in problems:
            key = problem.split(":", 1)[0].removeprefix("field ")
            source = implied.where.get(key)
            details.append(f"{problem} ({source})" if source else problem)
        hint = (
            "; pass --hardware / --released for a release the bundle does not ship"
            if shipped is None
            else ""
        )
        raise UpstreamFileError(f"row {implied.release}: " + "; ".join(details) + hint)
    return row


def diff_line(implied: Implied, shipped: dict | None) -> str:
    if shipped is None:
        listed = ", ".join(f"{k}={v}" for k, v in implied.fields.items())
        return f"added {implied.release}: {listed}"
    changed = [
        f"{k}: {json.dumps(shipped.get(k))} -> {json.dumps(v)}"
        for k, v in implied.fields.items()
        if (compat.is_official(shipped) if k == "official_matrix" else shipped.get(k)) != v
    ]
    if not changed:
        return f"same {implied.release}"
    return f"changed {implied.release}: " + "; ".join(changed)


def build(
    policy: Path | None,
    tag: TagFiles | None,
    matrix: dict,
    extra: dict[str, object] | None = None,
    changed_only: bool = False,
) -> tuple[dict, list[str]]:
    """The site matrix document of the implied rows and the diff lines against ``matrix``."""
    shipped = {r["vllm_ascend"]: r for r in compat.matrix_rows(matrix)}
    rows: list[dict] = []
    diff: list[str] = []
    for implied in implied_rows(policy, tag):
        before = shipped.get(implied.release)
        line = diff_line(implied, before)
        diff.append(line)
        if changed_only and line.startswith("same "):
            continue
        mine = extra if (tag and implied.release == tag.release) else {}
        rows.append(complete_row(implied, before, mine or {}))
    inputs = [
        str(p)
        for p in (policy, tag and tag.requirements, tag and tag.pyproject, tag and tag.dockerfile)
        if p
    ]
    doc = {
        "description": "rows implied by vllm-ascend files (tools/compat_from_upstream.py)",
        "sources": inputs,
        "rows": rows,
    }
    return doc, diff


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--policy", type=Path, help="docs/source/community/versioning_policy.md of vllm-ascend"
    )
    parser.add_argument("--tag", help="the release tag whose files follow, e.g. v0.25.1rc1")
    parser.add_argument("--requirements", type=Path, help="requirements.txt at --tag")
    parser.add_argument("--pyproject", type=Path, help="pyproject.toml at --tag")
    parser.add_argument("--dockerfile", type=Path, help="Dockerfile at --tag")
    parser.add_argument(
        "--hardware", help="comma-separated hardware keys for --tag's row (a2,a3,a5,310p)"
    )
    parser.add_argument("--released", help="release date YYYY-MM-DD for --tag's row")
    parser.add_argument(
        "--matrix", type=Path, default=Path(compat.MATRIX_PATH), help="matrix to diff against"
    )
    parser.add_argument(
        "--changed-only", action="store_true", help="print only added and changed rows"
    )
    args = parser.parse_args(argv)
    tag_files = (args.requirements, args.pyproject, args.dockerfile)
    if args.tag is None and any(tag_files):
        parser.error("--requirements / --pyproject / --dockerfile need --tag")
    if args.policy is None and args.tag is None:
        parser.error("give --policy, or --tag with its files, or both")
    extra: dict[str, object] = {}
    if args.hardware:
        extra["hardware"] = [h.strip() for h in args.hardware.split(",") if h.strip()]
    if args.released:
        extra["released"] = args.released
    tag = TagFiles(args.tag, *tag_files) if args.tag else None
    try:
        matrix = compat.read_matrix(str(args.matrix))
        doc, diff = build(args.policy, tag, matrix, extra, args.changed_only)
    except (UpstreamFileError, InputError) as exc:
        print(f"compat_from_upstream: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(doc, indent=1))
    for line in diff:
        print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
