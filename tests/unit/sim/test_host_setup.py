"""host_setup materialises a simulated host into a temporary root."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from ascend_deploy.host.versions import read_versions
from ascend_sim import host_setup
from ascend_sim.state import PRESETS_DIR, load_preset


def setup_preset(tmp_path, name: str):
    root = tmp_path / "root"
    root.mkdir()
    summary = host_setup.setup(str(PRESETS_DIR / f"{name}.json"), str(root))
    return root, summary


def test_healthy_preset_tree_and_versions(tmp_path):
    root, summary = setup_preset(tmp_path, "a2-910b3-8x64g")
    assert summary["devices"] == 11
    versions = read_versions(root=str(root))
    assert versions["driver"]["version"] == "26.1.0"
    assert versions["firmware"]["version"] == "7.8.0.7.220"
    assert (versions["cann"]["version"], versions["cann"]["layout"]) == ("9.1.0", "cann")
    assert versions["cann"]["install_path"] == "/usr/local/Ascend/cann-9.1.0/aarch64-linux"
    assert {c["id"]: c["status"] for c in versions["checks"]} == {
        "versions.install-status": "ok",
        "versions.driver-firmware": "ok",
        "versions.driver-cann": "ok",
    }
    assert os.readlink(root / "usr/local/Ascend/cann") == "cann-9.1.0"
    copy = json.loads((root / "usr/local/Ascend/driver/lib64/.ascend-sim/state.json").read_text())
    assert copy == load_preset("a2-910b3-8x64g")
    assert (root / "usr/local/Ascend/driver/lib64/driver/libascend_hal.so").is_file()
    registry = root / "usr/local/dcmi/.ascend-sim/procs"
    assert registry.is_dir() and stat.S_IMODE(registry.stat().st_mode) == 0o1777
    assert "Driver_Install_Status=complete" in (root / "etc/ascend_install.info").read_text()
    assert "HwHiAiUser:x:" in (root / "etc/passwd").read_text()
    assert (root / "etc/group").read_text().startswith("HwHiAiUser:x:")


def test_old_driver_preset_uses_toolkit_layout(tmp_path):
    root, _ = setup_preset(tmp_path, "a2-old-driver")
    versions = read_versions(root=str(root))
    assert versions["driver"]["version"] == "24.1.rc3"
    assert versions["driver"]["compatible_version_fw"] == [["7.0.0", "7.5.99"]]
    assert (versions["cann"]["version"], versions["cann"]["layout"]) == (
        "8.2.RC1",
        "ascend-toolkit",
    )
    assert os.readlink(root / "usr/local/Ascend/ascend-toolkit/latest") == "8.2.RC1"
    text = (root / "usr/local/Ascend/driver/version.info").read_text()
    assert text.splitlines()[0] == "Version=24.1.rc3"
    assert "Innerversion=V100R001C19SPC001B124" in text


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_device_nodes_are_character_devices_when_permitted(tmp_path):
    root, summary = setup_preset(tmp_path, "a3-ascend910-16chip")
    assert summary["device_kind"] == "character devices"
    st = (root / "dev/davinci15").stat()
    assert stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 240 and os.minor(st.st_rdev) == 15
    assert not (root / "dev/davinci16").exists()
    for name, major in host_setup.MANAGEMENT_NODES.items():
        st = (root / "dev" / name).stat()
        assert stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == major


def test_placeholder_files_when_mknod_is_refused(tmp_path, monkeypatch):
    def refuse(*_args, **_kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "mknod", refuse)
    root, summary = setup_preset(tmp_path, "a2-910b4-8x32g")
    assert summary["device_kind"].startswith("regular placeholder files")
    nodes = sorted(p.name for p in (root / "dev").iterdir())
    assert nodes == sorted([*(f"davinci{i}" for i in range(8)), "davinci_manager", "devmm_svm",
                            "hisi_hdc"])  # fmt: skip
    assert all((root / "dev" / n).is_file() for n in nodes)


def test_rerun_is_idempotent(tmp_path):
    root, _ = setup_preset(tmp_path, "a2-card3-alarm")
    again = host_setup.setup(str(PRESETS_DIR / "a2-card3-alarm.json"), str(root))
    assert again["user"] == "exists"
    lines = (root / "etc/passwd").read_text().splitlines()
    assert [line.split(":")[0] for line in lines] == ["HwHiAiUser"]


def run_main(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ascend_sim.host_setup", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_cli(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    done = run_main("--state", str(PRESETS_DIR / "310p3-duo-2x.json"), "--root", str(root))
    assert done.returncode == 0, done.stderr
    assert "driver 25.3.rc1" in done.stdout and "4 device nodes" not in done.stdout
    assert "7 device nodes" in done.stdout  # 4 chips + 3 management nodes
    bad = tmp_path / "bad.json"
    bad.write_text('{"card": {"count": -1}}')
    done = run_main("--state", str(bad), "--root", str(root))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"{bad}: card.count must be positive" in done.stderr
