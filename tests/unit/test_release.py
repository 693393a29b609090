"""What a release consists of agrees with itself (issue 24): one version number for the CLI, the
wheel and the collection; the licence the metadata names; a README an operator reads in five
minutes whose links, like every other doc's, lead somewhere; every module in the reference."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from ascend_deploy import __version__
from ascend_deploy.cli import main

DOCS = [
    REPO / "README.md",
    REPO / "CHANGELOG.md",
    REPO / "ARCHITECTURE.md",
    *sorted((REPO / "docs").rglob("*.md")),
    *sorted((REPO / "roles").glob("*/README.md")),
]
tomllib = pytest.importorskip("tomllib")  # Python 3.11+ (the CI machine's Debian has 3.11)
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def test_one_version_for_cli_wheel_and_collection(capsys):
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    assert galaxy["version"] == __version__
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "ascend_deploy.__version__"
    }
    # the changelog's newest released entry (an "Unreleased" section may come first)
    headings = re.findall(r"^## (\S+)", (REPO / "CHANGELOG.md").read_text(), re.M)
    released = [h for h in headings if h != "Unreleased"]
    assert headings[: headings.index(released[0])] in ([], ["Unreleased"])
    assert released[0] == __version__
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"ascend-deploy {__version__}"


def test_the_licence_file_is_the_one_the_metadata_names():
    text = (REPO / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert yaml.safe_load((REPO / "galaxy.yml").read_text())["license"] == ["Apache-2.0"]


def test_the_readme_is_the_operator_path_in_five_minutes():
    readme = (REPO / "README.md").read_text()
    assert len(readme.encode()) < 20_000
    headings = re.findall(r"^## (.+)$", readme, re.M)
    assert headings[:4] == [
        "Requirements",
        "Deploy Qwen3-4B-FP8 on your hosts",
        "Try it without an NPU",
        "Tests",
    ]
    requirements = readme.split("## Requirements", 1)[1].split("\n## ", 1)[0]
    assert "ansible-core 2.16 or later" in requirements and "Debian, Ubuntu" in requirements
    assert "2.8 x the FP8 download" in requirements
    path = readme.split("## Deploy Qwen3-4B-FP8 on your hosts", 1)[1].split("\n## ", 1)[0]
    real_fleet = [line.strip() for line in path.splitlines() if "ansible-playbook" in line]
    assert real_fleet and all("-i inventory/production" in line for line in real_fleet)
    # in order: copy, key, preflight --check, deploy --check --diff, deploy
    order = [
        "cp -r inventory/production.example",
        "ansible-vault encrypt_string",
        "preflight.yml --check",
        "deploy.yml --check --diff",
        "deploy.yml --ask-vault-pass",
    ]
    where = [path.index(step) for step in order]
    assert where == sorted(where)
    assert max(len(line) for line in readme.splitlines() if not line.startswith("|")) < 200


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_leads_to_a_file_and_heading(doc):
    text = doc.read_text()
    for target, anchor in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        path = (doc.parent / target).resolve()
        assert path.exists(), f"{doc.relative_to(REPO)} links to missing {target}"
        if anchor and path.suffix == ".md":
            assert anchor[1:] in _anchors(path), f"{doc.relative_to(REPO)}: {target}{anchor}"


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for heading in re.findall(r"^#+ (.+)$", path.read_text(), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
        out.add(slug.replace(" ", "-"))
    return out


def test_every_module_is_in_the_reference():
    reference = (REPO / "docs" / "reference" / "playbooks.md").read_text()
    listed = set(re.findall(r"^\| `(\w+)` \|", reference, re.M))
    modules = {p.stem for p in (REPO / "plugins" / "modules").glob("*.py")}
    assert modules <= listed, sorted(modules - listed)
