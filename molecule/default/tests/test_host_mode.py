"""Host mode on a host that never had vllm-ascend installed (issue: preflight order).

molecule-default-a2 serves in container mode, so its own Python has no torch, torch_npu, vllm or
vllm-ascend and there is no venv: a fresh host for host mode. ``deploy.yml --check -e
ascend_runtime_mode=host`` must pass preflight (the packages are the runtime role's to install)
and say what it would install; ``deploy.yml --tags preflight,runtime`` in host mode then installs
the matched set from a wheelhouse the controller built (``python -m ascend_sim.wheelhouse``: the
emulated packages and a pip wheel, since the host's Python has no ensurepip) and checks the
venv against the matrix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_fast_path import EPHEMERAL, REPO, deploy

VENV = "/opt/vllm-ascend/venv"
WHEELHOUSE = EPHEMERAL / "wheelhouse"


@pytest.fixture(scope="module")
def runs(host) -> dict:
    assert not host.file(VENV).exists, "the host is not fresh for host mode"
    assert (
        host.run("python3 -c 'import ensurepip'").rc != 0
    )  # no python3-venv: pip from the wheelhouse
    built = subprocess.run(
        [sys.executable, "-m", "ascend_sim.wheelhouse", "--out", str(WHEELHOUSE), "--json"],
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    extra = ("-e", "ascend_runtime_mode=host", "-e", f"ascend_runtime_wheelhouse_src={WHEELHOUSE}")
    out = {"wheels": json.loads(built.stdout)}
    out["check"] = deploy("host-check", "--check", *extra)
    out["check_left_venv"] = host.file(VENV).exists
    out["install"] = deploy("host-install", "--tags", "preflight,runtime", *extra)
    return out


def test_check_mode_passes_preflight_and_says_what_it_would_install(runs):
    run = runs["check"]
    assert run["rc"] == 0, run["out"][-3000:]
    assert "failed preflight" not in run["out"]
    assert "TASK [ascend_vllm.serving.npu_preflight : Assert the host can serve" in run["out"]
    assert f"would create {VENV} and install " in run["out"]
    assert f"torch-npu=={runs['wheels']['row']['torch_npu']}" in run["out"]
    assert not runs["check_left_venv"], "--check created the venv"


def test_host_mode_installs_the_matched_set_from_the_wheelhouse(runs, host):
    run = runs["install"]
    assert run["rc"] == 0, run["out"][-3000:]
    assert "failed preflight" not in run["out"]
    assert f"{VENV}: vllm-ascend {runs['wheels']['row']['vllm_ascend'].lstrip('v')}" in run["out"]
    assert "match the matrix" in run["out"]
    row = runs["wheels"]["row"]
    probe = (
        "import importlib.metadata as m, torch; "
        "print(m.version('vllm-ascend'), m.version('vllm'), m.version('torch'), "
        "m.version('torch-npu'), torch.npu.device_count())"
    )
    got = host.check_output(f'{VENV}/bin/python -c "{probe}"').split()
    want = [row["vllm_ascend"].lstrip("v"), row["vllm"].lstrip("v"), row["torch"], row["torch_npu"]]
    assert got[:4] == want
    assert int(got[4]) >= 1  # the emulated torch_npu sees the simulated host's NPUs
    # The host's own Python is untouched.
    assert host.run("python3 -c 'import vllm_ascend'").rc != 0
    assert Path(WHEELHOUSE).is_dir()
