#!/usr/bin/env python3
"""Generate the emulator image's Python shims and version files from the build arguments.

Writes, under ``--site`` (a directory on the image's PYTHONPATH):

* packages ``vllm``, ``vllm_ascend``, ``torch``, ``torch_npu`` with ``__version__`` and a
  ``*.dist-info`` each, so ``importlib.metadata.version()`` and ``pip``-style tools report
  the compat row's versions. ``torch.npu`` / ``torch_npu.npu`` answer ``is_available()``,
  ``device_count()`` and ``get_device_name()`` from what the container really has
  (``ascend_sim.vllm_emulator.device``): true only with the device nodes, the driver mounts
  and a driver that supports the image's CANN. ``vllm_ascend`` registers its platform plugin
  entry point like the real package.

and, under ``--root``:

* ``/opt/ascend-sim/row.json`` (the row the emulator reads),
* the CANN install-info file in the layout of that CANN release (``ascend-toolkit/latest``
  up to 8.3, ``cann-<ver>`` plus the ``cann`` link from 8.5; docs/sources.md),
* ``/usr/local/bin/vllm`` running ``python3 -m ascend_sim.vllm_emulator``.

Standard library only; runs once at ``docker build``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

PACKAGES = {
    # import name: (distribution name, row key)
    "vllm": ("vllm", "vllm"),
    "vllm_ascend": ("vllm_ascend", "vllm_ascend"),
    "torch": ("torch", "torch"),
    "torch_npu": ("torch_npu", "torch_npu"),
}

TORCH_INIT = '''"""Emulated torch (vLLM-Ascend emulator image): versions and torch.npu only."""

__version__ = {version!r}


def __getattr__(name):
    # torch >= 2.5 autoloads the torch_npu backend, which adds torch.npu.
    if name == "npu":
        import torch_npu

        return torch_npu.npu
    raise AttributeError(f"module 'torch' has no attribute {{name!r}} (emulated torch)")
'''

TORCH_NPU_INIT = '''"""Emulated torch_npu (vLLM-Ascend emulator image)."""

__version__ = {version!r}

from . import npu  # noqa: E402,F401
'''

TORCH_NPU_NPU = '''"""torch_npu.npu: answers from the container's devices, mounts and host state."""

from ascend_sim.vllm_emulator import device as _device

_CANN = {cann!r}


def is_available():
    return _device.npu_available(_CANN)


def device_count():
    return _device.device_count() if is_available() else 0


def get_device_name(device=0):
    state = _device.probe().state or {{}}
    return "Ascend" + str((state.get("card") or {{}}).get("model", "910B"))
'''

VLLM_INIT = '''"""Emulated vLLM (vLLM-Ascend emulator image); see ascend_sim.vllm_emulator."""

__version__ = {version!r}
__version_tuple__ = {vtuple!r}
'''

VLLM_ASCEND_INIT = '''"""Emulated vllm_ascend (vLLM-Ascend emulator image)."""

from ._version import __version__, version  # noqa: F401


def register():
    """vllm.platform_plugins entry point, as in the real package."""
    return "vllm_ascend.platform.NPUPlatform"
