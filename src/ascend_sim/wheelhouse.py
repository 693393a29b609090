"""A local wheelhouse of the emulated vLLM-Ascend stack, for host mode on simulated hosts.

``build_wheelhouse(out_dir, row)`` writes pure-Python wheels of the emulator image's shims
(``torch``, ``torch_npu``, ``vllm``, ``vllm_ascend`` at the compat row's versions, from
docker/vllm-ascend/shims/make_shims.py) plus the pip wheel bundled with the controller's
Python (``ensurepip``), so ``ascend_runtime`` in host mode can create its venv and install the
resolved pins with ``pip install --no-index --find-links`` on a host without network or
python3-venv. The ``torch_npu`` wheel carries a ``.pth`` line for ``/opt/ascend-sim/src``:
its ``torch.npu`` answers from the simulated host (devices, driver, CANN pairing) through
``ascend_sim.vllm_emulator.device``, as in the image.

    python -m ascend_sim.wheelhouse --out DIR [--vllm-ascend v0.23.0 | --cann 9.1.0] [--json]

Standard library only. Deterministic file contents (fixed zip timestamps).
"""

from __future__ import annotations

import argparse
import base64
import glob
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIMS = os.path.join(REPO, "docker", "vllm-ascend", "shims", "make_shims.py")
SIM_SRC = "/opt/ascend-sim/src"  # where simulated hosts keep ascend_sim (docker/sim-host)
_EPOCH = (2020, 1, 1, 0, 0, 0)


def _shims():
    spec = importlib.util.spec_from_file_location("make_shims", SHIMS)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"{SHIMS}: emulator shim generator not found")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def _write_wheel(path: str, files: dict[str, bytes], dist_info: str) -> None:
    record = [_record_line(name, data) for name, data in sorted(files.items())]
    record.append(f"{dist_info}/RECORD,,")
    files = dict(files)
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, _EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, files[name])


def build_wheelhouse(out_dir: str, row: dict) -> list[str]:
    """Write the shim wheels for ``row`` and a pip wheel into ``out_dir``; return file names."""
    shims = _shims()
    os.makedirs(out_dir, exist_ok=True)
    names: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ascend-sim-wheels-") as tmp:
        site, root = os.path.join(tmp, "site"), os.path.join(tmp, "root")
        shims.make(site, root, row, os.uname().machine)
        for pkg, (dist, key) in shims.PACKAGES.items():
            version = shims.plain(row[key])
            dist_info = f"{dist}-{version}.dist-info"
            files: dict[str, bytes] = {}
            for base, _dirs, fnames in os.walk(os.path.join(site, pkg)):
                for fname in fnames:
                    full = os.path.join(base, fname)
                    with open(full, "rb") as fh:
                        files[os.path.relpath(full, site)] = fh.read()
            for fname in ("METADATA", "entry_points.txt"):
                full = os.path.join(site, dist_info, fname)
                if os.path.exists(full):
                    with open(full, "rb") as fh:
                        files[f"{dist_info}/{fname}"] = fh.read()
            files[f"{dist_info}/WHEEL"] = (
                b"Wheel-Version: 1.0\nGenerator: ascend-sim\nRoot-Is-Purelib: true\n"
                b"Tag: py3-none-any\n"
            )
            if pkg == "torch_npu":
                files["ascend_sim_host.pth"] = f"{SIM_SRC}\n".encode()
            name = f"{dist}-{version}-py3-none-any.whl"
            _write_wheel(os.path.join(out_dir, name), files, dist_info)
            names.append(name)
    names.append(copy_pip_wheel(out_dir))
    return sorted(names)


def copy_pip_wheel(out_dir: str) -> str:
    """Copy the pip wheel bundled with this Python (ensurepip) into ``out_dir``."""
    spec = importlib.util.find_spec("ensurepip")
    found = []
    if spec and spec.origin:
        found = sorted(
            glob.glob(os.path.join(os.path.dirname(spec.origin), "_bundled", "pip-*.whl"))
        )
    if not found:
        raise FileNotFoundError(
            f"{sys.executable} has no ensurepip pip wheel; put a pip-*.whl into {out_dir} by hand"
        )
    name = os.path.basename(found[-1])
    shutil.copyfile(found[-1], os.path.join(out_dir, name))
    return name


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, os.path.join(REPO, "src"))
    from ascend_deploy.errors import AscendDeployError
    from ascend_deploy.planning import compat

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--vllm-ascend", help="a release of the compat matrix (default: by --cann)")
    ap.add_argument("--cann", default="9.1.0", help="the host's CANN (default 9.1.0)")
    ap.add_argument("--hardware", default="a2")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        if a.vllm_ascend:
            row = compat.resolve_pinned(a.vllm_ascend, a.hardware)
        else:
            row = compat.resolve(a.cann, a.hardware)
    except AscendDeployError as exc:
        print(f"ascend_sim.wheelhouse: error: {exc}", file=sys.stderr)
        return 2
    shim_row = {k: str(row[k]) for k in ("vllm_ascend", "vllm", "torch", "torch_npu", "cann")}
    shim_row["hardware"] = a.hardware
    names = build_wheelhouse(a.out, shim_row)
    print(
        json.dumps({"out": a.out, "row": shim_row, "wheels": names}) if a.json else "\n".join(names)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
