"""Installed versions on an Ascend host: driver, firmware, CANN, NNAL, Python packages.

Paths and formats follow the version-file sources in docs/sources.md:

* driver   ``<ascend>/driver/version.info``   (``Version``, ``Innerversion``,
  ``compatible_version``, ``compatible_version_fw``)
* firmware ``<ascend>/firmware/version.info`` (``Version``, ``compatible_version_drv``)
* CANN <= 8.3: ``<ascend>/ascend-toolkit/latest/<arch>-linux/ascend_toolkit_install.info``;
  CANN >= 8.5: ``<ascend>/cann-<ver>`` directories with a ``<ascend>/cann`` link and
  ``<ascend>/cann/<arch>-linux/ascend_toolkit_install.info``; NNAE as a fallback
* NNAL     ``<ascend>/nnal/atb/latest/version.info`` (``Key : value``)
* ``/etc/ascend_install.info`` (its ``Driver_Install_Path_Param`` moves ``<ascend>``)

``<ascend>`` defaults to ``/usr/local/Ascend``. Every path is prefixed with ``root`` and
symlinks are resolved inside ``root``, so a container image or a test tree can be read.
A missing file is ``None`` (hosts that deploy with containers have no CANN); a present
file that cannot be read is an InputError naming it.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess

from ..errors import InputError
from ..versioning import is_version, same_release, version_key
from . import version_files as vf
from .npu_smi import OutputTooLarge, run_capped

DEFAULT_ASCEND = "/usr/local/Ascend"
INSTALL_INFO = "/etc/ascend_install.info"
PACKAGES = ("torch", "torch_npu", "vllm", "vllm_ascend")

# Runs inside the target interpreter; prints one JSON object.
_PACKAGE_QUERY = """
import json, sys
from importlib import metadata
names = {"torch": ["torch"], "torch_npu": ["torch_npu", "torch-npu"], "vllm": ["vllm"],
         "vllm_ascend": ["vllm_ascend", "vllm-ascend"]}
found = {}
for key, candidates in names.items():
    found[key] = None
    for name in candidates:
        try:
            found[key] = metadata.version(name)
            break
        except metadata.PackageNotFoundError:
            pass
print(json.dumps({"python": "%d.%d.%d" % sys.version_info[:3],
                  "executable": sys.executable, "packages": found}))
"""


# ----------------------------------------------------------------------------- paths


def in_root(root: str, path: str) -> str:
    """``path`` under ``root`` with symlinks resolved inside ``root`` (absolute links re-rooted)."""
    root = os.path.abspath(root or "/")
    if root == "/":
        return os.path.realpath(path)
    parts = [p for p in path.split("/") if p]
    current = root
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            current = os.path.dirname(current) if current != root else root
            continue
        if part == ".":
            continue
        candidate = os.path.join(current, part)
        if os.path.islink(candidate) and hops < 40:
            hops += 1
            target = os.readlink(candidate)
            if target.startswith("/"):
                current = root
            parts = [p for p in target.split("/") if p] + parts
            continue
        current = candidate
    return current


# ----------------------------------------------------------------------------- readers


def _read_pairs(root: str, path: str, what: str, style: str = "eq") -> tuple[str, dict] | None:
    real = in_root(root, path)
    text = vf.read_text(real, what)
    if text is None:
        return None
    return real, vf.parse_pairs(text, real, what, style)


def _check_version(value: str, source: str, key: str, what: str) -> str:
    if not is_version(value):
        raise InputError(
            f"{source}: {key}={vf.clip(value)!r} in the {what} is not a version number"
        )
    return value


def read_install_info(root: str = "/") -> dict | None:
    got = _read_pairs(root, INSTALL_INFO, "Ascend install record")
    if got is None:
        return None
    path, pairs = got
    return {"path": path, **pairs}


def read_driver(root: str, ascend: str) -> dict | None:
    what = "driver version file"
    got = _read_pairs(root, f"{ascend}/driver/version.info", what)
    if got is None:
        return None
    path, pairs = got
    version = _check_version(vf.require(pairs, "Version", path, what), path, "Version", what)
    inner = vf.get(pairs, "Innerversion")
    code = vf.inner_code(inner)
    return {
        "path": path,
        "version": version,
        "package_version": vf.get(pairs, "package_version"),
        "innerversion": inner,
        "inner_code": vf.code_label(code) if code else None,
        "compatible_version": _code_ranges(
            vf.parse_code_list(vf.get(pairs, "compatible_version"), path, "compatible_version")
        ),
        "compatible_version_fw": [
            list(r)
            for r in vf.parse_range_list(
                vf.get(pairs, "compatible_version_fw"), path, "compatible_version_fw"
            )
        ],
        "fields": pairs,
    }


def read_firmware(root: str, ascend: str) -> dict | None:
    what = "firmware version file"
    got = _read_pairs(root, f"{ascend}/firmware/version.info", what)
    if got is None:
        return None
    path, pairs = got
    version = _check_version(vf.require(pairs, "Version", path, what), path, "Version", what)
    return {
        "path": path,
        "version": version,
        "package_version": vf.get(pairs, "package_version"),
        "compatible_version_drv": [
            list(r)
            for r in vf.parse_range_list(
                vf.get(pairs, "compatible_version_drv"), path, "compatible_version_drv"
            )
        ],
        "fields": pairs,
    }


def _code_ranges(ranges: list[tuple[tuple, tuple]]) -> list[str]:
    out = []
    for low, high in ranges:
        label = vf.code_label(low)
        out.append(label if low == high else f"{label}-{vf.code_label(high)}")
    return out


def _arch_dirs(base: str) -> list[str]:
    """``<arch>-linux`` directories under ``base``, this machine's architecture first."""
    try:
        names = sorted(n for n in os.listdir(base) if n.endswith("-linux"))
    except OSError:
        return []
    machine = platform.machine()
    real = [n for n in names if not os.path.islink(os.path.join(base, n))]
    links = [n for n in names if n not in real]
    ordered = real + links
    ordered.sort(key=lambda n: 0 if n.startswith(machine) else 1)
    return ordered


