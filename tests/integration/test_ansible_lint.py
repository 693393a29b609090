"""The Ansible bundle is lint-clean and its role interfaces are consistent.

ansible-lint (production profile, .ansible-lint) and yamllint (--strict, .yamllint) run as in CI;
every role's meta/argument_specs.yml documents exactly the variables of its defaults/main.yml;
every playbook passes --syntax-check.
"""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml
from conftest import REPO

BIN = REPO / ".venv" / "bin"
ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "meta").is_dir())
PLAYBOOKS = [REPO / "deploy.yml", *sorted((REPO / "playbooks").glob("*.yml"))]
ENV = {
    **os.environ,
    "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
    "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
}

pytestmark = pytest.mark.skipif(not (BIN / "ansible-lint").exists(), reason="needs the venv")


def run(cmd: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        cmd, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.slow
def test_ansible_lint_production_profile_passes():
    done = run([str(BIN / "ansible-lint"), "--offline", "--nocolor"])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "Profile 'production' was required, and it passed" in done.stdout + done.stderr


def test_yamllint_strict_passes():
    done = run([str(BIN / "yamllint"), "--strict", "."])
    assert done.returncode == 0, done.stdout[-4000:]


@pytest.mark.parametrize("role", ROLES)
def test_argument_specs_match_defaults(role):
    defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text()) or {}
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    options = specs["argument_specs"]["main"]["options"]
    assert sorted(defaults) == sorted(options)
    for name in defaults:
        assert name.startswith(f"{role}_"), f"{name} lacks the role prefix"
        assert options[name].get("description"), f"{name} has no description"
    readme = (REPO / "roles" / role / "README.md").read_text()
    missing = [name for name in defaults if f"`{name}`" not in readme]
    assert not missing, f"README.md of {role} does not document {missing}"


@pytest.mark.parametrize("playbook", PLAYBOOKS, ids=lambda p: p.name)
def test_playbook_syntax(playbook):
    done = run([str(BIN / "ansible-playbook"), "--syntax-check", str(playbook)], timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
