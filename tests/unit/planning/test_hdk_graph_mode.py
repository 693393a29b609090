"""HDK >= 25.5.1 for the default graph mode (FULL_AND_PIECEWISE) from vllm-ascend v0.21.0rc1
(upstream known issue): compat and preflight warn, with the fix, on an older driver."""

from __future__ import annotations

import importlib.util
import re

import pytest
from conftest import DATA, sample

from ascend_deploy.host import npu_smi
from ascend_deploy.planning import compat
from ascend_deploy.planning.preflight import run_preflight

_spec = importlib.util.spec_from_file_location("build_tree", DATA / "hosts" / "build_tree.py")
build_tree = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_tree)

B4_64 = "npu-smi-info_910B4_anon_busid_10.txt"


def host(tmp_path, driver: str | None = None) -> str:
    """The driver-only layout (real driver_version.info_24.1.rc3_1.txt), or that file with
    its Version lines set to ``driver`` (a synthetic newer or older HDK)."""
    root = build_tree.build("driver-only", tmp_path / "host")
    if driver:
        path = root / "usr/local/Ascend/driver/version.info"
        text = re.sub(r"(?m)^(\s*\d*\s*)Version=.*$", rf"\g<1>Version={driver}", path.read_text())
        path.write_text(text)
    return str(root)


def hdk_check(result):
    return next((c for c in result["checks"] if c["id"] == "versions.hdk-graph"), None)


@pytest.mark.parametrize(
    ("release", "driver", "warns"),
    [
        ("v0.21.0rc1", "25.3.rc1", True),
        ("v0.23.0", "24.1.rc3", True),
        ("v0.20.2rc1", "24.1.rc3", False),  # before the default changed
        ("v0.23.0", "25.5.1", False),
        ("v0.23.0", "25.5.2", False),
        ("v0.23.0", None, False),
        (None, "24.1.rc3", False),
    ],
)
def test_the_rule(release, driver, warns):
    assert (compat.graph_mode_hdk_note(release, driver) is not None) is warns
    assert compat.graph_mode_hdk_note(release, driver, enforce_eager=True) is None


def test_preflight_warns_on_the_real_24_1_rc3_driver(tmp_path):
    info = npu_smi.parse(sample(B4_64), source=B4_64)
    check = hdk_check(run_preflight(host(tmp_path), npu_info=info, vllm_ascend="v0.23.0"))
    assert check is not None and check["status"] == "warn" and check["pitfall"] == 4
    assert "vllm-ascend v0.23.0" in check["evidence"] and "driver 24.1.rc3" in check["evidence"]
    assert "25.5.1" in check["evidence"]
    assert "upgrade the driver and firmware to HDK 25.5.1+" in check["fix"]
    assert "vllm_service_enforce_eager: true" in check["fix"]
    eager = run_preflight(
        host(tmp_path / "e"), npu_info=info, vllm_ascend="v0.23.0", enforce_eager=True
    )
    assert hdk_check(eager) is None
    assert hdk_check(run_preflight(host(tmp_path / "n"), npu_info=info)) is None  # no release


@pytest.mark.parametrize(("driver", "warns"), [("25.3.rc1", True), ("25.5.2", False)])
def test_preflight_on_synthetic_drivers(tmp_path, driver, warns):
    info = npu_smi.parse(sample(B4_64), source=B4_64)
    result = run_preflight(host(tmp_path, driver), npu_info=info, vllm_ascend="v0.21.0rc1")
    assert result["versions"]["driver"]["version"] == driver
    assert (hdk_check(result) is not None) is warns


def test_compat_check_and_a_pin_checked_against_the_driver():
    installed = {
        "packages": {"vllm_ascend": "0.23.0"},
        "driver": {"version": "24.1.rc3"},
    }
    findings = compat.check(installed, "9.1.0", "a2")
    (f,) = [f for f in findings if f["id"] == "compat.hdk-graph"]
    assert f["status"] == "warn" and "driver 24.1.rc3" in f["evidence"]
    assert "HDK 25.5.1+" in f["fix"]
    newer = compat.check({**installed, "driver": {"version": "25.5.2"}}, "9.1.0", "a2")
    assert not [f for f in newer if f["id"] == "compat.hdk-graph"]
    row = compat.check_pin_against_driver(compat.resolve_pinned("v0.23.0", "a2"), "25.3.rc1")
    assert "25.5.1" in row["hdk_graph_note"] and row["hdk_graph_note"] in row["notes"]
