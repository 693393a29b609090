#!/usr/bin/env python3
"""The emulated Ascend layer of the engine image, around the real torch and vLLM.

Reuses the emulator image's generator (docker/vllm-ascend/shims/make_shims.py) for the row
file and the CANN files, and writes under ``--site`` only what the real packages do not
provide: ``torch_npu`` (registers ``torch.npu`` on the real torch, answering from the
container's devices, mounts and driver like the emulator's) and ``vllm_ascend`` (version only:
no ``vllm.platform_plugins`` entry point, so the real vLLM stays on its CPU platform). The
``vllm`` command runs ``python3 -m ascend_sim.vllm_engine`` (emulated Ascend start-up, then
the real engine). Standard library only; runs once at ``docker build``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_shims

TORCH_NPU_INIT = '''"""Emulated torch_npu on the real (CPU) torch (engine image Ascend layer)."""

import torch as _torch

from . import npu  # noqa: E402

__version__ = {version!r}

if not hasattr(_torch, "npu"):
    # As torch_npu does: the PrivateUse1 backend is named "npu", then torch.npu is registered.
    _torch.utils.rename_privateuse1_backend("npu")
    _torch._register_device_module("npu", npu)
'''

VLLM_SCRIPT = """#!/bin/sh
# vllm CLI of the engine image: emulated Ascend start-up, then the real vLLM CPU engine.
exec python3 -m ascend_sim.vllm_engine "$@"
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("site", "vllm-ascend", "vllm", "engine-vllm", "torch-npu", "cann"):
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--hardware", default="a2")
    p.add_argument("--root", default="/")
    p.add_argument("--arch", default=os.uname().machine)
    a = p.parse_args(argv)
    import torch

    plain = make_shims.plain
    row = {
        "vllm_ascend": a.vllm_ascend,
        "vllm": a.vllm,
        "torch": torch.__version__.split("+")[0],
        "torch_npu": a.torch_npu,
        "cann": a.cann,
        "hardware": a.hardware,
        "engine_vllm": a.engine_vllm,
    }
    scratch = os.path.join(a.root, "tmp", "ascend-sim-shims")
    make_shims.make(scratch, a.root, row, a.arch)  # row.json, CANN files (site is discarded)
    shutil.rmtree(scratch)
    site = a.site
    npu_dir = os.path.join(site, "torch_npu")
    make_shims._write(
        os.path.join(npu_dir, "__init__.py"),
        TORCH_NPU_INIT.format(version=plain(a.torch_npu)),
    )
    make_shims._write(
        os.path.join(npu_dir, "npu", "__init__.py"),
        make_shims.TORCH_NPU_NPU.format(cann=a.cann),
    )
    make_shims.write_dist_info(site, "torch_npu", plain(a.torch_npu))
    make_shims._write(
        os.path.join(site, "vllm_ascend", "__init__.py"),
        '"""Emulated vllm_ascend (engine image): version only, no platform plugin."""\n\n'
        "from ._version import __version__, version  # noqa: F401\n",
    )
    make_shims._write(
        os.path.join(site, "vllm_ascend", "_version.py"),
        f"__version__ = version = {plain(a.vllm_ascend)!r}\n",
    )
    make_shims.write_dist_info(site, "vllm_ascend", plain(a.vllm_ascend))
    make_shims._write(os.path.join(a.root, "usr/local/bin/vllm"), VLLM_SCRIPT, 0o755)
    return 0


if __name__ == "__main__":
    sys.exit(main())