def _version_dirs(root: str, base: str, prefix: str) -> list[str]:
    real = in_root(root, base)
    try:
        names = os.listdir(real)
    except OSError:
        return []
    found = []
    for name in names:
        if not name.startswith(prefix) or not os.path.isdir(os.path.join(real, name)):
            continue
        ver = name[len(prefix) :]
        if os.path.islink(os.path.join(real, name)) or not is_version(ver):
            continue
        found.append(ver)
    return sorted(found, key=version_key)


def read_cann(root: str, ascend: str) -> dict | None:
    """The CANN toolkit (>= 8.5 ``cann`` layout or <= 8.3 ``ascend-toolkit`` layout), else NNAE."""
    what = "CANN install record"
    candidates = []
    for layout, base, info in (
        ("cann", f"{ascend}/cann", "ascend_toolkit_install.info"),
        ("ascend-toolkit", f"{ascend}/ascend-toolkit/latest", "ascend_toolkit_install.info"),
    ):
        real_base = in_root(root, base)
        for arch in _arch_dirs(real_base):
            path = os.path.join(real_base, arch, info)
            text = vf.read_text(path, what)
            if text is not None:
                if all(path != seen for _l, seen, _p in candidates):  # latest -> cann link
                    candidates.append((layout, path, vf.parse_pairs(text, path, what)))
                break
    nnae = f"{ascend}/nnae/latest/ascend_nnae_install.info"
    if not candidates:
        real = in_root(root, nnae)
        text = vf.read_text(real, "NNAE install record")
        if text is not None:
            candidates.append(("nnae", real, vf.parse_pairs(text, real, "NNAE install record")))
    if not candidates:
        return None
    parsed = []
    for layout, path, pairs in candidates:
        version = _check_version(vf.require(pairs, "version", path, what), path, "version", what)
        inner = vf.get(pairs, "innerversion")
        code = vf.inner_code(inner)
        parsed.append(
            {
                "path": path,
                "layout": layout,
                "package_name": vf.get(pairs, "package_name"),
                "version": version,
                "innerversion": inner,
                "inner_code": vf.code_label(code) if code else None,
                "compatible_version": _code_ranges(
                    vf.parse_code_list(
                        vf.get(pairs, "compatible_version"), path, "compatible_version"
                    )
                ),
                "arch": vf.get(pairs, "arch"),
                "install_path": vf.get(pairs, "path"),
            }
        )
    # Both layouts present (8.3 left behind by an 8.5 install): the newer one is active.
    parsed.sort(key=lambda c: version_key(c["version"]), reverse=True)
    chosen = parsed[0]
    chosen["installed"] = sorted(
        {
            *_version_dirs(root, ascend, "cann-"),
            *_version_dirs(root, f"{ascend}/ascend-toolkit", ""),
            *(c["version"] for c in parsed),
        },
        key=version_key,
    )
    chosen["others"] = [{"path": c["path"], "version": c["version"]} for c in parsed[1:]]
    return chosen


