"""What the emulated torch_npu sees of the host: device nodes, driver, simulated state.

Paths follow the documented container mounts (vllm-ascend.md §2.2): ``/dev/davinciN`` and
the management nodes, ``/usr/local/Ascend/driver/version.info``, ``driver/lib64`` (which
carries the simulated host state in ``.ascend-sim/state.json``) and ``/usr/local/dcmi``
(the live NPU-memory registry). Every path is prefixed by ``ASCEND_SIM_ROOT`` (default
``/``) so tests run the emulator as a plain process against a temporary tree.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

MANAGEMENT_NODES = ("davinci_manager", "devmm_svm", "hisi_hdc")
STATE_REL = "usr/local/Ascend/driver/lib64/.ascend-sim/state.json"
DRIVER_VERSION_REL = "usr/local/Ascend/driver/version.info"
REGISTRY_REL = "usr/local/dcmi/.ascend-sim/procs"


def root() -> str:
    return os.environ.get("ASCEND_SIM_ROOT") or "/"


def path(rel: str) -> str:
    return os.path.join(root(), rel)


def registry_dir() -> str:
    return os.environ.get("ASCEND_SIM_PROCS") or path(REGISTRY_REL)


@dataclass
class NpuEnvironment:
    """The result of probing devices and driver, as torch_npu would at import/set_device."""

    visible: list[int] = field(default_factory=list)  # logical order = ASCEND_RT_VISIBLE_DEVICES
    missing: list[str] = field(default_factory=list)  # device nodes / mounts that are absent
    driver_version: str | None = None
    driver_compatible: list[str] | None = None  # compatible_version C-codes (advisory)
    state: dict | None = None
    state_error: str | None = None

    @property
    def usable(self) -> bool:
        return not self.missing and bool(self.visible) and self.state is not None


def _read_driver_info(p: str) -> tuple[str | None, list[str] | None]:
    """``Version=`` and the C-codes of ``compatible_version=`` from driver/version.info."""
    version, compatible = None, None
    try:
        with open(p, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                m = re.match(r"\s*(?:\d+\s+)?(Version|compatible_version)=(.*)", line)
                if not m:
                    continue
                if m.group(1) == "Version" and version is None:
                    version = m.group(2).strip() or None
                elif m.group(1) == "compatible_version":
                    compatible = re.findall(r"C\d+", m.group(2))
    except OSError:
        return None, None
    return version, compatible


def probe() -> NpuEnvironment:
    """Which NPUs this process can use, and what is missing."""
    env = NpuEnvironment()
    dev = path("dev")
    present = []
    try:
        for name in os.listdir(dev):
            m = re.fullmatch(r"davinci(\d+)", name)
            if m:
                present.append(int(m.group(1)))
    except OSError:
        pass
    present.sort()
    mask = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    if mask is not None and mask.strip():
        wanted = []
        for part in mask.split(","):
            part = part.strip()
            if part.isdigit():
                wanted.append(int(part))
        env.visible = [n for n in wanted if n in present]
        env.missing += [f"/dev/davinci{n}" for n in wanted if n not in present]
    else:
        env.visible = present
        if not present:
            env.missing.append("/dev/davinci*")
    for node in MANAGEMENT_NODES:
        if not os.path.exists(os.path.join(dev, node)):
            env.missing.append(f"/dev/{node}")
    env.driver_version, env.driver_compatible = _read_driver_info(path(DRIVER_VERSION_REL))
    if env.driver_version is None:
        env.missing.append("/" + DRIVER_VERSION_REL)
    state_path = path(STATE_REL)
    try:
        with open(state_path, encoding="utf-8") as fh:
            env.state = json.load(fh)
        if not isinstance(env.state, dict):
            raise ValueError("not a JSON object")
    except FileNotFoundError:
        env.state = None
        env.missing.append("/usr/local/Ascend/driver/lib64 (driver libraries not mounted)")
    except (OSError, ValueError) as exc:
        env.state = None
        env.state_error = f"{state_path}: {exc}"
        env.missing.append(f"{state_path} (unreadable: {exc})")
    return env


def driver_compatible(driver_version: str | None, cann: str) -> bool | None:
    """Whether the host driver runs the image's CANN (None = no published statement).

    One source of truth with the bundle's preflight: ``ascend_deploy.compat``'s published
    driver/HDK <-> CANN pairings (ascend-host.md §5.3). The driver's own ``compatible_version``
    C-code list is only advisory (ascend-host.md §3.4: driver 24.1.rc3 lists C13..C19, yet CANN
    8.2.RC1, C22, is published for it), so it never refuses a CANN here; preflight reports a
    miss as a warning. Unknown pairings run, as they would on a host whose HDK is new enough.
    """
    if driver_version is None:
        return False
    from ascend_deploy.compat import driver_supports_cann

    return driver_supports_cann(driver_version, cann)


def npu_available(cann: str | None = None) -> bool:
    """``torch.npu.is_available()``: devices and mounts present and the driver compatible."""
    env = probe()
    if not env.usable:
        return False
    if env.state and env.state.get("faults", {}).get("driver_not_loaded"):
        return False
    if cann is None:
        try:
            from .versions import load_row

            cann = load_row()["cann"]
        except Exception:
            return False
    return driver_compatible(env.driver_version, cann) is not False


def device_count() -> int:
    env = probe()
    return len(env.visible) if env.usable else 0
