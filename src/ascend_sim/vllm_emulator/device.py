"""What the emulated torch_npu sees of the host: device nodes, driver, simulated state.

Paths follow the documented container mounts (vllm-ascend installation.md): ``/dev/davinciN`` and
the management nodes, ``/usr/local/Ascend/driver/version.info``, ``driver/lib64`` (which
carries the simulated host state in ``.ascend-sim/state.json``) and ``/usr/local/dcmi``
(the live NPU-memory registry). Every path is prefixed by ``ASCEND_SIM_ROOT`` (default
``/``) so tests run the emulator as a plain process against a temporary tree.
"""

from __future__ import annotations

import glob
import json
import os
import re
from dataclasses import dataclass, field

from .cann_packages import CANN_PACKAGES, code, code_ranges, listed

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

    # Host device ids, in the order the runtime uses them: the mounted /dev/davinciN are
    # numbered 0..k-1 inside the container (sorted by N) and ASCEND_RT_VISIBLE_DEVICES picks
    # from that numbering (docs/device-numbering.md).
    visible: list[int] = field(default_factory=list)
    mounted: list[int] = field(default_factory=list)  # host ids of the mounted /dev/davinciN
    mask: str | None = None  # ASCEND_RT_VISIBLE_DEVICES as given
    dropped: list[str] = field(default_factory=list)  # mask entries outside the container's 0..k-1
    missing: list[str] = field(default_factory=list)  # device nodes / mounts that are absent
    driver_version: str | None = None
    driver_inner: str | None = None  # Innerversion (the driver's release train, C-code)
    driver_compatible: str | None = None  # compatible_version: the CANN trains it accepts
    state: dict | None = None
    state_error: str | None = None

    @property
    def usable(self) -> bool:
        return not self.missing and bool(self.mounted) and self.state is not None


def _read_info(p: str, keys: tuple[str, ...]) -> dict[str, str]:
    """``KEY=VALUE`` lines of a version/install-info file (first occurrence of each key)."""
    out: dict[str, str] = {}
    try:
        with open(p, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                m = re.match(r"\s*(?:\d+\s+)?(\w+)=(.*)", line)
                if m and m.group(1) in keys and m.group(1) not in out:
                    out[m.group(1)] = m.group(2).strip()
    except OSError:
        return {}
    return out


def _read_driver_info(p: str) -> tuple[str | None, str | None, str | None]:
    """``Version``, ``Innerversion`` and ``compatible_version`` of driver/version.info."""
    info = _read_info(p, ("Version", "Innerversion", "compatible_version"))
    return (
        info.get("Version") or None,
        info.get("Innerversion") or None,
        info.get("compatible_version") or None,
    )


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
    env.mounted = present
    if not present:
        env.missing.append("/dev/davinci*")
    mask = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    if mask is not None and mask.strip():
        # The runtime reads the mask as container numbering and silently drops entries that
        # are not in it (vllm-ascend PR #10227); the failure shows at set_device.
        env.mask = mask
        for part in mask.split(","):
            part = part.strip()
            if part.isdigit() and int(part) < len(present):
                env.visible.append(present[int(part)])
            else:
                env.dropped.append(part)
    else:
        env.visible = list(present)
    for node in MANAGEMENT_NODES:
        if not os.path.exists(os.path.join(dev, node)):
            env.missing.append(f"/dev/{node}")
    env.driver_version, env.driver_inner, env.driver_compatible = _read_driver_info(
        path(DRIVER_VERSION_REL)
    )
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


CANN_INFO_GLOBS = (
    "usr/local/Ascend/cann/*-linux/ascend_toolkit_install.info",
    "usr/local/Ascend/ascend-toolkit/latest/*-linux/ascend_toolkit_install.info",
)


def image_cann(cann: str) -> tuple[str | None, str | None]:
    """``innerversion`` and ``compatible_version`` of the image's CANN ``cann``: from its
    ascend_toolkit_install.info when that carries them, else what the package knows of itself
    (``cann_packages``)."""
    for pattern in CANN_INFO_GLOBS:
        for found in sorted(glob.glob(path(pattern))):
            info = _read_info(found, ("version", "innerversion", "compatible_version"))
            if info.get("version") == cann and info.get("innerversion"):
                return info["innerversion"], info.get("compatible_version")
    return CANN_PACKAGES.get(cann, (None, None))


def cann_runs_on_driver(env: NpuEnvironment, cann: str) -> bool | None:
    """Whether the image's CANN runs on the host driver, by the version files' own lists.

    Each side's ``compatible_version`` names release trains (C-codes) of the other side
    (docs/sources.md): the pair runs when the CANN's train is in the driver's list or the
    driver's train is in the CANN's list (driver 24.1.rc3, C19, lists C13-C19; CANN 8.2.RC1,
    C22, lists C19: it runs). False when the lists exist and neither names the other;
    None when there is nothing to compare (no Innerversion and no list on a side).
    """
    if env.driver_version is None:
        return False
    cann_inner, cann_list = image_cann(cann)
    cann_train, drv_train = code(cann_inner), code(env.driver_inner)
    drv_ranges, cann_ranges = code_ranges(env.driver_compatible), code_ranges(cann_list)
    if listed(cann_train, drv_ranges) or listed(drv_train, cann_ranges):
        return True
    comparable = (cann_train is not None and drv_ranges) or (drv_train is not None and cann_ranges)
    return False if comparable else None


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
    return cann_runs_on_driver(env, cann) is not False


def device_count() -> int:
    env = probe()
    return len(env.visible) if env.usable else 0