def read_nnal(root: str, ascend: str) -> dict | None:
    what = "NNAL/ATB version file"
    got = _read_pairs(root, f"{ascend}/nnal/atb/latest/version.info", what, style="colon")
    if got is None:
        return None
    path, pairs = got
    version = vf.require(pairs, "Ascend-cann-atb", path, what)
    _check_version(version, path, "Ascend-cann-atb", what)
    return {
        "path": path,
        "version": version,
        "build": vf.get(pairs, "Ascend-cann-atb Version"),
        "platform": vf.get(pairs, "Platform"),
        "branch": vf.get(pairs, "branch"),
        "commit": vf.get(pairs, "commit id"),
    }


def query_packages(python: str, timeout: float = 60.0) -> dict:
    """torch / torch_npu / vllm / vllm_ascend versions as seen by interpreter ``python``."""
    # resolve before running from "/" (cwd-independent, so site-packages in cwd do not leak)
    exe = os.path.abspath(python) if os.sep in python else (shutil.which(python) or python)
    try:
        # stdout read through a capped pipe: a wrong PATH (a script that floods) cannot
        # exhaust memory
        status, out, err = run_capped([exe, "-c", _PACKAGE_QUERY], timeout, 1 << 20, cwd="/")
    except OutputTooLarge:
        raise InputError(
            f"{python}: wrote more than 1 MiB to the package query; not a Python interpreter"
        ) from None
    except FileNotFoundError:
        raise InputError(f"{python}: Python interpreter not found; pass --python PATH") from None
    except PermissionError:
        raise InputError(
            f"{python}: not executable; pass the path of a Python interpreter"
        ) from None
    except OSError as exc:
        raise InputError(f"{python}: cannot run it as a Python interpreter ({exc})") from None
    except subprocess.TimeoutExpired:
        raise InputError(f"{python}: did not answer the package query in {timeout:.0f}s") from None
    stdout = out.decode("utf-8", errors="replace")
    stderr = err.decode("utf-8", errors="replace")
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    try:
        doc = json.loads(lines[-1]) if lines else None
    except (json.JSONDecodeError, RecursionError):
        doc = None
    packages = doc.get("packages") if isinstance(doc, dict) else None
    if status != 0 or not isinstance(packages, dict):
        last = (stderr.strip().splitlines() or ["no output"])[-1][:120]
        raise InputError(
            f"{python}: is not a working Python >= 3.8 interpreter "
            f"(exit {status}: {last}); pass --python PATH"
        )
    packages = {k: vf.clip(str(packages[k])) if packages.get(k) else None for k in PACKAGES}
    return {"python": doc.get("python"), "executable": doc.get("executable"), "packages": packages}


# ----------------------------------------------------------------------------- checks


def _finding(fid: str, pitfall: int | None, status: str, evidence: str, fix: str = "") -> dict:
    return {"id": fid, "pitfall": pitfall, "status": status, "evidence": evidence, "fix": fix}


def _in_range(version: str, low: str, high: str) -> bool:
    return version_key(low) <= version_key(version) <= version_key(high)


def firmware_pairing(driver: dict, firmware: dict) -> dict:
    """Firmware ``Version`` within the driver's ``compatible_version_fw`` ranges."""
    fw = firmware["version"]
    ranges = driver.get("compatible_version_fw") or []
    shown = ",".join(f"[{lo},{hi}]" for lo, hi in ranges)
    fid = "versions.driver-firmware"
    if not ranges:
        return _finding(
            fid,
            1,
            "warn",
            f"driver {driver['version']} does not list compatible_version_fw; "
            f"firmware {fw} not checked",
            "",
        )
    try:
        ok = any(_in_range(fw, lo, hi) for lo, hi in ranges)
    except ValueError:
        return _finding(fid, 1, "warn", f"cannot compare firmware {fw} with {shown}", "")
    if ok:
        return _finding(
            fid, 1, "ok", f"firmware {fw} is within driver {driver['version']} range {shown}"
        )
    return _finding(
        fid,
        1,
        "fail",
        f"firmware {fw} is outside driver {driver['version']} compatible_version_fw {shown}",
        "install the Ascend HDK firmware released with this driver (firmware first, then "
        "driver, then reboot), or a driver whose compatible_version_fw covers the firmware",
    )


def _code_in(code: tuple | None, labels: list[str]) -> bool:
    if code is None:
        return False
    for label in labels:
        ends = [vf.inner_code("V100" + part) for part in label.split("-")]
        if None in ends:
            continue
        if ends[0] <= code <= ends[-1]:
            return True
    return False


