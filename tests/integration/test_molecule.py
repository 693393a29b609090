"""Run the molecule scenarios on simulated Ascend hosts (Docker-in-Docker).

Each scenario is a full `molecule test` (create, converge, idempotence where configured,
verify with testinfra, destroy). MOLECULE_SCENARIOS (space separated) picks a subset.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Order: the quickest proof of the simulator first, then the bundle, the fleet and the planted
# faults (MOLECULE_SCENARIOS picks a subset).
DEFAULT = [
    "sim", "bootstrap", "default", "rollback", "fleet", "pitfalls", "capacity", "hardware",
    "engine",
]  # fmt: skip
SCENARIOS = os.environ.get("MOLECULE_SCENARIOS", " ".join(DEFAULT)).split()

pytestmark = [pytest.mark.molecule, pytest.mark.docker, pytest.mark.slow]


def _docker_ready() -> bool:
    if not shutil.which("docker"):
        return False
    probe = subprocess.run(
        ["docker", "image", "inspect", "ascend-sim/host:latest"], capture_output=True, check=False
    )
    return probe.returncode == 0


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario: str, tmp_path: Path) -> None:
    if not _docker_ready():
        pytest.fail("no Docker engine or no ascend-sim/host image: run `make images` first")
    bindir = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '')}")
    log = tmp_path / f"molecule-{scenario}.log"
    started = time.monotonic()
    with log.open("w") as fh:
        proc = subprocess.run(
            [str(bindir / "molecule"), "-c", "molecule/_shared/base.yml", "test", "-s", scenario],
            cwd=REPO,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            check=False,
        )
    took = time.monotonic() - started
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-80:])
    print(f"molecule {scenario}: rc={proc.returncode} in {took:.0f} s")
    assert proc.returncode == 0, (
        f"molecule test -s {scenario} failed (rc {proc.returncode}):\n{tail}"
    )
    # Green only when the verifier asserted something: testinfra's last summary line must report
    # passed tests and neither failures nor errors (a wrong outputs path must not pass).
    assert_verified(log.read_text(errors="replace"), scenario)


def assert_verified(log: str, scenario: str) -> None:
    """The verifier's pytest summary (``== 12 passed, 3 skipped in 4.1s ==``) shows a real run."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", log)  # molecule's console colours and frames
    summaries = re.findall(r"={3,} ((?:\d+ \w+(?:, )?)+) in [\d.]+s", plain)
    assert summaries, f"molecule {scenario}: no verifier (pytest) summary in the log"
    counts = dict((kind, int(n)) for n, kind in re.findall(r"(\d+) (\w+)", summaries[-1]))
    assert counts.get("passed", 0) > 0, f"molecule {scenario}: no test passed: {summaries[-1]}"
    bad = {k: v for k, v in counts.items() if k in ("failed", "error", "errors") and v}
    assert not bad, f"molecule {scenario}: {summaries[-1]}"
