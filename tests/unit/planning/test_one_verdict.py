"""``versions`` and ``preflight`` give one verdict per check id, and both exit 1 on a FAIL.

Every host layout of tests/data/hosts (trees of real version files) through both commands of
the CLI. Before, ``versions`` judged driver-CANN by the observed innerversion rule
(``OK versions.driver-cann`` on a2-cann-8.5) where ``preflight`` used the published pairings
(FAIL), and ``versions`` exited 0 on fw-mismatch's FAIL.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
from conftest import DATA, SAMPLES

from ascend_deploy.cli import main

_spec = importlib.util.spec_from_file_location("build_tree", DATA / "hosts" / "build_tree.py")
build_tree = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_tree)

LAYOUTS = sorted(p.stem for p in (DATA / "hosts").glob("*.json"))
NPU_SMI = SAMPLES / "npu-smi-info_910B4_32GB_24.1.1_partial_7.txt"


def _run(capsys, *argv: str) -> tuple[int, dict]:
    rc = main([*argv, "--json"])
    return rc, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_versions_and_preflight_agree_on_every_check_id(tmp_path, capsys, layout):
    root = str(build_tree.build(layout, tmp_path / layout))
    rc_v, versions = _run(capsys, "versions", "--root", root)
    rc_p, preflight = _run(capsys, "preflight", "--root", root, "--npu-smi-file", str(NPU_SMI))
    by_id = {c["id"]: c for c in preflight["checks"]}
    for check in versions["checks"]:
        assert check["id"] in by_id, (layout, check["id"])
        assert (check["status"], check["evidence"]) == (
            by_id[check["id"]]["status"],
            by_id[check["id"]]["evidence"],
        ), (layout, check["id"])
    failed = any(c["status"] == "fail" for c in versions["checks"])
    assert rc_v == (1 if failed else 0), (layout, versions["checks"])
    if failed:
        assert rc_p == 1


def test_the_reviewed_cases(tmp_path, capsys):
    cann85 = str(build_tree.build("a2-cann-8.5", tmp_path / "cann85"))
    rc, versions = _run(capsys, "versions", "--root", cann85)
    (pairing,) = [c for c in versions["checks"] if c["id"] == "versions.driver-cann"]
    assert pairing["status"] == "fail" and rc == 1
    assert "driver 24.1.rc2.2 is older than HDK" in pairing["evidence"]
    mismatch = str(build_tree.build("fw-mismatch", tmp_path / "fw"))
    assert main(["versions", "--root", mismatch]) == 1
    assert "FAIL  versions.driver-firmware" in capsys.readouterr().out