def cann_pairing(driver: dict, cann: dict) -> dict:
    """CANN innerversion C-code in the driver's ``compatible_version`` (or the reverse).

    This rule is observed on real hosts, not documented by Huawei (docs/sources.md):
    each side's ``compatible_version`` lists release trains of the other side. A miss is
    therefore a warning, not a failure.
    """
    fid = "versions.driver-cann"
    cann_code = vf.inner_code(cann.get("innerversion"))
    drv_code = vf.inner_code(driver.get("innerversion"))
    note = "(observed pairing rule, not documented by Huawei)"
    if cann_code is None or drv_code is None:
        return _finding(
            fid,
            1,
            "warn",
            f"driver {driver['version']} or CANN {cann['version']} has no innerversion; "
            "pairing not checked",
            "",
        )
    cann_label, drv_label = vf.code_label(cann_code), vf.code_label(drv_code)
    if _code_in(cann_code, driver.get("compatible_version") or []):
        return _finding(
            fid,
            1,
            "ok",
            f"CANN {cann['version']} ({cann_label}) is in driver {driver['version']} "
            f"compatible_version {note}",
        )
    if _code_in(drv_code, cann.get("compatible_version") or []):
        return _finding(
            fid,
            1,
            "ok",
            f"driver {driver['version']} ({drv_label}) is in CANN {cann['version']} "
            f"compatible_version {note}",
        )
    return _finding(
        fid,
        1,
        "warn",
        f"CANN {cann['version']} ({cann_label}) is not in driver {driver['version']} "
        f"compatible_version [{', '.join(driver.get('compatible_version') or [])}] nor the "
        f"driver ({drv_label}) "
        f"in the CANN list {note}",
        "check the CANN release notes for the supported Ascend HDK and upgrade the driver "
        "and firmware, or install a CANN release listed for this driver",
    )


def nnal_pairing(cann: dict, nnal: dict) -> dict:
    fid = "versions.nnal-cann"
    if same_release(nnal["version"], cann["version"]):
        return _finding(fid, 1, "ok", f"NNAL/ATB {nnal['version']} matches CANN {cann['version']}")
    return _finding(
        fid,
        1,
        "warn",
        f"NNAL/ATB {nnal['version']} differs from CANN {cann['version']}; torch_npu can fail "
        "to import with undefined atb symbols",
        f"install Ascend-cann-nnal_{cann['version']} and source "
        "/usr/local/Ascend/nnal/atb/set_env.sh",
    )


def install_status(info: dict) -> dict | None:
    status = vf.get(info, "Driver_Install_Status")
    if status is None:
        return None
    if status.lower() == "complete":
        return _finding("versions.install-status", 1, "ok", "Driver_Install_Status=complete")
    return _finding(
        "versions.install-status",
        1,
        "fail",
        f"{info.get('path', INSTALL_INFO)}: Driver_Install_Status={status}",
        "rerun the driver installer (./Ascend-hdk-*-npu-driver_*.run --full --install-for-all)",
    )


def pairing_checks(info: dict) -> list[dict]:
    """Local pairing findings for a ``read_versions`` result."""
    out = []
    if info.get("install_info"):
        status = install_status(info["install_info"])
        if status:
            out.append(status)
    if info.get("driver") and info.get("firmware"):
        out.append(firmware_pairing(info["driver"], info["firmware"]))
    if info.get("driver") and info.get("cann"):
        out.append(cann_pairing(info["driver"], info["cann"]))
    if info.get("cann") and info.get("nnal"):
        out.append(nnal_pairing(info["cann"], info["nnal"]))
    return out


# ----------------------------------------------------------------------------- entry point


def ascend_home(install_info: dict | None) -> str:
    """The install root named by ``Driver_Install_Path_Param``, else /usr/local/Ascend."""
    if install_info:
        value = vf.get(install_info, "Driver_Install_Path_Param")
        if value and value.startswith("/"):
            return value.rstrip("/") or "/"
    return DEFAULT_ASCEND


def read_versions(root: str = "/", python: str | None = None) -> dict:
    """Everything ``ascend-deploy versions`` reports, as a dict (see module docstring)."""
    if not os.path.isdir(root):
        raise InputError(f"{root}: --root directory not found")
    install_info = read_install_info(root)
    ascend = ascend_home(install_info)
    info: dict = {
        "root": root,
        "ascend_home": ascend,
        "driver": read_driver(root, ascend),
        "firmware": read_firmware(root, ascend),
        "cann": read_cann(root, ascend),
        "nnal": read_nnal(root, ascend),
        "install_info": install_info,
        "python": None,
        "packages": dict.fromkeys(PACKAGES),
    }
    if python:
        got = query_packages(python)
        info["python"] = {"executable": got["executable"], "version": got["python"]}
        info["packages"] = got["packages"]
    info["checks"] = pairing_checks(info)
    return info
