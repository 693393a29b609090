"""Materialise a simulated Ascend host from its state file (run at container start).

``python3 -m ascend_sim.host_setup --state /etc/ascend-sim/state.json [--root /]`` writes:

* ``/usr/local/Ascend/driver/version.info``, ``driver/lib64/{driver,common}/*.so``
  placeholders and a copy of the state in ``driver/lib64/.ascend-sim/state.json`` (the
  driver lib64 directory is mounted into serving containers, vllm-ascend installation.md);
* ``/usr/local/Ascend/firmware/version.info``;
* the CANN tree of the chosen layout: ``ascend-toolkit/<ver>/<arch>-linux/`` with a
  ``latest`` link (CANN <= 8.3) or ``cann-<ver>/<arch>-linux/`` with a ``cann`` link
  (CANN >= 8.5), each with ``ascend_toolkit_install.info``, ``version.cfg`` and
  ``set_env.sh``;
* ``/usr/local/dcmi/`` with the live NPU-memory registry directory ``.ascend-sim/procs``;
* ``/etc/ascend_install.info`` (``Driver_Install_Status=complete``);
* ``/dev/davinci0..N-1``, ``/dev/davinci_manager``, ``/dev/devmm_svm``, ``/dev/hisi_hdc``;
* the ``HwHiAiUser`` user and group.

File formats follow the samples in tests/data/samples (driver/firmware
``version.info``, ``ascend_toolkit_install.info``, ``version.cfg``, ``ascend_install.info``)
and the version-file sources in docs/sources.md.

Device numbers: no public source documents the driver's major/minor numbers
(they are allocated dynamically). The simulator uses character majors from the range
Linux reserves for local and experimental use (240-254, Documentation/admin-guide/
devices.txt): 240 for ``davinciN`` (minor N), 241 ``davinci_manager``, 242 ``devmm_svm``,
243 ``hisi_hdc``. Without CAP_MKNOD (or not root) regular placeholder files are created
instead and the summary says so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys

from ascend_deploy.errors import AscendDeployError

from .state import device_count, load_state

ASCEND = "usr/local/Ascend"
STATE_COPY = f"{ASCEND}/driver/lib64/.ascend-sim/state.json"
REGISTRY = "usr/local/dcmi/.ascend-sim/procs"
DAVINCI_MAJOR = 240
MANAGEMENT_NODES = {"davinci_manager": 241, "devmm_svm": 242, "hisi_hdc": 243}
# Names seen in driver lib64 listings and loader errors (libascend_hal.so is the HAL the
# runtime dlopens); contents are placeholders.
DRIVER_LIBS = {
    "driver": ["libascend_hal.so", "libdrvdsmi_host.so", "libdcmi.so"],
    "common": ["libc_sec.so", "libmmpa.so"],
}
CANN_COMPONENTS = ("runtime", "compiler", "hccl", "opp", "toolkit", "aoe", "ncs", "opp_kernel")
PLACEHOLDER = b"ascend-sim placeholder: not a real library\n"


def _path(root: str, rel: str) -> str:
    return os.path.join(root, rel.lstrip("/"))


def _write(root: str, rel: str, text: str | bytes, mode: int = 0o644) -> str:
    path = _path(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = text.encode("utf-8") if isinstance(text, str) else text
    with open(path, "wb") as fh:
        fh.write(data)
    os.chmod(path, mode)
    return path


def _symlink(root: str, rel: str, target: str) -> None:
    path = _path(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.islink(path) or os.path.isfile(path):
        os.remove(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)
    os.symlink(target, path)


def _pairs(pairs: list[tuple[str, str | None]]) -> str:
    return "".join(f"{k}={v}\n" for k, v in pairs if v is not None)


# --------------------------------------------------------------------------- files


def driver_version_info(v: dict) -> str:
    """``driver/version.info`` (keys and order of driver_version.info_24.1.rc3_1.txt)."""
    return _pairs(
        [
            ("Version", v["driver"]),
            ("ascendhal_version", "7.35.23"),
            ("aicpu_version", "1.0"),
            ("tdt_version", "1.0"),
            ("log_version", "1.0"),
            ("prof_version", "2.0"),
            ("dvppkernels_version", "1.1"),
            ("tsfw_version", "1.0"),
            ("Innerversion", v.get("driver_inner")),
            ("compatible_version", v.get("driver_compatible")),
            ("compatible_version_fw", v.get("driver_compatible_fw") or "[7.0.0,7.99.99]"),
            ("package_version", v["driver"]),
        ]
    )


def firmware_version_info(v: dict) -> str:
    """``firmware/version.info`` (firmware_version.info_7.1.0.11.220_1.txt)."""
    return _pairs(
        [
            ("Version", v["firmware"]),
            ("firmware_version", "1.0"),
            ("package_version", v["driver"]),
            ("compatible_version_drv", v.get("firmware_compatible_drv")),
        ]
    )


def toolkit_install_info(v: dict, install_path: str) -> str:
    """``ascend_toolkit_install.info`` (ascend_toolkit_install.info_8.2.RC1_3.txt)."""
    return _pairs(
        [
            ("package_name", "Ascend-cann-toolkit"),
            ("version", v["cann"]),
            ("innerversion", v.get("cann_inner")),
            ("compatible_version", v.get("cann_compatible")),
            ("arch", v["arch"]),
            ("os", "linux"),
            ("path", install_path),
        ]
    )


def version_cfg(v: dict) -> str:
    """``version.cfg`` (version.cfg_8.0.0_1.txt): ``[<inner>:<CANN>]`` per component."""
    inner = "7.8.0.1.100"  # component build numbers are not derivable from the state
    lines = ["# version: 1.0"]
    for kind in ("running", "upgrade", "installed"):
        lines += [f"{c}_{kind}_version=[{inner}:{v['cann']}]" for c in CANN_COMPONENTS]
    return "\n".join(lines) + "\n"


def set_env_sh(home: str) -> str:
    """A minimal ``set_env.sh`` exporting what the real one exports (docs/sources.md)."""
    return (
        "# ascend-sim: environment of the simulated CANN install\n"
        f"export ASCEND_TOOLKIT_HOME={home}\n"
        f"export ASCEND_HOME_PATH={home}\n"
        f"export ASCEND_OPP_PATH={home}/opp\n"
        f"export ASCEND_AICPU_PATH={home}\n"
        f"export LD_LIBRARY_PATH={home}/lib64:/usr/local/Ascend/driver/lib64/driver:"
        "/usr/local/Ascend/driver/lib64/common:${LD_LIBRARY_PATH:-}\n"
    )


def install_info() -> str:
    """``/etc/ascend_install.info`` (ascend_install.info_1.txt plus the install status)."""
    return _pairs(
        [
            ("UserName", "HwHiAiUser"),
            ("UserGroup", "HwHiAiUser"),
            ("Firmware_Install_Type", "full"),
            ("Firmware_Install_Path_Param", "/usr/local/Ascend"),
            ("Driver_Install_Type", "full"),
            ("Driver_Install_Path_Param", "/usr/local/Ascend"),
            ("Driver_Install_For_All", "yes"),
            ("Driver_Install_Mode", "normal"),
            ("Driver_Install_Status", "complete"),
        ]
    )


def write_cann(root: str, v: dict) -> str:
    """The CANN tree; returns the install root (``.../latest`` or ``.../cann``)."""
    ver, arch = v["cann"], v["arch"]
    if v["cann_layout"] == "cann":
        real = f"/{ASCEND}/cann-{ver}"
        link, target = f"{ASCEND}/cann", f"cann-{ver}"
    else:
        real = f"/{ASCEND}/ascend-toolkit/{ver}"
        link, target = f"{ASCEND}/ascend-toolkit/latest", ver
    _write(root, f"{real}/{arch}-linux/ascend_toolkit_install.info",
           toolkit_install_info(v, f"{real}/{arch}-linux"))  # fmt: skip
    _write(root, f"{real}/version.cfg", version_cfg(v))
    for component in CANN_COMPONENTS:
        _write(root, f"{real}/{component}/version.info",
               _pairs([("Version", ver), ("version_dir", ver)]))  # fmt: skip
    _write(root, f"{real}/set_env.sh", set_env_sh("/" + link), 0o755)
    _symlink(root, link, target)
    if v["cann_layout"] != "cann":
        _write(root, f"{ASCEND}/ascend-toolkit/set_env.sh", set_env_sh("/" + link), 0o755)
    return "/" + link


# --------------------------------------------------------------------------- devices, user


def make_devices(root: str, count: int) -> tuple[list[str], bool]:
    """Create the device nodes; returns (paths, real character devices?)."""
    nodes = [(f"davinci{i}", DAVINCI_MAJOR, i) for i in range(count)]
    nodes += [(name, major, 0) for name, major in MANAGEMENT_NODES.items()]
    dev = _path(root, "dev")
    os.makedirs(dev, exist_ok=True)
    made, real = [], True
    for name, major, minor in nodes:
        path = os.path.join(dev, name)
        if os.path.lexists(path):
            if real and stat.S_ISCHR(os.lstat(path).st_mode):
                made.append(path)
                continue
            os.remove(path)
        try:
            if not real:
                raise PermissionError
            os.mknod(path, 0o660 | stat.S_IFCHR, os.makedev(major, minor))
            os.chmod(path, 0o660)  # mknod applies the umask
        except (PermissionError, OSError):
            real = False
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(f"ascend-sim placeholder for char device {major}:{minor}\n")
        made.append(path)
    if not real:  # make every node the same kind
        for path in made:
            if stat.S_ISCHR(os.lstat(path).st_mode):
                os.remove(path)
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write("ascend-sim placeholder for a char device\n")
    return made, real


def ensure_user(root: str) -> str:
    """Create ``HwHiAiUser:HwHiAiUser`` (the driver installer's default)."""
    passwd, group = _path(root, "etc/passwd"), _path(root, "etc/group")
    if os.path.isfile(passwd):
        with open(passwd, encoding="utf-8") as fh:
            if any(line.startswith("HwHiAiUser:") for line in fh):
                return "exists"
    if os.path.abspath(root) == "/" and shutil.which("useradd") and os.geteuid() == 0:
        subprocess.run(["groupadd", "-f", "HwHiAiUser"], check=True, capture_output=True)
        subprocess.run(
            ["useradd", "-g", "HwHiAiUser", "-d", "/home/HwHiAiUser", "-m", "HwHiAiUser",
             "-s", "/bin/bash"],
            check=True, capture_output=True,
        )  # fmt: skip
        return "created with useradd"
    ids = set()
    for path in (passwd, group):
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as fh:
                ids |= {
                    int(p[2]) for p in (ln.split(":") for ln in fh) if len(p) > 2 and p[2].isdigit()
                }
    uid = next(i for i in range(1000, 60000) if i not in ids)
    os.makedirs(os.path.dirname(passwd), exist_ok=True)
    with open(group, "a", encoding="utf-8") as fh:
        fh.write(f"HwHiAiUser:x:{uid}:\n")
    with open(passwd, "a", encoding="utf-8") as fh:
        fh.write(f"HwHiAiUser:x:{uid}:{uid}::/home/HwHiAiUser:/bin/bash\n")
    return f"added to {passwd} (uid {uid})"


# --------------------------------------------------------------------------- entry point


def setup(state_path: str, root: str = "/") -> dict:
    """Materialise the host under ``root``; returns a summary."""
    state = load_state(state_path)
    v = state["versions"]
    _write(root, f"{ASCEND}/driver/version.info", driver_version_info(v))
    for sub, names in DRIVER_LIBS.items():
        for name in names:
            _write(root, f"{ASCEND}/driver/lib64/{sub}/{name}", PLACEHOLDER)
    _write(root, STATE_COPY, json.dumps(state, indent=2) + "\n")
    _write(root, f"{ASCEND}/firmware/version.info", firmware_version_info(v))
    cann_home = write_cann(root, v)
    _write(root, "usr/local/dcmi/libdcmi.so", PLACEHOLDER)
    _write(root, "usr/local/dcmi/dcmi_interface_api.h", "/* ascend-sim placeholder */\n")
    registry = _path(root, REGISTRY)
    os.makedirs(registry, exist_ok=True)
    os.chmod(registry, 0o1777)  # serving containers of any user register here
    _write(root, "etc/ascend_install.info", install_info())
    nodes, real = make_devices(root, device_count(state))
    user = ensure_user(root)
    return {
        "preset": state["preset"],
        "root": root,
        "driver": v["driver"],
        "firmware": v["firmware"],
        "cann": v["cann"],
        "cann_home": cann_home,
        "devices": len(nodes),
        "device_kind": "character devices"
        if real
        else "regular placeholder files (mknod not permitted: not root or no CAP_MKNOD)",
        "user": user,
        "registry": registry,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m ascend_sim.host_setup",
        description="Materialise a simulated Ascend host from its state file.",
    )
    parser.add_argument("--state", default=os.environ.get("ASCEND_SIM_STATE",
                        "/etc/ascend-sim/state.json"), help="state file (JSON)")  # fmt: skip
    parser.add_argument("--root", default="/", help="install under this directory (tests)")
    args = parser.parse_args(argv)
    try:
        summary = setup(args.state, args.root)
    except AscendDeployError as exc:
        print(f"host_setup: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        print(f"host_setup: error: {exc.filename or args.root}: {exc.strerror}", file=sys.stderr)
        return 1
    print(
        f"host_setup: {summary['preset']}: driver {summary['driver']}, firmware "
        f"{summary['firmware']}, CANN {summary['cann']} at {summary['cann_home']}, "
        f"{summary['devices']} device nodes as {summary['device_kind']}; HwHiAiUser "
        f"{summary['user']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
