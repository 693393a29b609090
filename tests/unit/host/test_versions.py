"""versions: the real version-file samples, both CANN layouts, bad files, interpreters."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys

import pytest
from conftest import DATA

from ascend_deploy.cli import main
from ascend_deploy.errors import InputError
from ascend_deploy.host import version_files as vf
from ascend_deploy.host.versions import query_packages, read_versions

_spec = importlib.util.spec_from_file_location("build_tree", DATA / "hosts" / "build_tree.py")
build_tree = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_tree)

DRIVER = "usr/local/Ascend/driver/version.info"
FIRMWARE = "usr/local/Ascend/firmware/version.info"
TOOLKIT = "usr/local/Ascend/ascend-toolkit/latest/{arch}-linux/ascend_toolkit_install.info"
NNAL = "usr/local/Ascend/nnal/atb/latest/version.info"


def put(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- samples


@pytest.mark.parametrize(
    "sample, version, inner, code, compatible, fw, package",
    [
        (
            "driver_version.info_23.0.7_3.txt",
            "23.0.7",
            "V100R001C15SPC012B220",
            "R001C15",
            ["R001C29", "R001C30", "R001C13", "R001C15"],
            [["7.0.0", "7.1.99"]],
            "23.0.7",
        ),
        (
            "driver_version.info_24.1.rc1_2.txt",
            "24.1.rc1",
            "V100R001C15SPC006B220",
            "R001C15",
            ["R001C30", "R001C13", "R001C15", "R001C17"],
            [["7.0.0", "7.2.99"]],
            None,
        ),
        (
            "driver_version.info_24.1.rc2.2_5.txt",
            "24.1.rc2.2",
            "V100R001C18SPC001B233",
            "R001C18",
            ["R001C30", "R001C13", "R001C15", "R001C17", "R001C18"],
            [["7.0.0", "7.2.99"]],
            "24.1.rc2.2",
        ),
        (  # published with `cat -n` line numbers
            "driver_version.info_24.1.rc3_1.txt",
            "24.1.rc3",
            "V100R001C19SPC001B124",
            "R001C19",
            ["R001C13", "R001C15", "R001C17", "R001C18", "R001C19"],
            [["7.0.0", "7.5.99"]],
            "24.1.rc3",
        ),
    ],
)
def test_driver_samples(tmp_path, sample, version, inner, code, compatible, fw, package):
    put(tmp_path, DRIVER, build_tree.sample_body(sample))
    driver = read_versions(str(tmp_path))["driver"]
    assert driver["version"] == version
    assert driver["innerversion"] == inner
    assert driver["inner_code"] == code
    assert driver["compatible_version"] == compatible
    assert driver["compatible_version_fw"] == fw
    assert driver["package_version"] == package
    assert driver["fields"]["ascendhal_version"] in ("7.35.19", "7.35.23")
    assert driver["path"] == str(tmp_path / DRIVER)


@pytest.mark.parametrize(
    "sample",
    ["firmware_version.info_7.1.0.11.220_1.txt", "firmware_version.info_7.1.0.11.220_2.txt"],
)
def test_firmware_samples(tmp_path, sample):
    put(tmp_path, FIRMWARE, build_tree.sample_body(sample))
    fw = read_versions(str(tmp_path))["firmware"]
    assert fw["version"] == "7.1.0.11.220"
    assert fw["package_version"] == "23.0.7"
    assert fw["compatible_version_drv"] == [["23.0.rc3", "23.0.rc3."], ["23.0.0", "23.0.0."]]


@pytest.mark.parametrize(
    "sample, version, inner, code, compatible, arch",
    [
        (
            "ascend_toolkit_install.info_7.0.T10_6.txt",
            "7.0.T10",
            "V100R001C13B222",
            "R001C13",
            ["R001C29", "R001C30", "R001C13", "R003C10", "R003C11"],
            "aarch64",
        ),
        (
            "ascend_toolkit_install.info_8.1.RC1_1.txt",
            "8.1.RC1",
            "V100R001C21SPC001B238",
            "R001C21",
            ["R001C15", "R001C18", "R001C19", "R001C20", "R001C21"],
            "aarch64",
        ),
        (
            "ascend_toolkit_install.info_8.1.RC1_x86_2.txt",
            "8.1.RC1",
            "V100R001C21B081",
            "R001C21",
            ["R001C15", "R001C18", "R001C19", "R001C20", "R001C21"],
            "x86_64",
        ),
        (
            "ascend_toolkit_install.info_8.2.RC1_3.txt",
            "8.2.RC1",
            "V100R001C22SPC001B231",
            "R001C22",
            ["R001C15", "R001C18", "R001C19", "R001C20", "R001C21", "R001C23"],
            "aarch64",
        ),
        (
            "ascend_toolkit_install.info_8.2.RC1_7.txt",
            "8.2.RC1",
            "V100R001C22SPC001B231",
            "R001C22",
            ["R001C15", "R001C18", "R001C19", "R001C20", "R001C21", "R001C23"],
            "aarch64",
        ),
    ],
)
def test_toolkit_samples_in_the_ascend_toolkit_layout(
    tmp_path, sample, version, inner, code, compatible, arch
):
    put(tmp_path, TOOLKIT.format(arch=arch), build_tree.sample_body(sample))
    cann = read_versions(str(tmp_path))["cann"]
    assert cann["layout"] == "ascend-toolkit"
    assert cann["package_name"] == "Ascend-cann-toolkit"
    assert (cann["version"], cann["innerversion"], cann["inner_code"]) == (version, inner, code)
    assert cann["compatible_version"] == compatible
    assert cann["arch"] == arch
    assert cann["install_path"] == f"/usr/local/Ascend/ascend-toolkit/{version}/{arch}-linux"


def test_cann_85_layout_with_absolute_cann_link(tmp_path):
    build_tree.build("a2-cann-8.5", tmp_path)
    info = read_versions(str(tmp_path))
    cann = info["cann"]
    assert cann["layout"] == "cann"
    assert cann["version"] == "8.5.0"
    assert cann["inner_code"] == "R001C25"
    assert cann["install_path"] == "/usr/local/Ascend/cann-8.5.0/aarch64-linux"
    # the absolute link resolved inside --root, not on this machine
    assert cann["path"] == str(
        tmp_path / "usr/local/Ascend/cann-8.5.0/aarch64-linux/ascend_toolkit_install.info"
    )
    assert cann["installed"] == ["8.5.0"]
    assert cann["others"] == []  # ascend-toolkit/latest -> cann is the same file
    assert info["nnal"] is None


def test_both_layouts_present_newest_wins(tmp_path):
    build_tree.build("a2-cann-8.5", tmp_path)
    os.remove(tmp_path / "usr/local/Ascend/ascend-toolkit/latest")
    put(
        tmp_path,
        TOOLKIT.format(arch="aarch64"),
        build_tree.sample_body("ascend_toolkit_install.info_8.2.RC1_3.txt"),
    )
    (tmp_path / "usr/local/Ascend/ascend-toolkit/8.2.RC1").mkdir()
    cann = read_versions(str(tmp_path))["cann"]
    assert cann["version"] == "8.5.0"
    assert cann["installed"] == ["8.2.RC1", "8.5.0"]
    assert [o["version"] for o in cann["others"]] == ["8.2.RC1"]


def test_nnae_is_the_fallback(tmp_path):
    put(
        tmp_path,
        "usr/local/Ascend/nnae/latest/ascend_nnae_install.info",
        build_tree.sample_body("ascend_nnae_install.info_8.0.RC3_1.txt"),
    )
    cann = read_versions(str(tmp_path))["cann"]
    assert cann["layout"] == "nnae"
    assert cann["version"] == "8.0.RC3"
    assert cann["compatible_version"] == ["R001C13-R001C19", "R001C30"]


@pytest.mark.parametrize(
    "sample, version, build, branch, commit",
    [
        (
            "nnal_atb_version.info_8.0.0_1.txt",
            "8.0.0",
            "8.0.0.B100",
            "br_release_cann_8.0.0_20250521",
            "af0ec2e868267322b4fb7949da3ae7af769d9644",
        ),
        (
            "nnal_atb_version.info_8.2.RC1_2.txt",
            "8.2.RC1",
            "8.2.RC1.B150",
            "br_release_cann_8.2.RC1_20251226",
            "f10dc20391d8af04c3f8024aca0e0dfa94d2a0a5",
        ),
        (
            "nnal_atb_version.info_T-build_3.txt",
            "8.0.T63",
            "8.0.T63.B020",
            "br_feature_cann_8.0.0_POC_20250130",
            "92b4e43b9b62dca25a47b73bef75432005378e9d",
        ),
    ],
)
def test_nnal_samples(tmp_path, sample, version, build, branch, commit):
    put(tmp_path, NNAL, build_tree.sample_body(sample))
    nnal = read_versions(str(tmp_path))["nnal"]
    assert (nnal["version"], nnal["build"], nnal["platform"]) == (version, build, "aarch64")
    assert (nnal["branch"], nnal["commit"]) == (branch, commit)


def test_install_info_sample(tmp_path):
    put(tmp_path, "etc/ascend_install.info", build_tree.sample_body("ascend_install.info_1.txt"))
    info = read_versions(str(tmp_path))
    ii = info["install_info"]
    assert ii["UserName"] == "HwHiAiUser"
    assert ii["Driver_Install_Path_Param"] == "/usr/local/Ascend"
    assert ii["Driver_Install_For_All"] == "yes"
    assert info["driver"] is None and info["cann"] is None  # missing files are nulls


def test_install_path_param_moves_the_ascend_home(tmp_path):
    put(tmp_path, "etc/ascend_install.info", "Driver_Install_Path_Param=/opt/Ascend\n")
    put(
        tmp_path,
        "opt/Ascend/driver/version.info",
        build_tree.sample_body("driver_version.info_24.1.rc1_2.txt"),
    )
    info = read_versions(str(tmp_path))
    assert info["ascend_home"] == "/opt/Ascend"
    assert info["driver"]["version"] == "24.1.rc1"


@pytest.mark.parametrize(
    "sample, key, value, style",
    [
        ("mindie_version.info_2.1.RC1_1.txt", "Ascend-mindie", "MindIE 2.1.RC1.B152", "colon"),
        ("mindie_version.info_2.1.RC1_1.txt", "mindie-sd", "2.1.RC1.B152", "colon"),
        ("version.cfg_8.0.0_1.txt", "runtime_running_version", "[7.6.0.1.220:8.0.0]", "eq"),
        (
            "version.cfg_T-build_2.txt",
            "opp_kernel_installed_version",
            "[7.6.T13.0.B094:8.0.T63]",
            "eq",
        ),
        ("ascend_tool_box_install.info_1.txt", "path", "/usr/local/Ascend/toolbox/6.0.RC1", "eq"),
        (
            "toolkit_version.info_8.2.RC1_1.txt",
            "required_package_opp_kernel_version",
            ">=7.6, <=8.2",
            "eq",
        ),
        ("opp_kernel_version.info_8.2.RC1_1.txt", "ops_version", "8.2.0.0.201", "eq"),
    ],
)
def test_other_version_files_parse(sample, key, value, style):
    pairs = vf.parse_pairs(build_tree.sample_body(sample), sample, "version file", style)
    assert pairs[key] == value


# ----------------------------------------------------------------------------- trees


def test_consistent_a2_host_tree(tmp_path):
    build_tree.build("a2-toolkit-8.2", tmp_path)
    info = read_versions(str(tmp_path))
    assert info["driver"]["version"] == "24.1.rc3"
    assert info["firmware"]["version"] == "7.1.0.11.220"
    assert info["cann"]["version"] == "8.2.RC1"
    assert info["cann"]["installed"] == ["8.2.RC1"]
    assert info["nnal"]["version"] == "8.2.RC1"
    assert info["packages"] == {"torch": None, "torch_npu": None, "vllm": None, "vllm_ascend": None}
    checks = {c["id"]: c for c in info["checks"]}
    assert checks["versions.driver-firmware"]["status"] == "ok"
    assert checks["versions.nnal-cann"]["status"] == "ok"
    # the driver (C19) does not list C22, but CANN 8.2.RC1 lists the driver's C19
    assert checks["versions.driver-cann"]["status"] == "ok"
    assert "not documented" in checks["versions.driver-cann"]["evidence"]


def test_firmware_outside_driver_range_fails(tmp_path):
    build_tree.build("fw-mismatch", tmp_path)
    (check,) = [
        c for c in read_versions(str(tmp_path))["checks"] if c["id"] == "versions.driver-firmware"
    ]
    assert check["status"] == "fail"
    assert "7.3.0.1.231" in check["evidence"] and "[7.0.0,7.2.99]" in check["evidence"]
    assert check["pitfall"] == 1 and check["fix"]


def test_cann_not_listed_either_way_warns(tmp_path):
    # driver 24.1.rc2.2 (C18) lists C30,C13,C15,C17,C18 - not C25; the 8.5.0 toolkit lists
    # C18, so that entry is removed to model a pair that neither side lists
    put(tmp_path, DRIVER, build_tree.sample_body("driver_version.info_24.1.rc2.2_5.txt"))
    put(
        tmp_path,
        TOOLKIT.format(arch="aarch64"),
        build_tree.sample_body("ascend_toolkit_install.info_8.5.0_cann_path_5.txt").replace(
            "[V100R001C18],", ""
        ),
    )
    (check,) = [
        c for c in read_versions(str(tmp_path))["checks"] if c["id"] == "versions.driver-cann"
    ]
    assert check["status"] == "warn"
    assert "R001C25" in check["evidence"] and "R001C18" in check["evidence"]


def test_nnal_differs_from_cann_warns(tmp_path):
    put(
        tmp_path,
        TOOLKIT.format(arch="aarch64"),
        build_tree.sample_body("ascend_toolkit_install.info_8.1.RC1_1.txt"),
    )
    put(tmp_path, NNAL, build_tree.sample_body("nnal_atb_version.info_8.0.0_1.txt"))
    (check,) = read_versions(str(tmp_path))["checks"]
    assert check["id"] == "versions.nnal-cann" and check["status"] == "warn"
    assert "Ascend-cann-nnal_8.1.RC1" in check["fix"]


def test_incomplete_driver_install_fails(tmp_path):
    put(
        tmp_path,
        "etc/ascend_install.info",
        build_tree.sample_body("ascend_install.info_1.txt") + "Driver_Install_Status=installing\n",
    )
    (check,) = read_versions(str(tmp_path))["checks"]
    assert check["id"] == "versions.install-status" and check["status"] == "fail"


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "is empty"),
        (b"   \n\n", "is empty"),
        (b"Version=24.1.rc3\nascendhal_ver", "line 2"),  # truncated mid-line
        (b"ascendhal_version=7.35.23\naicpu_version=1.0\n", "no Version= entry"),  # cut early
        (b"\x7fELF\x02\x01\x01\x00\x00\x00", "binary"),
        (b"Version=\xff\xfe24.1\n", "not UTF-8"),
        (b"hello world, this is not a version file\n", "not KEY=VALUE"),
        (b"<html><body>404</body></html>\n", "not KEY=VALUE"),
        (b"Version=latest-and-greatest!\n", "not a version number"),
        (b"Version=24.1.rc3\ncompatible_version_fw=7.0.0-7.5.99\n", "[low,high]"),
        (b"Version=24.1.rc3\ncompatible_version=C13,C15\n", "V100R001Cnn"),
    ],
)
def test_bad_driver_file_is_an_input_error(tmp_path, content, message):
    path = put(tmp_path, DRIVER, content)
    with pytest.raises(InputError) as err:
        read_versions(str(tmp_path))
    text = str(err.value)
    assert message in text
    assert str(path) in text
    assert "\n" not in text


def test_bad_files_of_each_kind_name_the_file(tmp_path):
    cases = [
        (FIRMWARE, b"firmware_version=1.0\n", "no Version= entry"),
        (TOOLKIT.format(arch="aarch64"), b"package_name=Ascend-cann-toolkit\n", "no version="),
        (NNAL, b"Platform : aarch64\n", "no Ascend-cann-atb"),
        (NNAL, b"Ascend-cann-atb=8.2.RC1\n", "not 'Key : value'"),
        ("etc/ascend_install.info", b"\x00\x01\x02", "binary"),
    ]
    for rel, content, message in cases:
        root = tmp_path / str(abs(hash(rel + message)))
        path = put(root, rel, content)
        with pytest.raises(InputError) as err:
            read_versions(str(root))
        assert message in str(err.value), rel
        assert str(path) in str(err.value)


def test_directory_in_place_of_a_file(tmp_path):
    (tmp_path / DRIVER).mkdir(parents=True)
    with pytest.raises(InputError, match="is a directory"):
        read_versions(str(tmp_path))


def test_missing_root(tmp_path):
    with pytest.raises(InputError, match="--root directory not found"):
        read_versions(str(tmp_path / "nope"))


# ----------------------------------------------------------------------------- interpreters


def test_packages_of_this_interpreter():
    got = query_packages(sys.executable)
    assert got["python"] == ".".join(str(n) for n in sys.version_info[:3])
    expected_torch = importlib.metadata.version("torch")
    assert got["packages"]["torch"] == expected_torch
    assert set(got["packages"]) == {"torch", "torch_npu", "vllm", "vllm_ascend"}


def test_packages_found_under_both_name_spellings(tmp_path, monkeypatch):
    site = tmp_path / "site"
    for dist, name, version in [
        ("torch_npu-2.8.0.post2.dist-info", "torch_npu", "2.8.0.post2"),
        ("vllm_ascend-0.13.0.dist-info", "vllm-ascend", "0.13.0"),
        ("vllm-0.13.0.dist-info", "vllm", "0.13.0"),
    ]:
        put(site, f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    info = read_versions(str(tmp_path), sys.executable)
    assert info["packages"]["torch_npu"] == "2.8.0.post2"
    assert info["packages"]["vllm_ascend"] == "0.13.0"
    assert info["packages"]["vllm"] == "0.13.0"
    assert info["python"]["executable"]


@pytest.mark.parametrize(
    "python, message",
    [
        ("/nonexistent/bin/python3", "not found"),
        ("/bin/false", "not a working Python"),
        ("/bin/echo", "not a working Python"),
    ],
)
def test_bad_interpreters(python, message):
    with pytest.raises(InputError, match=message):
        query_packages(python)


def test_relative_and_bare_interpreter_names(tmp_path, monkeypatch):
    monkeypatch.chdir(os.path.dirname(sys.executable))
    relative = query_packages(os.path.join(".", os.path.basename(sys.executable)))
    assert relative["packages"]["torch"] == importlib.metadata.version("torch")
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))
    assert query_packages(os.path.basename(sys.executable))["python"] == relative["python"]


def test_text_file_as_interpreter(tmp_path):
    path = put(tmp_path, "python", "not a program\n")
    with pytest.raises(InputError, match="not executable"):
        query_packages(str(path))


# ----------------------------------------------------------------------------- CLI


def test_cli_json(tmp_path, capsys):
    build_tree.build("a2-toolkit-8.2", tmp_path)
    assert main(["versions", "--root", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cann"]["version"] == "8.2.RC1"
    assert set(doc) >= {"driver", "firmware", "cann", "nnal", "install_info", "packages", "checks"}


def test_cli_human(tmp_path, capsys):
    build_tree.build("a2-cann-8.5", tmp_path)
    # driver 24.1.rc2.2 is too old for CANN 8.5.0: a FAIL, so exit 1 (as preflight)
    assert main(["versions", "--root", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "24.1.rc2.2" in out and "8.5.0" in out and "cann layout" in out
    assert "[7.0.0,7.2.99]" in out


def test_cli_bad_file_exit_2_one_line(tmp_path, capsys):
    put(tmp_path, DRIVER, b"\x00\x00garbage")
    assert main(["versions", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert DRIVER in err and "binary" in err
    assert "Traceback" not in err


def test_bom_and_crlf_from_an_editor_are_tolerated(tmp_path):
    body = build_tree.sample_body("driver_version.info_24.1.rc1_2.txt")
    put(tmp_path, DRIVER, b"\xef\xbb\xbf" + body.replace("\n", "\r\n").encode())
    driver = read_versions(str(tmp_path))["driver"]
    assert driver["version"] == "24.1.rc1"
    assert driver["compatible_version_fw"] == [["7.0.0", "7.2.99"]]


def test_human_output_has_no_python_reprs(tmp_path, capsys):
    """Reported: `(Innerversion None, fw [['7.0.0', '7.99.99']])`."""
    put(tmp_path, DRIVER, "Version=25.5.0\ncompatible_version_fw=[7.0.0,7.99.99]\n")
    put(tmp_path, FIRMWARE, "Version=7.8.0.5.201\n")
    put(tmp_path, NNAL, "Ascend-cann-atb : 8.5.0\n")
    build_tree.build("a2-toolkit-8.2", tmp_path / "full")
    for root in (tmp_path, tmp_path / "full"):
        assert main(["versions", "--root", str(root)]) == 0
        out = capsys.readouterr().out
        for repr_text in ("None", "[[", "['", "']"):
            assert repr_text not in out, (repr_text, out)
    assert main(["versions", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "25.5.0  (compatible firmware [7.0.0,7.99.99]) " in out
    assert "7.8.0.5.201  " + str(tmp_path / FIRMWARE) in out


def test_cann_pairing_lists_codes_without_reprs(tmp_path):
    put(tmp_path, DRIVER, build_tree.sample_body("driver_version.info_24.1.rc2.2_5.txt"))
    put(
        tmp_path,
        TOOLKIT.format(arch="aarch64"),
        build_tree.sample_body("ascend_toolkit_install.info_8.5.0_cann_path_5.txt").replace(
            "[V100R001C18],", ""
        ),
    )
    (check,) = [
        c for c in read_versions(str(tmp_path))["checks"] if c["id"] == "versions.driver-cann"
    ]
    assert "compatible_version [R001C30, R001C13" in check["evidence"]
    assert "'" not in check["evidence"]


def test_a_fifo_in_place_of_a_version_file_is_refused_at_once(tmp_path):
    """Reported: a FIFO made `versions` hang forever."""
    fifo = tmp_path / DRIVER
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    done = subprocess.run(
        [sys.executable, "-m", "ascend_deploy.cli", "versions", "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=30,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    assert done.returncode == 2, done.stderr
    assert DRIVER in done.stderr and "not a regular file" in done.stderr
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "body",
    [
        "Version=" + "9" * 900_000 + "x\n",
        "Version=24.1.0\ncompatible_version=" + "V" * 900_000 + "\n",
        "Version=24.1.0\ncompatible_version_fw=[" + "7," * 300_000 + "]\n",
        "Version=24.1.0\n" + "x" * 900_000 + "\n",
    ],
    ids=["version", "code-list", "fw-range", "line"],
)
def test_error_messages_cut_huge_values(tmp_path, capsys, body):
    """Reported: one message echoed 900 KB."""
    put(tmp_path, DRIVER, body)
    assert main(["versions", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 400 + len(str(tmp_path)), len(err)
    assert "..." in err


def test_a_flooding_interpreter_is_stopped(tmp_path):
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\nexec yes 'torch 2.10.0'\n")
    fake.chmod(0o755)
    with pytest.raises(InputError, match="more than 1 MiB"):
        query_packages(str(fake), timeout=30)
