"""compat: the shipped matrix, resolve, check, driver pairings and the CLI."""

from __future__ import annotations

import datetime
import importlib.util
import json

import pytest
import yaml
from conftest import DATA

from ascend_deploy.cli import main
from ascend_deploy.errors import CheckFailed, InputError
from ascend_deploy.planning import compat

_spec = importlib.util.spec_from_file_location("build_tree", DATA / "hosts" / "build_tree.py")
build_tree = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_tree)


def _plain(value):
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


# ----------------------------------------------------------------------------- matrix data


def test_json_matrix_equals_the_yaml_copy():
    text = (DATA / "compat-matrix.yaml").read_text(encoding="utf-8")
    rows = [_plain(r) for r in yaml.safe_load(text)]
    assert compat.load_matrix() == rows
    with open(compat.MATRIX_PATH, encoding="utf-8") as fh:
        doc = json.load(fh)
    comments = [line[1:].strip() for line in text.splitlines() if line.startswith("#")]
    assert doc["sources"] == comments
    assert any("versioning_policy.md" in s for s in doc["sources"])


def test_matrix_keeps_unofficial_rows_and_dates():
    rows = compat.load_matrix()
    tags = [r["vllm_ascend"] for r in rows]
    assert len(rows) == 42 and len(set(tags)) == 42
    unofficial = [r["vllm_ascend"] for r in rows if r.get("official_matrix") is False]
    assert unofficial == [
        "v0.7.1rc1",
        "v0.7.3rc1",
        "v0.7.3rc2",
        "v0.8.4rc1",
        "v0.25.1rc1",
    ]
    assert next(r for r in rows if r["vllm_ascend"] == "v0.13.0")["released"] == "2026-02-06"


def test_load_matrix_returns_copies():
    compat.load_matrix()[0]["vllm_ascend"] = "changed"
    assert compat.load_matrix()[0]["vllm_ascend"] == "v0.7.3"


def renamed(old: str, new: str) -> dict:
    """The shipped matrix document with release ``old`` renamed ``new`` (a caller's matrix)."""
    doc = json.loads(json.dumps(compat.read_matrix()))
    for row in doc["rows"]:
        if row["vllm_ascend"] == old:
            row["vllm_ascend"] = new
    return doc


def test_the_matrix_is_an_argument_and_the_shipped_one_is_read_once():
    mine = renamed("v0.13.0", "v0.13.0.post7")
    row = compat.resolve("8.5.0", "a2", matrix=mine)
    assert row["vllm_ascend"] == "v0.13.0.post7"
    assert row["image"] == "quay.io/ascend/vllm-ascend:v0.13.0.post7"
    assert compat.resolve_pinned("v0.13.0.post7", "a2", matrix=mine)["cann"] == "8.5.0"
    assert compat.find_row("0.13.0", matrix=mine) is None
    findings = {f["id"]: f for f in compat.check({"vllm_ascend": "0.13.0"}, "8.5.0", "a2", mine)}
    assert "served by vllm-ascend v0.13.0.post7" in findings["compat.cann"]["evidence"]
    assert findings["compat.vllm_ascend"]["status"] == "warn"  # not a release of this matrix
    newest = compat.resolve_for_driver(None, "a2", matrix=renamed("v0.23.0", "v0.23.0.post1"))
    assert newest["vllm_ascend"] == "v0.23.0.post1"
    # without a matrix: the shipped one, unchanged, read from disk once per process
    assert compat.resolve("8.5.0", "a2")["vllm_ascend"] == "v0.13.0"
    assert compat.read_matrix() is compat.read_matrix()
    only_old = {"rows": [r for r in compat.load_matrix() if r["vllm_ascend"] == "v0.9.1"]}
    with pytest.raises(CheckFailed, match=r"no vllm-ascend release supports CANN 8\.5\.0"):
        compat.resolve("8.5.0", "a2", matrix=only_old)
    with pytest.raises(InputError, match="has no 'rows' list"):
        compat.resolve("8.5.0", "a2", matrix={"row": []})


# ----------------------------------------------------------------------------- resolve


