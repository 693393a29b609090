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
    driver_compatible: list[str] | None = None  # C-codes of CANN trains the driver supports
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


# CANN release -> the "C-code" of its innerversion (V100R001Cnn...). Sources: ascend-host.md
# §3.4 (C19 8.0.RC3, C20 8.0.0, C21 8.1.RC1, C22 8.2.RC1, C23 8.3.RC1/RC2, C25 8.5.0, from real
# ascend_toolkit_install.info files); 8.5.1 and 9.1.0 from the simulator's presets
# (src/ascend_sim/data/presets, not a published figure).
CANN_CODES = {
    "8.0.RC3": "C19",
    "8.0.0": "C20",
    "8.1.RC1": "C21",
    "8.2.RC1": "C22",
    "8.3.RC1": "C23",
    "8.3.RC2": "C23",
    "8.5.0": "C25",
    "8.5.1": "C25",
    "9.1.0": "C31",
}


def driver_compatible(
    driver_version: str | None, cann: str, compatible_codes: list[str] | None = None
) -> bool | None:
    """Whether the host driver supports the image's CANN (None = unknown).

    Two sources, either can say no: ``ascend_deploy.compat.driver_supports_cann`` (published
    pairings, ascend-host.md §5.3) and the driver's own ``compatible_version`` list of CANN
    C-codes from its version.info (the rule observed on real hosts, ascend-host.md §5.3).
    """
    if driver_version is None:
        return False
    published = None
    try:
        from ascend_deploy.compat import driver_supports_cann

        published = driver_supports_cann(driver_version, cann)
    except ImportError:
        pass
    local = None
    code = CANN_CODES.get(cann)
    if compatible_codes and code:
        local = code in compatible_codes
    if published is False or local is False:
        return False
    if published or local:
        return True
    return None


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
    return driver_compatible(env.driver_version, cann, env.driver_compatible) is not False


def device_count() -> int:
    env = probe()
    return len(env.visible) if env.usable else 0
