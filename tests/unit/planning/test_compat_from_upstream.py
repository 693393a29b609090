"""tools/compat_from_upstream.py on excerpts of vllm-ascend's files (tests/data/upstream/README.md).

The tool turns a versioning-policy page and a tag's requirements.txt / pyproject.toml / Dockerfile
into matrix rows (a site matrix document) and diffs them against a matrix (issue 23, "Keeping up").
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from ascend_deploy.planning import compat

REPO = Path(__file__).resolve().parents[3]
UPSTREAM = REPO / "tests" / "data" / "upstream"


def _tool():
    spec = importlib.util.spec_from_file_location(
        "compat_from_upstream", REPO / "tools" / "compat_from_upstream.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["compat_from_upstream"] = module
    spec.loader.exec_module(module)
    return module


tool = _tool()


def tag_args(tag: str, root: Path = UPSTREAM) -> list[str]:
    d = root / tag
    return [
        "--policy", str(d / "versioning_policy.md"),
        "--tag", tag,
        "--requirements", str(d / "requirements.txt"),
        "--pyproject", str(d / "pyproject.toml"),
        "--dockerfile", str(d / "Dockerfile"),
    ]  # fmt: skip


def run(argv: list[str], capsys) -> tuple[int, dict | None, list[str]]:
    code = tool.main(argv)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err.splitlines()


def shipped_without(release: str, *keys: str) -> dict:
    """The shipped matrix with ``keys`` removed from ``release``'s row (the matrix before)."""
    doc = json.loads(json.dumps(compat.read_matrix()))
    row = next(r for r in doc["rows"] if r["vllm_ascend"] == release)
    for key in keys:
        row.pop(key, None)
    return doc


def test_policy_rows_are_read_with_their_columns():
    rows = tool.read_policy(UPSTREAM / "v0.24.0rc1" / "versioning_policy.md")
    assert [r.release for r in rows] == ["v0.24.0rc1", "v0.23.0rc1", "v0.22.1rc1", "v0.21.0rc1"]
    assert rows[0].fields == {
        "official_matrix": True,
        "vllm": "v0.24.0",
        "python": ">=3.10,<3.13",
        "cann": "9.0.1",
        "torch": "2.10.0",
        "torch_npu": "2.10.0.post2",
        "triton_ascend": "3.2.1",
        "mooncake": "v0.3.11.post1",
    }
    assert rows[0].where["cann"].endswith("versioning_policy.md:7")


def test_v0_25_1rc1_tag_only_row_from_its_files(capsys, tmp_path):
    # The tag has no versioning-policy row: its row comes from requirements.txt and Dockerfile.
    before = tmp_path / "matrix.json"
    before.write_text(
        json.dumps(shipped_without("v0.25.1rc1", "triton_ascend", "mooncake", "base_image"))
    )
    code, doc, err = run(
        [*tag_args("v0.25.1rc1"), "--matrix", str(before), "--changed-only"], capsys
    )
    assert code == 0
    assert err[:4] == ["same v0.23.0rc1", "same v0.22.1rc1", "same v0.21.0rc1", "same v0.20.2rc1"]
    assert err[4] == (
        'changed v0.25.1rc1: triton_ascend: null -> "3.2.1"; '
        'base_image: null -> "quay.io/ascend/cann:9.0.1-910b-ubuntu22.04-py3.12"; '
        'mooncake: null -> "v0.3.11.post1"'
    )
    (row,) = doc["rows"]
    assert row["official_matrix"] is False
    assert (row["vllm"], row["cann"], row["torch"], row["torch_npu"]) == (
        "v0.25.1",
        "9.0.1",
        "2.10.0",
        "2.10.0.post2",
    )
    assert compat.row_problems(row) == []
    # the printed document is a site matrix the CLI accepts
    assert compat.site_matrix(json.dumps(doc))["rows"][0]["mooncake"] == "v0.3.11.post1"


def test_shipped_matrix_agrees_with_the_stored_tags(capsys):
    for tag in ("v0.24.0rc1", "v0.25.1rc1"):
        code, doc, err = run([*tag_args(tag), "--changed-only"], capsys)
        assert code == 0, err
        assert doc["rows"] == [] and all(line.startswith("same ") for line in err), err


def test_v0_24_0rc1_is_an_official_row_at_its_tag(capsys, tmp_path):
    before = tmp_path / "matrix.json"
    doc = shipped_without("v0.24.0rc1")
    next(r for r in doc["rows"] if r["vllm_ascend"] == "v0.24.0rc1")["official_matrix"] = False
    before.write_text(json.dumps(doc))
    code, out, err = run([*tag_args("v0.24.0rc1"), "--matrix", str(before)], capsys)
    assert code == 0
    assert err[0] == "changed v0.24.0rc1: official_matrix: false -> true"
    row = out["rows"][0]
    assert (
        "official_matrix" not in row and row["released"] == "2026-07-30"
    )  # kept from the shipped row