@pytest.mark.parametrize(
    "cann, hardware, tag, torch_npu, image",
    [
        ("8.5.0", "a2", "v0.13.0", "2.8.0.post2", "quay.io/ascend/vllm-ascend:v0.13.0"),
        ("8.5.1", "a2", "v0.18.0", "2.9.0.post1+git4c901a4", "quay.io/ascend/vllm-ascend:v0.18.0"),
        ("9.1.0", "a2", "v0.23.0", "2.10.0.post4", "quay.io/ascend/vllm-ascend:v0.23.0"),
        ("8.2.RC1", "a2", "v0.9.1", "2.5.1.post1", "quay.io/ascend/vllm-ascend:v0.9.1"),
        ("8.2.rc1", "a2", "v0.9.1", "2.5.1.post1", "quay.io/ascend/vllm-ascend:v0.9.1"),
        ("8.1.RC1", "a2", "v0.7.3.post1", "2.5.1", "quay.io/ascend/vllm-ascend:v0.7.3.post1"),
        ("8.3.RC2", "a3", "v0.11.0", "2.7.1.post1", "quay.io/ascend/vllm-ascend:v0.11.0-a3"),
        ("9.1.0", "310p", "v0.23.0", "2.10.0.post4", "quay.io/ascend/vllm-ascend:v0.23.0-310p"),
        ("9.1.0", "a5", "v0.23.0", "2.10.0.post4", "quay.io/ascend/vllm-ascend:v0.23.0-a5"),
        # v0.18.0 lists "310p(needs CANN 9.0.0)": on 310P it runs on CANN 9.0.0, not 8.5.1
        (
            "9.0.0",
            "310p",
            "v0.18.0",
            "2.9.0.post1+git4c901a4",
            "quay.io/ascend/vllm-ascend:v0.18.0-310p",
        ),
    ],
)
def test_resolve_prefers_final_releases(cann, hardware, tag, torch_npu, image):
    row = compat.resolve(cann, hardware)
    assert row["vllm_ascend"] == tag
    assert row["torch_npu"] == torch_npu
    assert row["image"] == image
    assert row["prerelease"] is False
    assert row["pins"]["vllm_ascend"] == f"vllm-ascend=={tag[1:]}"


def test_resolve_row_fields_and_pip_order():
    row = compat.resolve("8.5.0")
    assert (row["vllm"], row["torch"], row["python"], row["cann"]) == (
        "v0.13.0",
        "2.8.0",
        ">=3.10,<3.12",
        "8.5.0",
    )
    assert row["base_image"] == "quay.io/ascend/cann:8.5.0-910b-ubuntu22.04-py3.11"
    pip = row["pip"]
    assert pip.index("torch==2.8.0") < pip.index("'vllm==0.13.0'") < pip.index("vllm-ascend==")
    assert "--extra-index-url https://mirrors.huaweicloud.com/ascend/repos/pypi" in pip
    assert row["alternatives"] == []  # v0.13.0 is the only final release on CANN 8.5.0


def test_resolve_openeuler_and_registry():
    row = compat.resolve("8.3.RC2", "a3", os_variant="openeuler", registry="quay.nju.edu.cn/ascend")
    assert row["image"] == "quay.nju.edu.cn/ascend/vllm-ascend:v0.11.0-a3-openeuler"
    assert compat.resolve("8.5.0", os_variant="ubuntu")["image"].endswith(":v0.13.0")


def test_rc_only_cann_needs_allow_rc():
    with pytest.raises(CheckFailed) as err:
        compat.resolve("9.0.0")
    assert "v0.22.1rc1" in str(err.value) and "--allow-rc" in str(err.value)
    row = compat.resolve("9.0.0", allow_rc=True)
    assert row["vllm_ascend"] == "v0.22.1rc1"
    assert row["prerelease"] is True
    assert any("release candidate" in n for n in row["notes"])


def test_allow_rc_still_prefers_a_final_release():
    assert compat.resolve("8.3.RC2", allow_rc=True)["vllm_ascend"] == "v0.11.0"


def test_python_filter():
    assert compat.resolve("9.1.0", python="3.12")["vllm_ascend"] == "v0.23.0"
    with pytest.raises(CheckFailed, match=r"Python 3\.12"):
        compat.resolve("8.5.0", python="3.12")  # v0.13.0 needs <3.12


def test_no_match_lists_the_nearest_rows():
    with pytest.raises(CheckFailed) as err:
        compat.resolve("8.4.0")
    text = str(err.value)
    assert "no vllm-ascend release supports CANN 8.4.0 on a2" in text
    assert "v0.13.0 (CANN 8.5.0, final)" in text and "v0.11.0 (CANN 8.3.RC2, final)" in text
    assert "\n" not in text


