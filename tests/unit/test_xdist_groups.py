"""The two-worker split of ``make test``: the Docker tests in two groups that share nothing, one
per worker, everything else free (tests/conftest.py ``xdist_scope``), on the repository's own
files."""

from __future__ import annotations

import re

import yaml
from conftest import DOCKER_B_FILES, DOCKER_B_SCENARIOS, REPO, docker_tests, xdist_scope

MOLECULE = "tests/integration/test_molecule.py::test_molecule_scenario"


def scope(nodeid: str) -> str:
    return xdist_scope(REPO, nodeid, {})


def scenarios() -> list[str]:
    return sorted(p.parent.name for p in (REPO / "molecule").glob("*/molecule.yml"))


def test_molecule_scenarios_and_simulated_host_files_go_to_their_group() -> None:
    assert scope(f"{MOLECULE}[default]") == "docker"
    assert scope(f"{MOLECULE}[engine]") == "docker-b"
    nodeid = "tests/integration/test_collection.py::test_deploy_by_fqcn_from_outside_the_repository"
    assert scope(nodeid) == "docker-b"
    assert scope("tests/integration/test_hostile_names.py::test_x") == "docker"
    argv = "tests/integration/test_vllm_argv_conformance.py::"
    assert scope(argv + "test_every_planned_argv_is_accepted_by_the_paired_vllm[v0.23.0]") == (
        "docker-b"
    )
    unmarked = argv + "test_paired_version_or_the_nearest_on_pypi[x]"
    assert scope(unmarked) == unmarked  # no Docker mark: free


def test_unmarked_tests_are_free() -> None:
    nodeid = "tests/unit/test_layout.py::test_module_basenames_are_unique"
    assert scope(nodeid) == nodeid


def test_the_second_group_names_files_and_scenarios_that_exist() -> None:
    assert set(scenarios()) >= DOCKER_B_SCENARIOS
    for name in DOCKER_B_FILES:
        assert docker_tests(REPO / name), f"{name} has no Docker test: drop it from DOCKER_B_FILES"


def _host_names(group: str) -> set[str]:
    """The simulated-host names (molecule platforms, PREFIX/HOST constants) a group starts."""
    names = set()
    for scenario in scenarios():
        if scope(f"{MOLECULE}[{scenario}]") == group:
            config = yaml.safe_load((REPO / "molecule" / scenario / "molecule.yml").read_text())
            names |= {p["name"] for p in config.get("platforms", [])}
    for path in sorted((REPO / "tests" / "integration").glob("test_*.py")):
        rel = path.relative_to(REPO).as_posix()
        marked = docker_tests(path)
        if not marked or rel.endswith("/test_molecule.py"):
            continue
        first = next(iter(marked)) if isinstance(marked, set) else "test_x"
        if scope(f"{rel}::{first}") == group:
            text = path.read_text(encoding="utf-8")
            names |= set(re.findall(r'^(?:PREFIX|HOST) = "([^"]+)"', text, re.M))
    return names


def test_the_two_groups_start_no_simulated_host_of_the_same_name() -> None:
    a, b = _host_names("docker"), _host_names("docker-b")
    assert a and b
    clashes = {x for x in a for y in b if x.startswith(y) or y.startswith(x)}
    assert not clashes, f"both Docker groups start hosts named {sorted(clashes)}"


def test_every_scenario_writes_its_reports_into_its_own_directory() -> None:
    # The default report directory is the checkout's reports/, which both groups would share.
    base = yaml.safe_load((REPO / "molecule" / "_shared" / "base.yml").read_text())
    value = base["provisioner"]["inventory"]["group_vars"]["all"]["ascend_report_dir"]
    assert "MOLECULE_EPHEMERAL_DIRECTORY" in value