def test_a_pin_that_differs_from_the_policy_is_kept_as_the_pip_value(tmp_path):
    d = tmp_path / "v0.24.0rc1"
    d.mkdir()
    for name in ("versioning_policy.md", "pyproject.toml", "Dockerfile"):
        (d / name).write_text((UPSTREAM / "v0.24.0rc1" / name).read_text())
    text = (UPSTREAM / "v0.24.0rc1" / "requirements.txt").read_text()
    (d / "requirements.txt").write_text(
        text.replace("torch-npu==2.10.0.post2", "torch-npu==2.10.0")
    )
    policy = tool.read_policy(d / "versioning_policy.md")[0]
    row = tool.tag_row(
        tool.TagFiles("v0.24.0rc1", d / "requirements.txt", d / "pyproject.toml", d / "Dockerfile"),
        policy,
    )
    assert row.fields["torch_npu"] == "2.10.0.post2" and row.fields["torch_npu_pip"] == "2.10.0"
    assert row.where["torch_npu_pip"] == f"{d / 'requirements.txt'}:4"


def test_a_release_the_matrix_does_not_ship_is_added(capsys, tmp_path):
    before = tmp_path / "matrix.json"
    doc = json.loads(json.dumps(compat.read_matrix()))
    doc["rows"] = [r for r in doc["rows"] if r["vllm_ascend"] != "v0.25.1rc1"]
    before.write_text(json.dumps(doc))
    code, out, err = run([*tag_args("v0.25.1rc1"), "--matrix", str(before)], capsys)
    # pyproject.toml has no requires-python, the files name no hardware: the row is incomplete
    assert code == 2 and out is None
    assert err == [
        "compat_from_upstream: row v0.25.1rc1: field python: missing; field hardware: missing; "
        "pass --hardware / --released for a release the bundle does not ship"
    ]
    py = tmp_path / "pyproject.toml"
    py.write_text(
        '[project]\nrequires-python = ">=3.10, <3.13"\n'
        + (UPSTREAM / "v0.25.1rc1" / "pyproject.toml").read_text()
    )
    argv = [
        *tag_args("v0.25.1rc1"),
        "--matrix",
        str(before),
        "--changed-only",
        "--hardware",
        "a2,a3",
    ]
    argv[argv.index("--pyproject") + 1] = str(py)
    code, out, err = run(argv, capsys)
    assert code == 0
    assert err[-1].startswith(
        "added v0.25.1rc1: official_matrix=False, python=>=3.10,<3.13, torch_npu=2.10.0.post2"
    )
    (row,) = out["rows"]
    assert (
        row["hardware"] == ["a2", "a3"]
        and row["vllm"] == "v0.25.1"
        and compat.row_problems(row) == []
    )


@pytest.mark.parametrize(
    ("name", "old", "new", "message"),
    [
        (
            "versioning_policy.md",
            "2.10.0.post2           | 3.2.1             | v0.3.11.post1 |\n| v0.23.0rc1",
            "2.10.0.post2           | v0.3.11.post1 |\n| v0.23.0rc1",
            "versioning_policy.md:7: 6 cells, the table header has 7",
        ),
        (
            "versioning_policy.md",
            "2.10.0 / 2.10.0.post2           | 3.2.1             | v0.3.11.post1 |\n| v0.23.0rc1",
            "2.10.0                          | 3.2.1             | v0.3.11.post1 |\n| v0.23.0rc1",
            "versioning_policy.md:7: PyTorch/torch_npu cell '2.10.0' is not 'TORCH / TORCH_NPU'",
        ),
        (
            "versioning_policy.md",
            "## Release compatibility matrix",
            "## Matrix",
            "no '## Release compatibility matrix'",
        ),
        (
            "requirements.txt",
            "torch-npu==2.10.0.post2",
            "torch-npu==",
            "requirements.txt:4: 'torch-npu==' is not a pin",
        ),
        (
            "pyproject.toml",
            '"torch==2.10.0",',
            '"torch==2.10.0" =,',
            "pyproject.toml: not TOML (Unclosed array (at line 5, column 21))",
        ),
        (
            "Dockerfile",
            "FROM quay.io/ascend/cann:",
            "FROM ${CANN_QUAY_URL}:",
            "Dockerfile:1: $CANN_QUAY_URL has no ARG",
        ),
    ],
)
def test_a_malformed_file_is_named_with_its_line(capsys, tmp_path, name, old, new, message):
    d = tmp_path / "v0.24.0rc1"
    d.mkdir()
    for f in (UPSTREAM / "v0.24.0rc1").iterdir():
        (d / f.name).write_text(f.read_text())
    text = (d / name).read_text()
    assert old in text
    (d / name).write_text(text.replace(old, new))
    code, out, err = run(tag_args("v0.24.0rc1", tmp_path), capsys)
    assert code == 2 and out is None and len(err) == 1
    assert err[0].startswith(f"compat_from_upstream: {d}/") and message in err[0], err


def test_a_row_breaking_the_schema_names_its_source_line(capsys, tmp_path):
    d = tmp_path / "v0.24.0rc1"
    d.mkdir()
    text = (UPSTREAM / "v0.24.0rc1" / "versioning_policy.md").read_text()
    (d / "versioning_policy.md").write_text(
        text.replace(">= 3.10, < 3.13 | 9.0.1", "3.10+           | 9.0.1", 1)
    )
    code, out, err = run(["--policy", str(d / "versioning_policy.md")], capsys)
    assert code == 2 and out is None
    assert err == [
        "compat_from_upstream: row v0.24.0rc1: field python: '3.10+' is not a Python range "
        "such as >=3.10,<3.12 "
        f"({d / 'versioning_policy.md'}:7)"
    ]