'''

VLLM_SCRIPT = """#!/bin/sh
# vllm CLI of the vLLM-Ascend emulator image.
exec python3 -m ascend_sim.vllm_emulator "$@"
"""


def plain(version: str) -> str:
    """Package version without the tag's leading ``v`` (``v0.23.0`` -> ``0.23.0``)."""
    return version[1:] if version[:1] in "vV" else version


def _write(path: str, text: str, mode: int | None = None) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    if mode is not None:
        os.chmod(path, mode)


def write_dist_info(site: str, dist: str, version: str, entry_points: str = "") -> None:
    info = os.path.join(site, f"{dist}-{version}.dist-info")
    _write(
        os.path.join(info, "METADATA"),
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
        "Summary: vLLM-Ascend emulator shim (ascend_sim)\n",
    )
    _write(os.path.join(info, "INSTALLER"), "ascend-sim\n")
    _write(os.path.join(info, "RECORD"), "")
    if entry_points:
        _write(os.path.join(info, "entry_points.txt"), entry_points)


def write_cann(root: str, cann: str, arch: str) -> str:
    """The CANN install-info file in the layout of ``cann``; returns its path."""
    major = tuple(int(x) for x in re.findall(r"\d+", cann)[:2])
    body = f"package_name=Ascend-cann-toolkit\nversion={cann}\narch={arch}\nos=linux\n"
    ascend = os.path.join(root, "usr/local/Ascend")
    if major >= (8, 5):
        real = os.path.join(ascend, f"cann-{cann}", f"{arch}-linux")
        _write(
            os.path.join(real, "ascend_toolkit_install.info"),
            body + f"path=/usr/local/Ascend/cann-{cann}/{arch}-linux\n",
        )
        link = os.path.join(ascend, "cann")
        if not os.path.lexists(link):
            os.symlink(f"cann-{cann}", link)
        return os.path.join(real, "ascend_toolkit_install.info")
    real = os.path.join(ascend, "ascend-toolkit", cann, f"{arch}-linux")
    _write(
        os.path.join(real, "ascend_toolkit_install.info"),
        body + f"path=/usr/local/Ascend/ascend-toolkit/{cann}/{arch}-linux\n",
    )
    latest = os.path.join(ascend, "ascend-toolkit", "latest")
    if not os.path.lexists(latest):
        os.symlink(cann, latest)
    return os.path.join(real, "ascend_toolkit_install.info")


def make(site: str, root: str, row: dict, arch: str) -> None:
    for pkg, (dist, key) in PACKAGES.items():
        version = plain(row[key])
        if pkg == "torch":
            _write(os.path.join(site, "torch", "__init__.py"), TORCH_INIT.format(version=version))
        elif pkg == "torch_npu":
            _write(
                os.path.join(site, "torch_npu", "__init__.py"),
                TORCH_NPU_INIT.format(version=version),
            )
            _write(
                os.path.join(site, "torch_npu", "npu", "__init__.py"),
                TORCH_NPU_NPU.format(cann=row["cann"]),
            )
        elif pkg == "vllm":
            vtuple = tuple(int(x) if x.isdigit() else x for x in re.split(r"[.]", version))
            _write(
                os.path.join(site, "vllm", "__init__.py"),
                VLLM_INIT.format(version=version, vtuple=vtuple),
            )
        else:
            _write(os.path.join(site, "vllm_ascend", "__init__.py"), VLLM_ASCEND_INIT)
            _write(
                os.path.join(site, "vllm_ascend", "_version.py"),
                f"__version__ = version = {version!r}\n",
            )
        eps = (
            "[vllm.platform_plugins]\nascend = vllm_ascend:register\n"
            if pkg == "vllm_ascend"
            else ""
        )
        write_dist_info(site, dist, version, eps)
    row_path = os.path.join(root, "opt/ascend-sim/row.json")
    _write(row_path, json.dumps(row, indent=2) + "\n")
    write_cann(root, row["cann"], arch)
    _write(os.path.join(root, "usr/local/bin/vllm"), VLLM_SCRIPT, 0o755)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--site", required=True, help="directory on PYTHONPATH for the shim packages")
    p.add_argument("--root", default="/", help="root for row.json, CANN files and bin/vllm")
    p.add_argument("--vllm-ascend", required=True)
    p.add_argument("--vllm", required=True)
    p.add_argument("--torch", required=True)
    p.add_argument("--torch-npu", required=True)
    p.add_argument("--cann", required=True)
    p.add_argument("--hardware", default="a2")
    p.add_argument("--arch", default=os.uname().machine)
    a = p.parse_args(argv)
    for name in ("vllm_ascend", "vllm", "torch", "torch_npu", "cann", "hardware"):
        if not getattr(a, name).strip():
            p.error(f"--{name.replace('_', '-')} is empty (build argument not set?)")
    row = {
        "vllm_ascend": a.vllm_ascend,
        "vllm": a.vllm,
        "torch": a.torch,
        "torch_npu": a.torch_npu,
        "cann": a.cann,
        "hardware": a.hardware,
    }
    make(a.site, a.root, row, a.arch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