def test_open_ended_tag_rows_do_not_claim_new_cann():
    # v0.7.3rc1 says CANN ">=8.0.0" in its README; that is not a promise about CANN 10
    with pytest.raises(CheckFailed, match=r"nearest: v0\.23\.0"):
        compat.resolve("10.0.0", allow_rc=True)
    row = compat.resolve("8.0.RC3", allow_rc=True)
    assert row["vllm_ascend"] == "v0.7.1rc1" and row["official_matrix"] is False


def test_hardware_without_row():
    with pytest.raises(CheckFailed, match="a5"):
        compat.resolve("8.5.0", "a5")  # 950 support starts with v0.17.0rc1 on CANN 8.5.1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"cann": "latest"}, "--cann 'latest' is not a CANN version"),
        ({"cann": ""}, "is not a CANN version"),
        ({"cann": 8.5}, "is not a CANN version"),
        ({"cann": "8.5.0", "hardware": "h100"}, "--hardware 'h100'"),
        ({"cann": "8.5.0", "python": "three"}, "--python 'three'"),
        ({"cann": "8.5.0", "os_variant": "centos"}, "--os 'centos'"),
    ],
)
def test_resolve_bad_input(kwargs, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        compat.resolve(**kwargs)


# ----------------------------------------------------------------------------- by driver / pinned


def test_for_driver_picks_the_newest_release_whose_cann_the_driver_runs():
    newest = compat.resolve_for_driver(None, "a2")
    old = compat.resolve_for_driver("24.1.rc3", "a2")
    assert old["vllm_ascend"] != newest["vllm_ascend"]
    # Every release skipped is newer and needs a CANN this driver is known not to run.
    for skipped in old["skipped_for_driver"]:
        tag, cann = skipped.split(" (CANN ")
        assert compat.driver_supports_cann("24.1.rc3", cann.rstrip(")")) is False
        assert compat.version_key(tag) > compat.version_key(old["vllm_ascend"])
    assert compat.driver_supports_cann("24.1.rc3", old["cann"]) is not False
    assert any("driver 24.1.rc3 is too old" in n for n in old["notes"])
    assert old["image"].startswith("quay.io/ascend/vllm-ascend:")


def test_for_driver_too_old_for_every_release_says_upgrade(monkeypatch):
    monkeypatch.setattr(compat, "driver_supports_cann", lambda driver, cann: False)
    with pytest.raises(CheckFailed, match=r"runs on driver 1\.0\.0: .*upgrade the NPU driver"):
        compat.resolve_for_driver("1.0.0", "a2")


def test_monotonic_rule_holds_for_every_release_in_the_matrix():
    """No CANN release of the matrix accepts an older HDK than an earlier release does."""
    canns = sorted(
        {c for r in compat.load_matrix() if (c := compat.cann_release(r.get("cann", "")))},
        key=compat.version_key,
    )
    floors = [compat.oldest_driver(c) for c in canns]
    assert all(floors), dict(zip(canns, floors, strict=True))  # every release has a floor
    keys = [compat.version_key(f[0]) for f in floors]
    assert keys == sorted(keys), list(zip(canns, floors, strict=True))


@pytest.mark.parametrize("allow_rc", [False, True])
@pytest.mark.parametrize("driver", ["23.0.0", "7.0.0"])
def test_driver_too_old_for_every_image_names_the_upgrade(driver, allow_rc, capsys):
    """Issue 16 §2: HDK 23.0.0 (no CANN) got v0.11.0 (CANN 8.3.RC2); --driver 7.0.0 too."""
    with pytest.raises(CheckFailed) as err:
        compat.resolve_for_driver(driver, "a2", allow_rc=allow_rc)
    msg = str(err.value)
    assert f"runs on driver {driver}" in msg and "v0.11.0" in msg
    assert "upgrade the NPU driver and firmware" in msg
    assert "26.1.0 (published for CANN 9.1.0) for v0.23.0" in msg
    argv = ["compat", "resolve", "--driver", driver] + (["--allow-rc"] if allow_rc else [])
    assert main(argv) == 1
    out = capsys.readouterr()
    assert out.out == "" and "upgrade the NPU driver" in out.err


def test_unpublished_pairing_is_kept_with_a_note():
    """Issue 11 F: HDK 25.5 with CANN 9.1 was accepted silently."""
    row = compat.resolve_for_driver("25.5.1", "a2")
    assert (row["vllm_ascend"], row["driver_pairing"]) == ("v0.23.0", "unpublished")
    assert "driver 25.5.1 with CANN 9.1.0: pairing not published" in row["driver_note"]
    assert "26.1.0" in row["driver_note"]  # what the note does list
    assert "published pairing: v0.18.0 (CANN 8.5.1)" in row["driver_note"]
    assert row["driver_note"] in row["notes"]
    listed = compat.resolve_for_driver("26.1.0", "a2")
    assert listed["driver_pairing"] == "published" and "driver_note" not in listed


def test_pinned_release_is_described_or_refused():
    row = compat.resolve_pinned("v0.11.0", "a2")
    assert (row["vllm_ascend"], row["hardware"]) == ("v0.11.0", "a2")
    assert row["image"].endswith(":v0.11.0") and row["pins"]["vllm_ascend"]
    with pytest.raises(InputError, match=r"v9\.9\.9 is not in the compatibility matrix"):
        compat.resolve_pinned("v9.9.9")


def test_cli_resolve_by_driver_and_pin(capsys):
    assert main(["compat", "resolve", "--driver", "24.1.rc3", "--json"]) == 0
    by_driver = json.loads(capsys.readouterr().out)
    assert by_driver == compat.resolve_for_driver("24.1.rc3", "a2")
    assert main(["compat", "resolve", "--vllm-ascend", "v0.11.0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["vllm_ascend"] == "v0.11.0"
    with pytest.raises(SystemExit):  # --cann or --vllm-ascend, not both
        main(["compat", "resolve", "--cann", "8.5.0", "--vllm-ascend", "v0.11.0"])


@pytest.mark.parametrize("driver", ["banana", "v25.2.0", "-1", "", "25", "25.2"])
def test_cli_resolve_refuses_a_driver_that_is_not_a_version(driver, capsys):
    assert main(["compat", "resolve", f"--driver={driver}"]) == 2
    err = capsys.readouterr().err
    assert f"--driver {driver!r} is not an NPU driver (HDK) version" in err
    assert "None" not in err


@pytest.mark.parametrize("driver", ["25.2.0", "24.1.rc3", "24.1.RC3", "23.0.3", "25.0.rc1.1"])
def test_driver_versions_hosts_report_are_accepted(driver):
    compat.validate_driver(driver)  # no error


def test_a_python_no_release_supports_is_named_not_the_driver():
    with pytest.raises(CheckFailed) as exc:
        compat.resolve_for_driver("25.5.0", "a2", python="3.13")
    assert "supports Python 3.13" in str(exc.value)
    assert "upgrade the NPU driver" not in str(exc.value)
    with pytest.raises(InputError, match="--python 'three'"):
        compat.resolve_for_driver("25.5.0", "a2", python="three")


def test_cli_list_prints_the_matrix(capsys):
    matrix = compat.read_matrix()
    assert main(["compat", "list", "--allow-rc", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["vllm_ascend"] for r in listed] == sorted(
        (r["vllm_ascend"] for r in compat.load_matrix(matrix)), key=compat.version_key, reverse=True
    )
    assert main(["compat", "list"]) == 0
    text = capsys.readouterr().out.splitlines()
    finals = [r for r in compat.load_matrix(matrix) if compat.is_final(r)]
    assert len(text) == 1 + len(finals) and text[0].split()[0] == "vllm_ascend"
    assert text[1].split()[0] == max((r["vllm_ascend"] for r in finals), key=compat.version_key)
    assert main(["compat", "list", "--hardware", "a5", "--allow-rc", "--json"]) == 0
    a5 = json.loads(capsys.readouterr().out)
    assert a5 and all(
        compat.hardware_support(compat.find_row(r["vllm_ascend"]), "a5")[0] for r in a5
    )
    assert len(a5) < len(listed)


# ----------------------------------------------------------------------------- check


def _by_id(findings):
    return {f["id"]: f for f in findings}


def test_check_matching_set_is_all_ok():
    installed = {
        "torch": "2.8.0",
        "torch_npu": "2.8.0.post2",
        "vllm": "0.13.0",
        "vllm_ascend": "0.13.0",
        "python": "3.11.9",
    }
    findings = compat.check(installed, "8.5.0", "a2")
    assert {f["status"] for f in findings} == {"ok"}
    assert set(_by_id(findings)) == {
        "compat.cann",
        "compat.vllm_ascend",
        "compat.vllm",
        "compat.torch",
        "compat.torch_npu",
        "compat.python",
    }
    assert all(f["pitfall"] == 1 for f in findings)


def test_check_reports_each_mismatch_with_exact_pins():
    installed = {
        "packages": {
            "torch": "2.9.0",
            "torch_npu": "2.8.0",
            "vllm": "0.13.0",
            "vllm_ascend": "0.13.0rc1",
        },
        "python": {"version": "3.12.1"},
    }
    f = _by_id(compat.check(installed, "8.5.0", "a2"))
    assert f["compat.vllm_ascend"]["status"] == "fail"
    assert "needs CANN 8.3.RC2, host has CANN 8.5.0" in f["compat.vllm_ascend"]["evidence"]
    assert f["compat.torch"]["status"] == "fail"
    assert f["compat.torch"]["fix"] == "pip install 'torch==2.8.0'"
    assert f["compat.torch_npu"]["status"] == "fail"
    assert "'torch-npu==2.8.0.post2'" in f["compat.torch_npu"]["fix"]
    assert f["compat.vllm"]["status"] == "ok"
    assert f["compat.python"]["status"] == "fail"
    assert "vllm-ascend==0.13.0'" in f["compat.install-set"]["fix"]
    assert "pip check" in f["compat.install-set"]["fix"]


def test_check_missing_packages_and_dev_builds():
    f = _by_id(compat.check({"torch": "2.10.0"}, "9.1.0", "a2"))
    assert f["compat.vllm_ascend"]["status"] == "fail"
    assert "vllm-ascend==0.23.0" in f["compat.vllm_ascend"]["fix"]
    assert f["compat.torch"]["status"] == "ok"
    assert f["compat.torch_npu"]["status"] == "fail"
    dev = _by_id(compat.check({"vllm_ascend": "0.21.0rc2.dev0+g80610e443"}, "9.1.0", "a2"))
    assert dev["compat.vllm_ascend"]["status"] == "warn"
    assert "development build" in dev["compat.vllm_ascend"]["evidence"]


def test_check_unknown_cann_fails_with_nearest():
    f = _by_id(compat.check({"vllm_ascend": "0.13.0"}, "8.4.0", "a2"))
    assert f["compat.cann"]["status"] == "fail" and "nearest" in f["compat.cann"]["evidence"]


@pytest.mark.parametrize(
    "installed, message",
    [
        ("torch==2.8.0", "must be a mapping"),
        ({"torch": 2.8}, "installed torch version 2.8"),
        ({"torch_npu": "latest"}, "installed torch_npu version 'latest'"),
        ({"packages": ["torch"]}, "must be a mapping"),
    ],
)
def test_check_bad_installed(installed, message):
    with pytest.raises(InputError, match=message):
        compat.check(installed, "8.5.0", "a2")


# ----------------------------------------------------------------------------- driver pairing


@pytest.mark.parametrize(
    "driver, cann, expected",
    [
        ("25.2.0", "8.5.0", True),
        ("25.0.rc1.1", "8.5.0", True),
        ("25.5.1", "8.5.1", True),
        ("24.1.rc3", "8.5.0", False),  # older than every HDK the 8.5.0 note lists
        ("23.0.7", "8.5.1", False),
        ("26.1.0", "8.5.0", None),  # newer than the note: not stated
        ("24.1.rc2.2", "8.2.RC1", True),
        ("24.1.RC3", "8.2.rc1", True),
        ("23.0.7", "8.2.RC1", False),
        ("26.1.0", "9.1.0", True),
        ("25.5.0", "9.1.0", None),
        ("25.0.rc1.1", "8.1.RC1", True),  # Ascend Deployer's CANN_8.1.RC1.json
        ("25.3.rc1", "8.3.RC1", True),
        # Monotonic rule: a release without a stated floor inherits its predecessors'.
        ("23.0.0", "8.3.RC2", False),  # the README's driver-only starting point
        ("24.1.rc1", "8.3.RC2", False),  # 8.2.RC1 already needs 24.1.RC2
        ("25.3.1", "8.3.RC2", None),  # no note lists 8.3.RC2's HDK set
        ("23.0.0", "8.0.0", False),  # Atlas A2: HDK 24.1.RC1 or later
        ("24.9.9", "9.2.0", False),  # an unlisted future CANN inherits 8.5.x's floor
        ("garbage", "8.5.0", None),
    ],
)
def test_driver_supports_cann(driver, cann, expected):
    assert compat.driver_supports_cann(driver, cann) is expected


# ----------------------------------------------------------------------------- CLI


def test_cli_resolve_json(capsys):
    assert main(["compat", "resolve", "--cann", "8.5.1", "--hardware", "a3", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["image"] == "quay.io/ascend/vllm-ascend:v0.18.0-a3"
    assert row["vllm"] == "v0.18.0"


def test_cli_resolve_human(capsys):
    assert main(["compat", "resolve", "--cann", "8.2.RC1"]) == 0
    out = capsys.readouterr().out
    assert "vllm_ascend  v0.9.1" in out and "quay.io/ascend/vllm-ascend:v0.9.1" in out


def test_cli_resolve_no_match_exit_1(capsys):
    assert main(["compat", "resolve", "--cann", "8.4.0"]) == 1
    err = capsys.readouterr().err
    assert "nearest" in err and err.count("\n") == 1


def test_cli_resolve_bad_version_exit_2(capsys):
    assert main(["compat", "resolve", "--cann", "eight"]) == 2
    assert "is not a CANN version" in capsys.readouterr().err


def test_cli_check_with_flags(tmp_path, capsys):
    build_tree.build("a2-toolkit-8.2", tmp_path)
    argv = [
        "compat",
        "check",
        "--root",
        str(tmp_path),
        "--torch",
        "2.5.1",
        "--torch-npu",
        "2.5.1",
        "--vllm",
        "0.9.1",
        "--vllm-ascend",
        "0.9.1",
        "--json",
    ]
    assert main(argv) == 1  # torch_npu 2.5.1 is not the pinned 2.5.1.post1
    doc = json.loads(capsys.readouterr().out)
    assert doc["cann"] == "8.2.RC1"  # read from the tree
    f = _by_id(doc["findings"])
    assert f["compat.torch_npu"]["status"] == "fail"
    assert "'torch-npu==2.5.1.post1'" in f["compat.torch_npu"]["fix"]
    assert main([*argv[:6], "--torch-npu", "2.5.1.post1", *argv[8:]]) == 0


def test_cli_check_needs_a_cann(tmp_path, capsys):
    assert main(["compat", "check", "--root", str(tmp_path), "--torch", "2.8.0"]) == 2
    assert "pass --cann" in capsys.readouterr().err


# ----------------------------------------------------------------------------- images built


def _upstream_built(image: str) -> bool:
    """Whether upstream's image workflow built ``image`` (schedule_image_build_and_push.yaml
    at each tag): A2 every tag, -a3 from v0.10.0rc1, -310p from v0.9.1rc1 where the release
    lists 310P, -a5 at v0.23.0 only; each also as -openeuler."""
    tag = image.rsplit(":", 1)[1].removesuffix("-openeuler")
    release, _, suffix = tag.partition("-")
    row = compat.find_row(release)
    if row is None:
        return False
    if suffix == "a5":
        return release == "v0.23.0"
    hardware = suffix or "a2"
    if not compat.hardware_support(row, hardware)[0]:
        return False
    first = {"a2": "v0.7.1rc1", "a3": "v0.10.0rc1", "310p": "v0.9.1rc1"}[hardware]
    return compat.version_key(release) >= compat.version_key(first)


CANNS = sorted(
    {compat.row_cann(r, hw) for r in compat.load_matrix() for hw in compat.HARDWARE}
    | {"8.5.1", "9.0.0", "9.0.1", "9.1.0"}
)


@pytest.mark.parametrize("hardware", compat.HARDWARE)
def test_every_resolved_image_is_one_upstream_built(hardware):
    seen = []
    for allow_rc in (False, True):
        for os_variant in (None, "openeuler"):
            for cann in CANNS:
                try:
                    row = compat.resolve(cann, hardware, allow_rc=allow_rc, os_variant=os_variant)
                except (CheckFailed, InputError):
                    continue
                seen.append(row["image"])
                if row["image"] is None:
                    assert any("upstream built no" in n for n in row["notes"])
            for driver in ("24.1.rc2", "25.0.rc1", "25.5.1", "26.1.0", None):
                try:
                    row = compat.resolve_for_driver(
                        driver, hardware, allow_rc=allow_rc, os_variant=os_variant
                    )
                except CheckFailed:
                    continue
                assert row["image"] is not None, row["vllm_ascend"]  # container mode
                seen.append(row["image"])
        for row in compat.load_matrix():
            if compat.hardware_support(row, hardware)[0]:
                seen.append(compat.resolve_pinned(row["vllm_ascend"], hardware)["image"])
    images = [i for i in seen if i is not None]
    assert images and all(_upstream_built(i) for i in images), [
        i for i in images if not _upstream_built(i)
    ]


def test_a5_images_exist_only_at_v0_23_0():
    old = compat.resolve("8.5.1", "a5")
    assert old["vllm_ascend"] == "v0.18.0" and old["image"] is None  # host mode still works
    assert any("upstream built no -a5 image for v0.18.0" in n for n in old["notes"])
    assert any("v0.23.0 (CANN 9.1.0)" in n for n in old["notes"])
    rc = compat.resolve("9.0.0", "a5", allow_rc=True)
    assert rc["vllm_ascend"] == "v0.22.1rc1" and rc["image"] is None
    assert compat.resolve("9.0.1", "a5", allow_rc=True)["image"] is None
    new = compat.resolve("9.1.0", "a5", allow_rc=True, os_variant="openeuler")
    assert new["image"] == "quay.io/ascend/vllm-ascend:v0.23.0-a5-openeuler"
    for allow_rc in (False, True):
        row = compat.resolve_for_driver("25.5.1", "a5", allow_rc=allow_rc)
        assert row["image"] == "quay.io/ascend/vllm-ascend:v0.23.0-a5"
    pinned = compat.resolve_pinned("v0.22.1rc1", "a5")
    assert pinned["image"] is None and "Dockerfile.a5" in pinned["notes"][0]


def test_image_ranges_are_data_a_matrix_can_change():
    doc = json.loads(json.dumps(compat.read_matrix()))
    doc["images"]["built"]["a5"].append({"from": "v0.25.1rc1"})
    row = next(r for r in doc["rows"] if r["vllm_ascend"] == "v0.25.1rc1")
    row["hardware"] = ["a2", "a5"]
    assert compat.resolve_pinned("v0.25.1rc1", "a5", matrix=doc)["image"].endswith(":v0.25.1rc1-a5")


# ----------------------------------------------------------------------------- host pins

# The stacks upstream's installation.md / requirements.txt at each tag install with pip
# (torch-npu==2.7.1 at v0.11.0rc3 and v0.11.0, ==2.8.0 at v0.13.0rc2, ==2.9.0 at v0.18.0).
GUIDE_STACKS = [
    ("v0.11.0rc3", "8.3.RC2", "a2", "2.7.1", "2.7.1", "0.11.0", "3.11.9"),
    ("v0.11.0", "8.3.RC2", "a3", "2.7.1", "2.7.1", "0.11.0", "3.11.9"),
    ("v0.13.0rc2", "8.5.0", "a2", "2.8.0", "2.8.0", "0.13.0", "3.11.9"),
    ("v0.18.0", "8.5.1", "a2", "2.9.0", "2.9.0", "0.18.0", "3.11.9"),
]


@pytest.mark.parametrize("release, cann, hw, torch, torch_npu, vllm, py", GUIDE_STACKS)
def test_check_accepts_a_stack_installed_as_the_installation_guide_says(
    release, cann, hw, torch, torch_npu, vllm, py
):
    installed = {
        "packages": {
            "torch": torch,
            "torch_npu": torch_npu,
            "vllm": vllm,
            "vllm_ascend": release.lstrip("v"),
        },
        "python": py,
    }
    findings = compat.check(installed, cann, hw)
    assert {f["status"] for f in findings} == {"ok"}, [f for f in findings if f["status"] != "ok"]
    assert "(the package's pin)" in _by_id(findings)["compat.torch_npu"]["evidence"]
    # the build the versioning policy / image names is accepted too
    row = compat.find_row(release)
    installed["packages"]["torch_npu"] = row["torch_npu"]
    assert {f["status"] for f in compat.check(installed, cann, hw)} == {"ok"}


def test_host_pins_resolve_from_an_index_and_say_where_the_image_wheels_are():
    row = compat.resolve_pinned("v0.18.0", "a2")
    assert row["pins"]["torch_npu"] == "torch-npu==2.9.0"
    assert "+git" not in row["pip"] and "dev2026" not in row["pip"]
    note = next(n for n in row["notes"] if "torch-npu" in n)
    assert "https://vllm-ascend.obs.cn-north-4.myhuaweicloud.com/vllm-ascend/" in note
    assert "2.9.0.post1+git4c901a4" in note
    assert any("triton-ascend 3.2.0.dev20260322" in n for n in row["notes"])
    old = compat.resolve("8.3.RC2", "a2")
    assert old["vllm_ascend"] == "v0.11.0" and old["pins"]["torch_npu"] == "torch-npu==2.7.1"
    assert any("names 2.7.1.post1" in n for n in old["notes"])


def test_v0_18_0_on_310p_with_cann_9_0_0_uses_the_release_notes_upgrade():
    row = compat.resolve("9.0.0", "310p")
    assert row["vllm_ascend"] == "v0.18.0" and row["cann"] == "9.0.0"
    assert row["pins"]["torch_npu"] == "torch-npu==2.9.0.post2"
    assert any("triton-ascend 3.2.1" in n for n in row["notes"])
    installed = {"torch": "2.9.0", "vllm": "0.18.0", "vllm_ascend": "0.18.0"}
    ok = _by_id(compat.check({**installed, "torch_npu": "2.9.0.post2"}, "9.0.0", "310p"))
    assert ok["compat.torch_npu"]["status"] == "ok"
    bad = _by_id(compat.check({**installed, "torch_npu": "2.9.0.post1"}, "9.0.0", "310p"))
    assert bad["compat.torch_npu"]["status"] == "fail"
    assert "torch-npu==2.9.0.post2" in bad["compat.torch_npu"]["fix"]


def test_a_pin_is_checked_against_the_driver(capsys):
    """The example inventory pins a release; 'can my driver run it?' is one command (issue 24)."""
    assert main(["compat", "resolve", "--vllm-ascend", "v0.23.0", "--driver", "24.1.rc3"]) == 1
    err = capsys.readouterr().err
    assert "v0.23.0 is built on CANN 9.1.0, which needs NPU driver 25.0.rc1 or newer" in err
    assert "compat resolve --driver 24.1.rc3" in err
    assert (
        main(["compat", "resolve", "--vllm-ascend", "v0.23.0", "--driver", "25.2.0", "--json"]) == 0
    )
    row = json.loads(capsys.readouterr().out)
    assert row["vllm_ascend"] == "v0.23.0" and row["driver"] == "25.2.0"
    assert main(["compat", "resolve", "--vllm-ascend", "v0.23.0", "--driver", "v25"]) == 2
    assert "--driver 'v25' is not an NPU driver" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--driver", "25.2.0", "--registry", ""], "--registry '' names no registry"),
        (["--driver", "25.2.0", "--registry", " "], "--registry '' names no registry"),
        ([], "give --cann, --driver or --vllm-ascend"),
        (["--cann", "8.5.0", "--driver", "25.2.0"], "--cann and --driver: give one"),
    ],
    ids=["empty-registry", "blank-registry", "nothing", "cann-and-driver"],
)
def test_resolve_refuses_what_names_no_answer(capsys, argv, said):
    assert main(["compat", "resolve", *argv]) == 2
    assert said in capsys.readouterr().err


@pytest.mark.parametrize("release", ["v0.13.0rc2", "v0.13.0", "v0.13.0rc3"])
def test_v0_13_rows_pin_triton_ascend(release):
    # versioning_policy.md table and requirements.txt@v0.13.0: triton-ascend==3.2.0
    assert compat.find_row(release)["triton_ascend"] == "3.2.0"


def test_v0_24_0rc1_row_is_its_tags_official_row():
    # docs/source/community/versioning_policy.md@v0.24.0rc1; Dockerfile@v0.24.0rc1 FROM line
    row = compat.find_row("v0.24.0rc1")
    assert (row["python"], row["cann"], row["triton_ascend"], row["mooncake"]) == (
        ">=3.10,<3.13",
        "9.0.1",
        "3.2.1",
        "v0.3.11.post1",
    )
    assert row["base_image"] == "quay.io/ascend/cann:9.0.1-910b-ubuntu22.04-py3.12"
    assert row["released"] == "2026-07-30"
    assert compat.is_official(row)  # the tag's own versioning policy lists it


def test_v0_25_1rc1_row_carries_its_tags_pins_and_image():
    # requirements.txt@v0.25.1rc1 (triton-ascend==3.2.1); Dockerfile@v0.25.1rc1 (FROM, MOONCAKE_TAG)
    row = compat.find_row("v0.25.1rc1")
    assert (row["triton_ascend"], row["mooncake"]) == ("3.2.1", "v0.3.11.post1")
    assert row["base_image"] == "quay.io/ascend/cann:9.0.1-910b-ubuntu22.04-py3.12"
    assert not compat.is_official(row)
