"""ascend_sim.wheelhouse: the emulated vLLM-Ascend stack as wheels pip installs offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

from conftest import REPO

from ascend_deploy.planning import compat


def test_wheels_install_offline_and_report_the_rows_versions(tmp_path):
    wh, target = tmp_path / "wh", tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "ascend_sim.wheelhouse", "--out", str(wh), "--json"],
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    row = compat.resolve("9.1.0", "a2")
    pins = [row["pins"][k] for k in ("torch", "torch_npu", "vllm", "vllm_ascend")]
    assert any(n.startswith("pip-") for n in json.loads(built.stdout)["wheels"])
    for name in os.listdir(wh):  # every RECORD line names a file of the wheel with its hash
        with zipfile.ZipFile(wh / name) as zf:
            record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
            listed = {line.split(",")[0] for line in zf.read(record).decode().splitlines()}
            assert listed == set(zf.namelist()), name
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--find-links",
            str(wh),
            "--target",
            str(target),
            *pins,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    probe = (
        "import importlib.metadata as m; "
        "print(*(m.version(d) for d in ('torch', 'torch-npu', 'vllm', 'vllm-ascend')))"
    )
    got = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONPATH": str(target)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert got == [p.split("==")[1] for p in pins]
    assert (target / "ascend_sim_host.pth").read_text() == "/opt/ascend-sim/src\n"
