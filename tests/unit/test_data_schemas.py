"""Every shipped data file validates against its JSON Schema (tests/schemas/), and the schemas
catch the faults they are there for (a string where a list belongs, a misspelt condition)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import DATA, REPO

from ascend_deploy.cli import main
from ascend_deploy.errors import CheckFailed
from ascend_deploy.planning import compat

jsonschema = pytest.importorskip("jsonschema")

SCHEMAS = REPO / "tests" / "schemas"
SHIPPED = REPO / "src" / "ascend_deploy" / "data"
FILES = {
    "compat_matrix": [SHIPPED / "compat_matrix.json"],
    "serve_rules": [SHIPPED / "serve_rules.json"],
    "diagnose_rules": [SHIPPED / "diagnose_rules.json"],
    "diagnose_model": [SHIPPED / "diagnose_model.json"],
    # JSON-compatible flow YAML: loads with json; the questions file is itself a suite
    "verify_suite": [SHIPPED / "verify_suite.yaml", DATA / "verification-questions.json"],
}


def validator(name: str):
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def errors(name: str, doc) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
        for e in validator(name).iter_errors(doc)
    ]


def test_every_data_file_has_a_schema():
    shipped = {p.name for p in SHIPPED.iterdir() if p.suffix in (".json", ".yaml")}
    covered = {p.name for paths in FILES.values() for p in paths if p.parent == SHIPPED}
    assert shipped == covered


@pytest.mark.parametrize(
    "name, path",
    [(n, p) for n, paths in FILES.items() for p in paths],
    ids=[p.name for paths in FILES.values() for p in paths],
)
def test_shipped_file_matches_its_schema(name, path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert errors(name, doc) == []


def load(name: str) -> dict:
    return json.loads((SHIPPED / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "name, file, mutate, where",
    [
        # the reported fault: "unknown" where a list of hardware keys belongs
        (
            "compat_matrix",
            "compat_matrix.json",
            lambda d: d["rows"][-1].update(hardware="unknown"),
            "rows/41/hardware",
        ),
        ("compat_matrix", "compat_matrix.json", lambda d: d["rows"][0].update(hardware=["910b"]),
         "rows/0/hardware/0"),
        ("compat_matrix", "compat_matrix.json", lambda d: d["rows"][3].pop("torch_npu"), "rows/3"),
        ("serve_rules", "serve_rules.json", lambda d: d["env"][1]["when"].update(tp_mni=2),
         "env/1/when"),
        ("serve_rules", "serve_rules.json",
         lambda d: d["env"][2]["when"].update(version_below="0.14"), "env/2/when/version_below"),
        ("diagnose_rules", "diagnose_rules.json", lambda d: d["rules"][0].update(kind="reason"),
         "rules/0/kind"),
        ("diagnose_rules", "diagnose_rules.json", lambda d: d["rules"][1].update(patterns="x"),
         "rules/1/patterns"),
        ("verify_suite", "verify_suite.yaml", lambda d: d["cases"][0].update(expect_anz=["x"]),
         "cases/0"),
    ],
)  # fmt: skip
def test_schemas_catch_broken_data(name, file, mutate, where):
    doc = copy.deepcopy(load(file))
    mutate(doc)
    found = errors(name, doc)
    assert any(e.startswith(where) for e in found), found


def test_diagnose_schema_tolerates_extra_optional_keys():
    doc = load("diagnose_rules.json")
    doc["rules"][0]["settle"] = ["npu-smi info"]
    doc["version"] = 2
    assert errors("diagnose_rules", doc) == []


# -- the fault the schema guards: a pin of a tag whose hardware is not published ---------------
def test_pin_of_a_tag_without_published_hardware_says_so(capsys):
    """Reported: `compat resolve --vllm-ascend v0.25.1rc1 --allow-rc` answered
    'it lists u, n, k, n, o, w, n'."""
    with pytest.raises(CheckFailed) as exc:
        compat.resolve_pinned("v0.25.1rc1", "a2")
    assert "supported hardware is not published" in str(exc.value)
    assert main(["compat", "resolve", "--vllm-ascend", "v0.25.1rc1", "--allow-rc"]) == 1
    err = capsys.readouterr().err
    assert "u, n, k" not in err and "not published" in err and err.count("\n") == 1
    # a listed release still names what it lists
    with pytest.raises(CheckFailed, match=r"it lists a2\); pin another release"):
        compat.resolve_pinned("v0.7.3", "a3")


def test_schema_files_are_valid_json_schemas():
    for path in sorted(Path(SCHEMAS).glob("*.schema.json")):
        validator(path.name.removesuffix(".schema.json"))
