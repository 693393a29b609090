"""The two-worker split of ``make test``: simulated-host tests in one group, engine-image tests in
another, everything else free (tests/conftest.py ``xdist_scope``), on the repository's own files."""

from __future__ import annotations

from conftest import ENGINE_ONLY_FILES, REPO, xdist_scope


def scope(nodeid: str) -> str:
    return xdist_scope(REPO, nodeid, {})


def test_molecule_and_simulated_host_tests_share_one_group() -> None:
    assert scope("tests/integration/test_molecule.py::test_molecule_scenario[default]") == "docker"
    nodeid = "tests/integration/test_collection.py::test_deploy_by_fqcn_from_outside_the_repository"
    assert scope(nodeid) == "docker"


def test_engine_image_tests_are_their_own_group() -> None:
    nodeid = "tests/integration/test_engine_image.py::" + (
        "test_built_image_has_real_torch_vllm_and_the_emulated_ascend_layer"
    )
    assert scope(nodeid) == "engine-image"
    argv = "tests/integration/test_vllm_argv_conformance.py::"
    assert scope(argv + "test_every_planned_argv_is_accepted_by_the_paired_vllm[v0.23.0]") == (
        "engine-image"
    )
    unmarked = argv + "test_paired_version_or_the_nearest_on_pypi[x]"
    assert scope(unmarked) == unmarked  # no Docker mark: free


def test_unmarked_tests_are_free() -> None:
    nodeid = "tests/unit/test_layout.py::test_module_basenames_are_unique"
    assert scope(nodeid) == nodeid


def test_engine_only_files_never_start_a_simulated_host() -> None:
    for name in ENGINE_ONLY_FILES:
        text = (REPO / name).read_text(encoding="utf-8")
        for marker in ("ascend_sim.fleet", "sim_host", "ANSIBLE_PLAYBOOK", "run_playbook"):
            assert marker not in text, f"{name} uses {marker}: it belongs to the docker group"
