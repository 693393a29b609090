"""The emulator image's shims and version files (docker/vllm-ascend), and the built image.

The shim generator runs exactly as in the Dockerfile, into a temporary directory; a plain
python3 with only the shims and ``src`` on its path then imports ``vllm``, ``vllm_ascend``,
``torch`` and ``torch_npu`` like in the image. The Docker test runs the real image when
it has been built (``docker/build-images.sh``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import REPO

from ascend_sim.vllm_emulator.sandbox import make_root, preset_state

MAKE_SHIMS = REPO / "docker" / "vllm-ascend" / "shims" / "make_shims.py"
ROWS = {
    "v0.23.0": ["0.23.0", "0.23.0", "2.10.0", "2.10.0.post4", "9.1.0"],
    "v0.11.0": ["0.11.0", "0.11.0", "2.7.1", "2.7.1.post1", "8.3.RC2"],
}
PROBE = (
    "import json, importlib.metadata as m, vllm, vllm_ascend, torch, torch_npu;"
    "print(json.dumps({'mods': [vllm.__version__, vllm_ascend.__version__, torch.__version__,"
    " torch_npu.__version__], 'dists': [m.version(n) for n in ('vllm', 'vllm-ascend', 'torch',"
    " 'torch-npu')], 'npu': torch.npu.is_available(), 'count': torch.npu.device_count(),"
    " 'plugins': [e.value for e in m.entry_points(group='vllm.platform_plugins')]}))"
)


def make(tmp_path, row: str):
    va, vl, t, tn, cann = ROWS[row]
    site, root = tmp_path / "site", tmp_path / "root"
    subprocess.run(
        [
            sys.executable,
            str(MAKE_SHIMS),
            "--site",
            str(site),
            "--root",
            str(root),
            "--vllm-ascend",
            va,
            "--vllm",
            vl,
            "--torch",
            t,
            "--torch-npu",
            tn,
            "--cann",
            cann,
            "--arch",
            "aarch64",
        ],
        check=True,
    )
    return site, root


def probe(site, sim_root: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND_")}
    env["PYTHONPATH"] = f"{site}{os.pathsep}{REPO / 'src'}"
    if sim_root:
        env["ASCEND_SIM_ROOT"] = sim_root
    out = subprocess.run(
        [sys.executable, "-S", "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


@pytest.mark.parametrize("row", sorted(ROWS))
def test_shims_report_the_row_versions(tmp_path, row):
    site, root = make(tmp_path, row)
    got = probe(site, str(make_root(str(tmp_path / "sim"))))
    va, vl, t, tn, _ = ROWS[row]
    assert got["mods"] == [vl, va, t, tn]
    assert got["dists"] == [vl, va, t, tn]
    assert got["plugins"] == ["vllm_ascend:register"]
    assert (got["npu"], got["count"]) == (True, 8)
    row_json = json.loads((root / "opt/ascend-sim/row.json").read_text())
    assert row_json["vllm_ascend"] == va and row_json["cann"] == ROWS[row][4]
    assert os.access(root / "usr/local/bin/vllm", os.X_OK)


def test_npu_unavailable_without_devices_or_with_old_driver(tmp_path):
    site, _ = make(tmp_path, "v0.23.0")
    assert probe(site, str(tmp_path / "empty"))["npu"] is False
    no_mgmt = make_root(str(tmp_path / "nomgmt"), management_nodes=False)
    assert probe(site, no_mgmt)["npu"] is False
    site13 = tmp_path / "s13"
    subprocess.run(
        [
            sys.executable,
            str(MAKE_SHIMS),
            "--site",
            str(site13),
            "--root",
            str(tmp_path / "r13"),
            "--vllm-ascend",
            "0.13.0",
            "--vllm",
            "0.13.0",
            "--torch",
            "2.8.0",
            "--torch-npu",
            "2.8.0.post2",
            "--cann",
            "8.5.0",
        ],
        check=True,
    )
    # Decided by the version files: driver 24.1.rc3 (C19) lists C13-C19, CANN 8.5.0 (C25)
    # lists C21-C25; HDK 25.5.2's driver lists C25.
    old = make_root(str(tmp_path / "old"), state=preset_state("a2-old-driver"))
    assert probe(site13, old)["npu"] is False
    new = make_root(str(tmp_path / "new"), state=preset_state("a2-910b3-8x64g-hdk25"))
    assert probe(site13, new)["npu"] is True


def test_cann_layout_follows_the_release(tmp_path):
    _, root = make(tmp_path / "a", "v0.11.0")
    info = root / "usr/local/Ascend/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info"
    assert "version=8.3.RC2\n" in info.read_text()
    _, root = make(tmp_path / "b", "v0.23.0")
    info = root / "usr/local/Ascend/cann/aarch64-linux/ascend_toolkit_install.info"
    text = info.read_text()
    assert "version=9.1.0\n" in text and "path=/usr/local/Ascend/cann-9.1.0/aarch64-linux" in text


def test_empty_build_argument_is_refused(tmp_path):
    res = subprocess.run(
        [
            sys.executable,
            str(MAKE_SHIMS),
            "--site",
            str(tmp_path / "s"),
            "--vllm-ascend",
            "",
            "--vllm",
            "0.23.0",
            "--torch",
            "2.10.0",
            "--torch-npu",
            "2.10.0",
            "--cann",
            "9.1.0",
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2
    assert "--vllm-ascend is empty (build argument not set?)" in res.stderr


def _image(tag: str) -> bool:
    if not shutil.which("docker"):
        return False
    res = subprocess.run(["docker", "image", "inspect", tag], capture_output=True)
    return res.returncode == 0


@pytest.mark.docker
@pytest.mark.parametrize("row", sorted(ROWS))
def test_built_image_reports_row_and_sees_no_npu_without_devices(row):
    tag = f"quay.io/ascend/vllm-ascend:{row}"
    if not _image(tag):
        pytest.skip(f"{tag} not built (docker/build-images.sh)")
    out = subprocess.run(
        ["docker", "run", "--rm", tag, "python3", "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    got = json.loads(out.stdout)
    va, vl, t, tn, _ = ROWS[row]
    assert got["mods"] == [vl, va, t, tn] and got["npu"] is False
    res = subprocess.run(
        ["docker", "run", "--rm", tag, "vllm", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.stdout.strip() == vl
