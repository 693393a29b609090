"""preflight: host trees from real version files, real npu-smi samples, real processes."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys

import pytest
from conftest import DATA, SAMPLES, sample, spawn_sleeper, start_http_server

from ascend_deploy.cli import main
from ascend_deploy.errors import InputError
from ascend_deploy.host import npu_smi
from ascend_deploy.planning import compat
from ascend_deploy.planning.preflight import hardware_of, render_table, run_preflight
from ascend_deploy.planning.rules import load_rules

_spec = importlib.util.spec_from_file_location("build_tree", DATA / "hosts" / "build_tree.py")
build_tree = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_tree)

B4_64 = "npu-smi-info_910B4_anon_busid_10.txt"  # 1 x 910B4 64 GB, driver 25.0.rc1.1


def npu(name):
    return npu_smi.parse(sample(name), source=name)


def host(tmp_path, layout):
    return str(build_tree.build(layout, tmp_path / layout))


def checks_of(result):
    return {c["id"]: c for c in result["checks"]}


def test_consistent_host_passes(tmp_path):
    result = run_preflight(host(tmp_path, "a2-toolkit-8.2"), npu_info=npu(B4_64))
    c = checks_of(result)
    assert result["ok"] is True and result["hardware"] == "a2"
    for cid in (
        "npu.visible",
        "npu.health.0.0",
        "devices.nodes",
        "versions.driver-firmware",
        "versions.driver-cann",
        "versions.nnal-cann",
        "compat.runtime",
        "npu.foreign-memory",
    ):
        assert c[cid]["status"] == "ok", c[cid]
    assert "hiascend MindIE 2.1.RC1 release note" in c["versions.driver-cann"]["evidence"]
    assert "quay.io/ascend/vllm-ascend:v0.9.1" in c["compat.runtime"]["evidence"]
    # the sample's banner (25.0.rc1.1) is not the tree's driver (24.1.rc3)
    assert c["versions.driver-loaded"]["status"] == "warn"
    for check in result["checks"]:
        assert set(check) == {"id", "pitfall", "status", "evidence", "fix"}
        assert check["status"] in ("ok", "warn", "fail")


def test_driver_too_old_for_cann_85_fails(tmp_path):
    result = run_preflight(host(tmp_path, "a2-cann-8.5"), npu_info=npu(B4_64))
    c = checks_of(result)
    assert result["ok"] is False
    assert c["versions.driver-cann"]["status"] == "fail"
    assert "24.1.rc2.2" in c["versions.driver-cann"]["evidence"]
    assert "CANN 8.5.0 release note" in c["versions.driver-cann"]["evidence"]
    assert c["versions.nnal"]["status"] == "warn"
    assert "v0.13.0" in c["compat.runtime"]["evidence"]


def test_container_host_picks_an_image_the_driver_supports(tmp_path):
    result = run_preflight(host(tmp_path, "driver-only"), npu_info=npu(B4_64))
    c = checks_of(result)
    assert c["compat.runtime"]["status"] == "ok"
    # newest final image whose CANN has a published pairing with driver 24.1.rc3
    assert "vllm-ascend:v0.9.1 (CANN 8.2.RC1)" in c["compat.runtime"]["evidence"]
    assert "versions.nnal" not in c


def test_driver_only_host_too_old_for_every_image_fails_with_the_upgrade(tmp_path):
    """Issue 16 §2: a driver-only host with HDK 23.x was given v0.11.0 (CANN 8.3.RC2)."""
    result = run_preflight(host(tmp_path, "driver-only-23"), npu_info=npu(B4_64))
    c = checks_of(result)
    assert result["ok"] is False
    assert c["compat.runtime"]["status"] == "fail"
    assert "driver 23.0.7 is older than every HDK" in c["compat.runtime"]["evidence"]
    assert "26.1.0 (published for CANN 9.1.0)" in c["compat.runtime"]["fix"]


def test_unpublished_host_pairing_warns_with_the_note_even_when_the_lists_agree():
    """Issue 11 F: HDK 25.5 with CANN 9.1 was accepted silently (the innerversion rule said ok)."""
    from ascend_deploy.planning.preflight import driver_cann_check, finding

    local = finding("versions.driver-cann", 1, "ok", "CANN 9.1.0 (C31) is in driver 25.5.1 list")
    f = driver_cann_check({"version": "25.5.1"}, "9.1.0", local)
    assert f["status"] == "warn"
    assert "driver 25.5.1 with CANN 9.1.0: pairing not published" in f["evidence"]
    assert "HDK 26.1.0" in f["evidence"] and local["evidence"] in f["evidence"]
    old = driver_cann_check({"version": "23.0.7"}, "8.3.RC2", None)
    assert old["status"] == "fail" and "older than HDK 24.1.rc2" in old["evidence"]
    assert "compat resolve --driver 23.0.7" in old["fix"]


def test_unresolvable_cann_and_loaded_driver_match(tmp_path):
    result = run_preflight(host(tmp_path, "modelarts-7.0"), npu_info=npu(B4_64))
    c = checks_of(result)
    assert c["compat.runtime"]["status"] == "fail"
    assert "CANN 7.0.T10" in c["compat.runtime"]["evidence"]
    mismatch = run_preflight(
        host(tmp_path, "fw-mismatch"), npu_info=npu("npu-smi-info_910_elided_7.txt"), hardware="a2"
    )
    m = checks_of(mismatch)
    assert m["versions.driver-firmware"]["status"] == "fail"
    assert m["versions.driver-loaded"]["status"] == "ok"  # both say 24.1.rc1


def test_empty_host(tmp_path):
    result = run_preflight(str(tmp_path), npu_info=npu(B4_64))
    c = checks_of(result)
    assert c["devices.nodes"]["status"] == "fail"
    assert "davinci_manager" in c["devices.nodes"]["evidence"]
    assert c["versions.driver"]["status"] == "fail"
    assert c["compat.runtime"]["status"] == "fail"


@pytest.mark.skipif(shutil.which("npu-smi") is not None, reason="this host has npu-smi")
def test_without_npu_smi_the_npus_are_not_visible(tmp_path):
    result = run_preflight(host(tmp_path, "a2-toolkit-8.2"))
    c = checks_of(result)
    assert c["npu.visible"]["status"] == "fail"
    assert "npu-smi: not found" in c["npu.visible"]["evidence"]
    assert result["ok"] is False


def test_health_warning_and_unknown_product(tmp_path):
    result = run_preflight(
        host(tmp_path, "a2-toolkit-8.2"), npu_info=npu("npu-smi-info_with_warning_910_doc_2.txt")
    )
    c = checks_of(result)
    assert c["npu.health.0.0"]["status"] == "warn"
    assert c["npu.health.7.0"]["status"] == "ok"
    assert c["npu.hardware"]["status"] == "warn"  # names anonymised as xxx in the doc


def test_first_generation_910_is_unsupported(tmp_path):
    result = run_preflight(
        host(tmp_path, "a2-toolkit-8.2"), npu_info=npu("npu-smi-info_910A_8card_1.txt")
    )
    assert checks_of(result)["npu.supported"]["status"] == "fail"


@pytest.mark.parametrize(
    "name, hardware",
    [
        ("npu-smi-info_A3_25.2.1_partial_4.txt", "a3"),
        ("npu-smi-info_310P3_duo_25.2.0_partial_4.txt", "310p"),
        (B4_64, "a2"),
        ("npu-smi-info_910A_8card_1.txt", None),
    ],
)
def test_hardware_from_chip_names(name, hardware):
    assert hardware_of(npu(name)["chips"]) == hardware


def test_hbm_used_without_a_listed_process_warns(tmp_path):
    result = run_preflight(
        host(tmp_path, "a2-toolkit-8.2"),
        npu_info=npu("npu-smi-info_910B4_32GB_24.1.1_partial_7.txt"),
    )
    check = checks_of(result)["npu.foreign-memory"]
    assert check["status"] == "warn" and "26838/32768" in check["evidence"]


def test_foreign_npu_holder_fails_and_our_labelled_one_is_ok(tmp_path):
    info = npu("npu-smi-info_with_processes_910B1_elided_3.txt")
    sleeper = spawn_sleeper()
    try:
        info["processes"] = info["processes"][:1]
        info["processes"][0]["pid"] = sleeper.pid
        root = host(tmp_path, "a2-toolkit-8.2")
        check = checks_of(run_preflight(root, npu_info=info))["npu.foreign-memory"]
        assert check["status"] == "fail" and check["pitfall"] == 3
        assert f"pid {sleeper.pid}" in check["evidence"] and "59618 MB" in check["evidence"]
        assert "--kill-foreign" in check["fix"]
        # A command word equal to the service name does not make it ours (issue 11 E).
        named = checks_of(run_preflight(root, npu_info=info, service="sleep", containers={}))
        assert named["npu.foreign-memory"]["status"] == "fail"
        # The main process of a container labelled with the service is ours: never a kill hint.
        labelled = {"c" * 64: {"name": "qwen3-0", "service": "qwen3", "pid": sleeper.pid}}
        ours = checks_of(run_preflight(root, npu_info=info, service="qwen3", containers=labelled))
        assert ours["npu.foreign-memory"]["status"] == "ok"
        assert "qwen3-0" in ours["npu.foreign-memory"]["evidence"]
        assert "kill" not in ours["npu.foreign-memory"]["fix"]
    finally:
        sleeper.kill()
        sleeper.wait(timeout=10)


def test_port_held_by_a_foreign_process(tmp_path):
    server, port = start_http_server()
    try:
        root = host(tmp_path, "a2-toolkit-8.2")
        c = checks_of(run_preflight(root, port=port, npu_info=npu(B4_64)))
        assert c["port.free"]["status"] == "fail" and c["port.free"]["pitfall"] == 3
        assert f"pid {server.pid}" in c["port.free"]["evidence"]
        named = checks_of(
            run_preflight(
                root, port=port, npu_info=npu(B4_64), service="http.server", containers={}
            )
        )
        assert named["port.free"]["status"] == "fail"
        labelled = {"d" * 64: {"name": "vllm-0", "service": "vllm", "pid": server.pid}}
        ours = checks_of(
            run_preflight(root, port=port, npu_info=npu(B4_64), service="vllm", containers=labelled)
        )
        assert ours["port.free"]["status"] == "ok" and "vllm-0" in ours["port.free"]["evidence"]
        assert "--kill" not in ours["port.free"]["fix"]
    finally:
        server.kill()
        server.wait(timeout=10)
    free = checks_of(run_preflight(root, port=port, npu_info=npu(B4_64)))
    assert free["port.free"]["status"] == "ok"


def test_installed_packages_are_checked_against_the_matrix(tmp_path, monkeypatch):
    site = tmp_path / "site"
    for dist, name, version in [
        ("vllm_ascend-0.9.1.dist-info", "vllm-ascend", "0.9.1"),
        ("vllm-0.9.1.dist-info", "vllm", "0.9.1"),
    ]:
        (site / dist).mkdir(parents=True)
        (site / dist / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        )
    monkeypatch.setenv("PYTHONPATH", str(site))
    result = run_preflight(
        host(tmp_path, "a2-toolkit-8.2"), npu_info=npu(B4_64), python=sys.executable
    )
    c = checks_of(result)
    assert c["compat.vllm_ascend"]["status"] == "ok"
    assert c["compat.vllm"]["status"] == "ok"
    assert c["compat.torch"]["status"] == "fail"  # this venv's CPU torch is not 2.5.1
    assert c["compat.torch_npu"]["status"] == "fail"
    assert "torch-npu==2.5.1.post1" in c["compat.install-set"]["fix"]
    assert result["ok"] is False


def test_model_plan_fits_and_fp8_needs_conversion(tmp_path, qwen3_checkpoints):
    result = run_preflight(
        host(tmp_path, "a2-toolkit-8.2"), model_dir=qwen3_checkpoints["4b-fp8"], npu_info=npu(B4_64)
    )
    c = checks_of(result)
    assert c["model.plan"]["status"] == "ok" and "TP 1" in c["model.plan"]["evidence"]
    assert c["model.fp8"]["status"] == "warn" and c["model.fp8"]["pitfall"] == 2
    assert "ascend-deploy convert" in c["model.fp8"]["fix"]


def test_model_that_does_not_fit_fails(tmp_path, qwen3_checkpoints):
    result = run_preflight(
        host(tmp_path, "a2-toolkit-8.2"),
        model_dir=qwen3_checkpoints["32b-bf16"],
        npu_info=npu(B4_64),
    )
    plans = [f for f in result["checks"] if f["id"].startswith("model.plan")]
    assert plans and all(f["status"] == "fail" for f in plans)
    assert plans[0]["pitfall"] == 5
    assert result["ok"] is False


def test_matrix_and_rules_are_arguments(tmp_path, qwen3_checkpoints):
    """The documents a caller passes (the role's controller lookups) are the ones used."""
    matrix = json.loads(json.dumps(compat.read_matrix()))
    for row in matrix["rows"]:
        if row["vllm_ascend"] == "v0.9.1":
            row["vllm_ascend"] = "v0.9.1.post7"
    rules = load_rules()
    del rules["hardware"]["a2"]
    result = run_preflight(
        host(tmp_path, "a2-toolkit-8.2"),
        model_dir=qwen3_checkpoints["4b-fp8"],
        npu_info=npu(B4_64),
        matrix=matrix,
        rules=rules,
    )
    c = checks_of(result)
    assert "quay.io/ascend/vllm-ascend:v0.9.1.post7" in c["compat.runtime"]["evidence"]
    assert c["model.plan"]["status"] == "fail"
    assert "unknown hardware 'a2'; known: a3, a5, 310p" in c["model.plan"]["evidence"]
    shipped = checks_of(
        run_preflight(
            host(tmp_path / "again", "a2-toolkit-8.2"),
            model_dir=qwen3_checkpoints["4b-fp8"],
            npu_info=npu(B4_64),
        )
    )
    assert "vllm-ascend:v0.9.1 " in shipped["compat.runtime"]["evidence"] + " "
    assert shipped["model.plan"]["status"] == "ok"


def test_bad_arguments(tmp_path):
    with pytest.raises(InputError, match="--model-dir"):
        run_preflight(str(tmp_path), model_dir=str(tmp_path / "none"), npu_info=npu(B4_64))
    with pytest.raises(InputError, match="--hardware"):
        run_preflight(str(tmp_path), hardware="h100", npu_info=npu(B4_64))
    with pytest.raises(InputError, match="--port"):
        run_preflight(str(tmp_path), port=-1, npu_info=npu(B4_64))


def test_table_has_every_column():
    checks = [
        {
            "id": "port.free",
            "pitfall": 3,
            "status": "fail",
            "evidence": "port 8000 is held by pid 1 " + "x" * 120,
            "fix": "choose another",
        },
        {"id": "npu.health.0.0", "pitfall": None, "status": "ok", "evidence": "OK", "fix": ""},
    ]
    text = render_table(checks, width=120)
    lines = text.splitlines()
    assert lines[0].split("|")[0].strip() == "CHECK"
    assert [h.strip() for h in lines[0].split("|")] == ["CHECK", "PIT", "STATUS", "EVIDENCE", "FIX"]
    assert "FAIL" in lines[2] and "choose another" in lines[2]
    assert max(len(line) for line in lines) <= 120
    assert any(line.startswith("npu.health.0.0") and "|   - |" in line for line in lines)


# ----------------------------------------------------------------------------- CLI


def test_cli_exit_0_and_table(tmp_path, capsys):
    root = host(tmp_path, "a2-toolkit-8.2")
    assert main(["preflight", "--root", root, "--npu-smi-file", str(SAMPLES / B4_64)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split("|")[0].strip() == "CHECK"
    assert "preflight PASS (a2)" in out


def test_cli_exit_1_json(tmp_path, capsys):
    root = host(tmp_path, "a2-cann-8.5")
    argv = ["preflight", "--root", root, "--npu-smi-file", str(SAMPLES / B4_64), "--json"]
    assert main(argv) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False
    assert any(c["id"] == "versions.driver-cann" and c["status"] == "fail" for c in doc["checks"])


@pytest.mark.parametrize(
    "setup, argv, message",
    [
        ("garbage-driver", [], "version.info"),
        ("none", ["--model-dir", "/nonexistent/model"], "--model-dir is not a directory"),
        ("garbage-npu", [], "npu.txt"),
    ],
)
def test_cli_exit_2_one_line(tmp_path, capsys, setup, argv, message):
    root = tmp_path / "root"
    root.mkdir()
    npu_file = str(SAMPLES / B4_64)
    if setup == "garbage-driver":
        path = root / "usr/local/Ascend/driver/version.info"
        path.parent.mkdir(parents=True)
        path.write_bytes(b"Version=24.1.rc3\n\x00\x00\x00")
    if setup == "garbage-npu":
        npu_file = str(tmp_path / "npu.txt")
        (tmp_path / "npu.txt").write_text("not npu-smi output at all\n")
    rc = main(["preflight", "--root", str(root), "--npu-smi-file", npu_file, *argv])
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("sample_name", "declared", "detected"),
    [
        ("npu-smi-info_A3_25.2.1_partial_4.txt", "a2", "a3"),
        ("npu-smi-info_310P3_no_processes_3.txt", "a2", "310p"),
        (B4_64, "a3", "a2"),
    ],
    ids=["a3-declared-a2", "310p-declared-a2", "a2-declared-a3"],
)
def test_declared_hardware_that_disagrees_with_npu_smi_fails_naming_both(
    tmp_path, sample_name, declared, detected
):
    """issue 21: the family comes from npu-smi; a declaration that disagrees stops the host."""
    result = run_preflight(
        host(tmp_path, "a2-toolkit-8.2"), npu_info=npu(sample_name), hardware=declared
    )
    check = checks_of(result)["npu.hardware"]
    assert result["ok"] is False and check["status"] == "fail"
    assert f"declared hardware {declared}, but npu-smi shows {detected} chips" in check["evidence"]
    assert f"ascend_runtime_hardware: {detected}" in check["fix"]
    agreeing = run_preflight(
        host(tmp_path / "same", "a2-toolkit-8.2"), npu_info=npu(sample_name), hardware=detected
    )
    assert "npu.hardware" not in checks_of(agreeing)


def _second_service_host() -> dict:
    """The real 910B1 sample as a host where service A holds NPU 0 and NPU 7 is free.

    The sample lists python processes on NPUs 0, 1 and 7 and both chips nearly full; here only
    NPU 0's process is kept (A's replica) and NPU 7's chip is idle, the state service B sees.
    """
    info = npu("npu-smi-info_with_processes_910B1_elided_3.txt")
    info["processes"] = [p for p in info["processes"] if p["npu"] == 0]
    for chip in info["chips"]:
        if chip["npu"] == 7:
            chip["hbm_used_mb"] = 3197
    return info


def test_a_second_service_on_disjoint_npus_is_judged_on_its_own_npus(tmp_path):
    """Issue 22 item 4: A's memory on NPU 0 fails B only when B would use NPU 0."""
    info = _second_service_host()
    sleeper = spawn_sleeper()
    try:
        info["processes"][0]["pid"] = sleeper.pid
        root = host(tmp_path, "a2-toolkit-8.2")
        every = checks_of(run_preflight(root, npu_info=info, service="qwen3b", containers={}))
        assert every["npu.foreign-memory"]["status"] == "fail"
        assert "vllm_service_npus" in every["npu.foreign-memory"]["fix"]
        assert "npu.other-memory" not in every
        b = checks_of(run_preflight(root, npu_info=info, service="qwen3b", containers={}, npus=[7]))
        assert b["npu.foreign-memory"]["status"] == "ok", b["npu.foreign-memory"]
        assert b["npu.foreign-memory"]["evidence"] == "no process holds NPU memory"
        other = b["npu.other-memory"]
        assert other["status"] == "ok"
        assert other["evidence"].startswith("outside this service's NPUs [7]: NPU 0 pid ")
        assert f"pid {sleeper.pid}" in other["evidence"] and "59618 MB" in other["evidence"]
        overlap = checks_of(
            run_preflight(root, npu_info=info, service="qwen3b", containers={}, npus=[0, 7])
        )
        assert overlap["npu.foreign-memory"]["status"] == "fail"
    finally:
        sleeper.kill()
        sleeper.wait(timeout=10)


def test_busy_hbm_is_judged_on_the_selected_npus_and_the_plan_memory_too():
    from ascend_deploy.planning.preflight import npu_memory, process_checks, selected_chips

    info = _second_service_host()
    holders = {"listeners": [], "npu_holders": []}
    busy = {c["id"]: c for c in process_checks(holders, info["chips"], None, "b")}
    assert busy["npu.foreign-memory"]["status"] == "warn"  # NPU 0 at 64293 MB
    assert "NPU 0 chip 0 64293/" in busy["npu.foreign-memory"]["evidence"]
    mine = {c["id"]: c for c in process_checks(holders, info["chips"], None, "b", [7])}
    assert mine["npu.foreign-memory"]["status"] == "ok"
    total = info["chips"][0]["hbm_total_mb"]
    assert npu_memory(info["chips"]) == (total, 64293)
    assert npu_memory(selected_chips(info["chips"], [7])) == (total, 3197)
    assert selected_chips(info["chips"], []) == info["chips"]


def test_a_selected_npu_the_host_lacks_is_named(tmp_path):
    with pytest.raises(InputError) as err:
        run_preflight(
            host(tmp_path, "a2-toolkit-8.2"), npu_info=_second_service_host(), npus=[7, 3]
        )
    assert "NPUs [3] of the selection [7, 3] are not on this host (its NPUs: [0, 7])" in str(
        err.value
    )
    assert "vllm_service_npus" in str(err.value)


def test_cli_preflight_npus_judges_the_selection(capsys):
    """ascend-deploy preflight --npus 7 on the real sample: NPU 0's and 1's PIDs are not judged."""
    path = str(SAMPLES / "npu-smi-info_with_processes_910B1_elided_3.txt")
    main(["preflight", "--npu-smi-file", path, "--json"])
    every = {c["id"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert "2441447 (59618 MB)" in every["npu.foreign-memory"]["evidence"]
    main(["preflight", "--npu-smi-file", path, "--npus", "7", "--json"])
    seven = {c["id"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert "2441447" not in seven["npu.foreign-memory"]["evidence"]
    assert "2441454 (59802 MB)" in seven["npu.foreign-memory"]["evidence"]
    assert main(["preflight", "--npu-smi-file", path, "--npus", "3"]) == 2
    assert "NPUs [3] of the selection [3] are not on this host" in capsys.readouterr().err
