"""The `ascend-deploy` wheel holds the deployment tool only; the simulator stays in src/.

The wheel is built for real (pip's build front end, setuptools) from a copy of the project's
pyproject.toml, README.md and src/, then installed into a fresh virtual environment: its command
runs there, and ascend_sim is not importable from it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow


def clean_env() -> dict[str, str]:
    """This environment without PYTHONPATH: make exports src/, whose editable-install metadata
    would make pip take the package as installed (and skip it), and which holds ascend_sim."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    project = work / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, project / name)
    # a copy, so no stale build/ directory of the checkout can add files to the wheel
    shutil.copytree(REPO / "src", project / "src", ignore=shutil.ignore_patterns("__pycache__"))
    out = work / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(project), "-w", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(),
    )
    assert done.returncode == 0, done.stderr
    (whl,) = out.glob("ascend_deploy-*.whl")
    return whl


def test_the_wheel_ships_ascend_deploy_and_its_data_but_not_the_simulator(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"ascend_deploy", f"{wheel.name.split('-py3')[0]}.dist-info"}, sorted(tops)
    assert not [n for n in names if "ascend_sim" in n]
    for needed in (
        "ascend_deploy/cli.py",
        "ascend_deploy/verification/checks/readiness.py",
        "ascend_deploy/data/verify_suite.yaml",
        "ascend_deploy/data/compat_matrix.json",
    ):
        assert needed in names


def test_the_installed_wheel_runs_without_the_simulator(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False, system_site_packages=False)
    py = env_dir / "bin" / "python"
    done = subprocess.run(  # this environment's pip installs into the new one
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(py),
            "install",
            "-q",
            "--no-deps",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(),
    )
    assert done.returncode == 0, done.stderr
    run = subprocess.run(
        [str(env_dir / "bin" / "ascend-deploy"), "verify", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        env=clean_env(),
    )
    assert run.returncode == 0 and "--url" in run.stdout, run.stderr
    probe = "import importlib.util as u; print(u.find_spec('ascend_sim'))"
    out = subprocess.run(
        [str(py), "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=clean_env()
    )
    assert out.stdout.strip() == "None", out
