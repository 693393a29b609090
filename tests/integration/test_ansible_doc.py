"""Every module in plugins/modules/ has documentation that ``ansible-doc`` reads (DOCUMENTATION,
EXAMPLES and RETURN are YAML), run as an operator would: the venv's ansible-doc with the
repository's ansible.cfg (library/, module_utils = src) and ``-M library``.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess

import pytest
import yaml
from conftest import REPO

ANSIBLE_DOC = REPO / ".venv" / "bin" / "ansible-doc"
MODULES = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("*.py"))

pytestmark = pytest.mark.skipif(not ANSIBLE_DOC.exists(), reason="needs the venv's ansible-doc")


def ansible_doc(cwd, config, library, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_CONFIG": str(config), "ANSIBLE_LOCAL_TEMP": str(cwd / "tmp")}
    return subprocess.run(
        [str(ANSIBLE_DOC), "-M", str(library), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def texts(value: object) -> list[object]:
    """A description as ansible-doc reads it: a string or a list of strings."""
    return value if isinstance(value, list) else [value]


def test_library_has_modules():
    assert len(MODULES) >= 10 and "ascend_report" in MODULES and "vllm_health" in MODULES


def test_ansible_doc_renders_every_module(tmp_path):
    """The text an operator reads: one call for every module, no error."""
    done = ansible_doc(tmp_path, REPO / "ansible.cfg", REPO / "plugins" / "modules", *MODULES)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[ERROR]" not in done.stderr and "[WARNING]" not in done.stderr, done.stderr[-3000:]
    for name in MODULES:
        assert f"MODULE {name} " in done.stdout.replace("\x1b[1m", "").replace("\x1b[0m", "")


def test_every_documentation_is_well_formed_yaml(tmp_path):
    done = ansible_doc(
        tmp_path, REPO / "ansible.cfg", REPO / "plugins" / "modules", "--json", *MODULES
    )
    assert done.returncode == 0, done.stderr[-3000:]
    docs = json.loads(done.stdout)
    assert sorted(docs) == MODULES
    for name, entry in docs.items():
        doc = entry["doc"]
        assert doc["module"] == name and isinstance(doc["short_description"], str), name
        # a ": " inside a plain scalar turns a sentence into a mapping
        assert all(isinstance(t, str) for t in texts(doc["description"])), name
        for option, spec in (doc.get("options") or {}).items():
            assert all(isinstance(t, str) for t in texts(spec["description"])), (name, option)
        for key, spec in (entry["return"] or {}).items():
            assert all(isinstance(t, str) for t in texts(spec["description"])), (name, key)
        # ansible-doc passes EXAMPLES through as text: it must be YAML too (a list of tasks)
        examples = yaml.safe_load(entry["examples"])
        assert isinstance(examples, list) and examples, name


def test_ansible_doc_fails_on_a_sentence_that_yaml_reads_as_a_mapping(tmp_path):
    """The checks above can fail: the unquoted line that broke ascend_report's documentation."""
    lib = tmp_path / "library"
    lib.mkdir()
    text = (REPO / "plugins" / "modules" / "ascend_report.py").read_text()
    broken = text.replace(
        '  - "Runs on the controller (C(delegate_to: localhost), C(run_once)). Read-only."',
        "  - Runs on the controller (C(delegate_to: localhost), C(run_once)). Read-only.",
    )
    assert broken != text
    (lib / "ascend_report.py").write_text(broken)
    # only the broken copy is on this path (the repository's ansible.cfg adds library/)
    cfg = tmp_path / "ansible.cfg"
    cfg.write_text(f"[defaults]\nmodule_utils = {REPO / 'src'}\n")
    done = ansible_doc(tmp_path, cfg, lib, "ascend_report")
    assert done.returncode != 0 and "ascend_report" in done.stderr
    done = ansible_doc(tmp_path, cfg, lib, "--json", "ascend_report")
    description = json.loads(done.stdout)["ascend_report"]["doc"]["description"]
    assert not all(isinstance(t, str) for t in texts(description))


def argument_spec(path) -> dict:
    """The literal ``AnsibleModule(argument_spec={...})`` of a module, read with ``ast``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.keyword) and node.arg == "argument_spec":
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path.name}: no literal argument_spec")


def test_documented_options_are_the_argument_spec(tmp_path):
    """Names, types, defaults, required, choices and list element types agree."""
    done = ansible_doc(
        tmp_path, REPO / "ansible.cfg", REPO / "plugins" / "modules", "--json", *MODULES
    )
    docs = json.loads(done.stdout)
    for name in MODULES:
        spec = argument_spec(REPO / "plugins" / "modules" / f"{name}.py")
        options = docs[name]["doc"].get("options") or {}
        assert sorted(options) == sorted(spec), name
        for option, want in spec.items():
            doc = options[option]
            where = f"{name}.{option}"
            assert doc.get("type", "str") == want.get("type", "str"), where
            assert bool(doc.get("required")) == bool(want.get("required")), where
            assert doc.get("default") == want.get("default"), where
            assert doc.get("choices") == want.get("choices"), where
            assert doc.get("elements") == want.get("elements"), where
