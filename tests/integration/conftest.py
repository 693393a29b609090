"""Fixtures of the integration tests that need built images."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_sim import images

REPO = Path(__file__).resolve().parents[2]
ENGINE_IMAGE = images.engine_specs(["v0.23.0"])[0].primary


@pytest.fixture(scope="session")
def engine_image() -> str:
    """The real-engine image (docker/vllm-engine), built when absent; never a skip.

    CI has built it by the time these tests run (molecule/engine); elsewhere the build takes
    minutes (``python -m ascend_sim.images build --only engine``). No Docker engine or a failed
    build fails the test that asked for it.
    """
    probe = subprocess.run(["docker", "info"], capture_output=True, text=True, check=False)
    if probe.returncode:
        pytest.fail(f"no Docker engine answers ({probe.stderr.strip()[-300:]}): run make setup")
    inspect = subprocess.run(["docker", "image", "inspect", ENGINE_IMAGE], capture_output=True)
    if inspect.returncode:
        build = subprocess.run(
            [sys.executable, "-m", "ascend_sim.images", "build", "--only", "engine"],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO / "src")},
            capture_output=True,
            text=True,
            check=False,
        )
        assert build.returncode == 0, f"building {ENGINE_IMAGE} failed:\n{build.stderr[-3000:]}"
    return ENGINE_IMAGE
