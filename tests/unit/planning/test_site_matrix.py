"""Site matrix: an operator's JSON rows merged over the shipped compatibility matrix.

The fixture release v0.30.0 (tests/data/site-matrix/) is fictional test data: the bundle does
not ship it, and its values are made up. The library checks site rows by hand against the row
schema of tests/schemas/compat_matrix.schema.json; the jsonschema cases below hold the two equal.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys

import pytest
from conftest import DATA, REPO, SAMPLES

from ascend_deploy.cli import main
from ascend_deploy.errors import CheckFailed, InputError
from ascend_deploy.planning import compat

SITE = DATA / "site-matrix" / "site-v0.30.0.json"
BROKEN = DATA / "site-matrix" / "site-broken.json"
SCHEMA = REPO / "tests" / "schemas" / "compat_matrix.schema.json"
FICTIONAL = "v0.30.0"
FICTIONAL_CANN = "9.5.0"

_spec = importlib.util.spec_from_file_location("build_tree", DATA / "hosts" / "build_tree.py")
build_tree = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_tree)


def shipped_row(release: str) -> dict:
    return next(r for r in compat.load_matrix() if r["vllm_ascend"] == release)


def write_site(tmp_path, rows, name="site.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"description": "test fixture", "rows": rows}), encoding="utf-8")
    return str(path)


def fixture_row() -> dict:
    return json.loads(SITE.read_text(encoding="utf-8"))["rows"][0]


# ----------------------------------------------------------------------------- merge


def test_the_fixture_release_is_not_shipped():
    assert compat.find_row(FICTIONAL) is None
    with pytest.raises(CheckFailed, match=f"no vllm-ascend release supports CANN {FICTIONAL_CANN}"):
        compat.resolve(FICTIONAL_CANN, "a2")


def test_a_new_release_is_added_and_marked():
    shipped = compat.read_matrix()
    before = copy.deepcopy(shipped["rows"])
    merged = compat.merge_site_matrix(shipped, compat.read_site_matrix(str(SITE)))
    assert len(merged["rows"]) == len(before) + 1
    added = compat.find_row(FICTIONAL, merged)
    assert added["torch_npu"] == "2.11.0" and compat.is_site(added)
    assert not any(compat.is_site(r) for r in merged["rows"] if r["vllm_ascend"] != FICTIONAL)
    assert merged["images"] is shipped["images"]  # the image table stays the shipped one
    assert shipped["rows"] == before  # the shared shipped document is untouched
    row = compat.resolve(FICTIONAL_CANN, "a2", matrix=merged)
    assert row["vllm_ascend"] == FICTIONAL and row["image"] == "quay.io/ascend/vllm-ascend:v0.30.0"
    assert any(n.startswith(f"site row from {SITE}") for n in row["notes"])


def test_a_row_of_a_shipped_release_replaces_it(tmp_path):
    replaced = {**shipped_row("v0.13.0"), "torch_npu": "2.8.0.post9", "notes_site": "test fixture"}
    site = compat.read_site_matrix(write_site(tmp_path, [replaced]))
    merged = compat.merge_site_matrix(None, site)
    assert len(merged["rows"]) == len(compat.read_matrix()["rows"])
    rows = [r for r in merged["rows"] if r["vllm_ascend"] == "v0.13.0"]
    assert len(rows) == 1 and rows[0]["torch_npu"] == "2.8.0.post9" and compat.is_site(rows[0])
    assert "torch_npu_pip" not in rows[0]  # replaced as a whole, not field by field
    assert compat.resolve_pinned("v0.13.0", matrix=merged)["pins"]["torch_npu"] == (
        "torch-npu==2.8.0.post9"
    )
    assert shipped_row("v0.13.0")["torch_npu"] == "2.8.0.post2"


def test_matrix_with_site_without_a_file_is_the_shipped_document():
    assert compat.matrix_with_site(None) is compat.read_matrix()


# ----------------------------------------------------------------------------- bad files


def _bad(row_update=None, drop=None):
    row = fixture_row()
    row.update(row_update or {})
    for key in drop or ():
        row.pop(key)
    return row


@pytest.mark.parametrize(
    "row, message",
    [
        (_bad(drop=["torch_npu"]), "row v0.30.0: field torch_npu: missing"),
        (_bad(drop=["vllm_ascend"]), "rows[0]: field vllm_ascend: missing"),
        (_bad({"vllm_ascend": "0.30.0"}), "row 0.30.0: field vllm_ascend: '0.30.0' is not"),
        (_bad({"python": "3.11"}), "row v0.30.0: field python: '3.11' is not a Python range"),
        (_bad({"hardware": "a2"}), "row v0.30.0: field hardware: 'a2' is not a list"),
        (_bad({"hardware": ["910b"]}), "row v0.30.0: field hardware: '910b' is not a2, a3, a5"),
        (_bad({"hardware": ["a2", "a2"]}), "field hardware: lists a hardware key twice"),
        (_bad({"cann": ""}), "row v0.30.0: field cann: empty"),
        (_bad({"cann": 9.5}), "row v0.30.0: field cann: 9.5 is not a string"),
        (_bad({"official_matrix": "no"}), "row v0.30.0: field official_matrix: 'no' is not true"),
        (_bad({"released": "20 Nov 2026"}), "field released: '20 Nov 2026' is not a date"),
        (_bad({"base_image": "cann 9.5"}), "field base_image: 'cann 9.5' is not an image"),
        (_bad({"extra": "mooncake"}), "field extra: 'mooncake' is not a list"),
        (_bad({"origin": "site"}), "row v0.30.0: field origin: reserved"),
        ("v0.30.0", "rows[0]: 'v0.30.0' is not an object of fields"),
    ],
)  # fmt: skip
def test_a_bad_row_names_the_release_and_the_field(tmp_path, row, message):
    path = write_site(tmp_path, [fixture_row() | {"vllm_ascend": "v0.31.0"}, row])
    if message.startswith("rows[0]"):
        path = write_site(tmp_path, [row])
    with pytest.raises(InputError) as exc:
        compat.read_site_matrix(path)
    assert str(exc.value).startswith(f"site matrix {path}: ")
    assert message in str(exc.value), str(exc.value)
    assert "\n" not in str(exc.value)


def test_every_problem_of_the_row_is_named_in_one_line(tmp_path):
    path = write_site(tmp_path, [_bad({"python": "3.11"}, drop=["torch", "torch_npu"])])
    with pytest.raises(InputError) as exc:
        compat.read_site_matrix(path)
    assert str(exc.value) == (
        f"site matrix {path}: row v0.30.0: field torch: missing; field torch_npu: missing; "
        "field python: '3.11' is not a Python range such as >=3.10,<3.12"
    )


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no such file"),
        ("dir", "is a directory"),
        ('{"rows": [', "not valid JSON"),
        ("", "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8 text"),
        ('[{"vllm_ascend": "v0.30.0"}]', "not a JSON object"),
        ('{"rows": []}', "no 'rows' list"),
        ('{"images": {}, "rows": [{}]}', "unknown key 'images'"),
        ('{"rows": [{}], "sources": "me"}', "'sources' is not a list of strings"),
    ],
)
def test_a_missing_unreadable_or_malformed_file_names_the_path(tmp_path, content, message):
    path = tmp_path / "site.json"
    if content == "dir":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as exc:
        compat.read_site_matrix(str(path))
    assert str(exc.value).startswith(f"site matrix {path}: {message}"), str(exc.value)


def test_a_release_given_twice_is_refused(tmp_path):
    path = write_site(tmp_path, [fixture_row(), fixture_row()])
    with pytest.raises(InputError, match=r"row v0\.30\.0: given twice"):
        compat.read_site_matrix(path)


def test_the_module_parameter_may_be_the_text_or_the_parsed_document():
    text = SITE.read_text(encoding="utf-8")
    parsed = compat.site_matrix(json.loads(text))
    assert compat.site_matrix(text, "x.json")["rows"] == parsed["rows"]
    with pytest.raises(InputError, match=r"^site matrix /ctl/site\.json: row v0\.30\.0: field "):
        compat.site_matrix(BROKEN.read_text(encoding="utf-8"), "/ctl/site.json")


# ----------------------------------------------------------------------------- the schema


def _schema_errors(row) -> list[str]:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    doc = {"description": "site", "sources": ["test"], "rows": [row]}
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]


SCHEMA_CASES = [
    fixture_row(),
    _bad(drop=["torch_npu"]),
    _bad(drop=["hardware"]),
    _bad({"vllm_ascend": "v0.30"}),
    _bad({"vllm_ascend": "v0.30.0.post1"}),
    _bad({"vllm_ascend": "v0.30.0rc2"}),
    _bad({"vllm": "0.30.0"}),
    _bad({"vllm": "v0.10.1/v0.10.1.1"}),
    _bad({"python": ">=3.10"}),
    _bad({"python": ">=3.10,<=3.12"}),
    _bad({"hardware": []}),
    _bad({"hardware": ["a2(experimental)", "310p"]}),
    _bad({"hardware": ["a2()"]}),
    _bad({"hardware": ["a2", "a2"]}),
    _bad({"hardware": [2]}),
    _bad({"torch": ""}),
    _bad({"cann_310p": ""}),
    _bad({"triton_ascend": ""}),
    _bad({"mooncake": 3}),
    _bad({"official_matrix": False}),
    _bad({"official_matrix": 0}),
    _bad({"released": "2026-1-2"}),
    _bad({"base_image": "quay.io/ascend/cann:9.5.0"}),
    _bad({"base_image": "cann:9.5.0"}),
    _bad({"extra": ["mindie-turbo"]}),
    _bad({"extra": [1]}),
    _bad({"wheel_source": "https://example.invalid/"}),
    _bad({"notes": ["a list"]}),
]


@pytest.mark.parametrize("row", SCHEMA_CASES, ids=[str(i) for i in range(len(SCHEMA_CASES))])
def test_the_row_check_agrees_with_the_json_schema(row):
    assert bool(compat.row_problems(row)) == bool(_schema_errors(row)), (
        compat.row_problems(row),
        _schema_errors(row),
    )


def test_the_row_check_knows_the_schemas_required_fields_and_patterns():
    row_schema = json.loads(SCHEMA.read_text(encoding="utf-8"))["$defs"]["row"]
    assert list(compat.ROW_REQUIRED) == row_schema["required"]
    props = row_schema["properties"]
    tag = json.loads(SCHEMA.read_text(encoding="utf-8"))["$defs"]["tag"]["pattern"]
    for key, (pattern, _what) in compat.ROW_PATTERNS.items():
        assert pattern == props[key].get("pattern", tag), key
    assert props["hardware"]["items"]["pattern"] == compat.HARDWARE_ITEM
    assert {k for k, v in props.items() if v.get("minLength")} == set(compat.ROW_NON_EMPTY)


def test_every_shipped_row_passes_the_row_check():
    assert [(r["vllm_ascend"], compat.row_problems(r)) for r in compat.load_matrix()] == [
        (r["vllm_ascend"], []) for r in compat.load_matrix()
    ]


# ----------------------------------------------------------------------------- CLI


def test_cli_resolves_the_site_release_by_pin_and_by_cann(capsys):
    for argv in (["--vllm-ascend", FICTIONAL], ["--cann", FICTIONAL_CANN]):
        assert main(["compat", "resolve", *argv, "--matrix", str(SITE), "--json"]) == 0
        row = json.loads(capsys.readouterr().out)
        assert row["vllm_ascend"] == FICTIONAL and row["cann"] == FICTIONAL_CANN, argv
        assert row["origin"] == "site" and row["pins"]["torch_npu"] == "torch-npu==2.11.0"
    assert main(["compat", "resolve", "--vllm-ascend", FICTIONAL, "--hardware", "a3"]) == 2
    assert f"vllm-ascend {FICTIONAL} is not in the compatibility matrix" in capsys.readouterr().err


def test_cli_list_marks_the_site_rows(capsys):
    assert main(["compat", "list", "--matrix", str(SITE)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[-1] == "from"
    assert lines[1].split()[0] == FICTIONAL and lines[1].split()[-1] == "site"
    assert all(line.split()[-1] == "shipped" for line in lines[2:])
    assert main(["compat", "list", "--matrix", str(SITE), "--json"]) == 0
    listed = {r["vllm_ascend"]: r["from"] for r in json.loads(capsys.readouterr().out)}
    assert listed.pop(FICTIONAL) == "site" and set(listed.values()) == {"shipped"}
    assert main(["compat", "list"]) == 0  # without --matrix: no column, no fixture row
    out = capsys.readouterr().out
    assert FICTIONAL not in out and "from" not in out.splitlines()[0]


def test_cli_check_uses_the_site_row(capsys):
    argv = ["compat", "check", "--cann", FICTIONAL_CANN, "--torch", "2.11.0"]
    argv += ["--torch-npu", "2.11.0", "--vllm", "0.30.0", "--vllm-ascend", "0.30.0", "--json"]
    assert main([*argv, "--matrix", str(SITE)]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    assert main(argv) == 1


@pytest.mark.parametrize("action", ["resolve --cann 9.5.0", "list", "check --cann 9.5.0 --torch 2"])
def test_cli_a_broken_row_is_exit_2_naming_its_field(capsys, action):
    assert main(["compat", *action.split(), "--matrix", str(BROKEN)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"ascend-deploy compat: error: site matrix {BROKEN}: row v0.30.0: field torch_npu: "
        "missing\n"
    )


@pytest.mark.parametrize("kind", ["missing", "directory", "invalid"])
def test_cli_an_unusable_matrix_file_is_exit_2_naming_the_path(tmp_path, kind):
    path = tmp_path / "site.json"
    if kind == "directory":
        path.mkdir()
    if kind == "invalid":
        path.write_text('{"rows": [}', encoding="utf-8")
    for argv in (["compat", "list"], ["preflight", "--root", str(tmp_path)]):
        done = subprocess.run(
            [sys.executable, "-m", "ascend_deploy.cli", *argv, "--matrix", str(path)],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and f"site matrix {path}: " in done.stderr
        assert done.stdout == ""


def test_cli_preflight_resolves_against_the_site_matrix(tmp_path, capsys):
    root = str(build_tree.build("a2-toolkit-8.2", tmp_path / "root"))
    # test fixture: a fictional post release of v0.9.1 (CANN 8.2.RC1), newer than the shipped one
    site = write_site(tmp_path, [{**shipped_row("v0.9.1"), "vllm_ascend": "v0.9.1.post7"}])
    argv = ["preflight", "--root", root, "--npu-smi-file"]
    argv += [str(SAMPLES / "npu-smi-info_910B4_anon_busid_10.txt"), "--json"]
    main([*argv, "--matrix", site])
    checks = {c["id"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert "vllm-ascend:v0.9.1.post7" in checks["compat.runtime"]["evidence"], checks
    main(argv)
    checks = {c["id"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert "vllm-ascend:v0.9.1.post7" not in checks["compat.runtime"]["evidence"]
    assert main([*argv, "--matrix", str(BROKEN)]) == 2
