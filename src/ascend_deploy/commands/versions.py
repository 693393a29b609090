"""``ascend-deploy versions``: driver, firmware, CANN, NNAL and Python package versions."""

from __future__ import annotations

import argparse

from ..cli import emit
from ..versions import PACKAGES, read_versions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root", default="/", metavar="DIR", help="prefix for every path (default /)"
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="interpreter whose torch / torch_npu / vllm / vllm_ascend versions to read",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def _line(label: str, value: str | None, extra: str = "") -> str:
    text = value if value else "not found"
    return f"{label:<12} {text}{('  ' + extra) if extra and value else ''}"


def render(info: dict) -> str:
    out = []
    d, f, c, n = info["driver"], info["firmware"], info["cann"], info["nnal"]
    out.append(
        _line(
            "driver",
            d and d["version"],
            d
            and f"(Innerversion {d['innerversion']}, fw {d['compatible_version_fw']}) {d['path']}",
        )
    )
    out.append(
        _line("firmware", f and f["version"], f and f"(package {f['package_version']}) {f['path']}")
    )
    cann_extra = ""
    if c:
        cann_extra = f"({c['layout']} layout, {c['inner_code']}) {c['path']}"
        if len(c.get("installed") or []) > 1:
            cann_extra += f"; installed: {', '.join(c['installed'])}"
    out.append(_line("CANN", c and c["version"], cann_extra))
    out.append(_line("NNAL/ATB", n and n["version"], n and f"({n['build']}) {n['path']}"))
    ii = info["install_info"]
    out.append(
        _line(
            "install",
            ii and ii["path"],
            ii and " ".join(f"{k}={v}" for k, v in ii.items() if k != "path"),
        )
    )
    if info["python"]:
        out.append(_line("python", info["python"]["executable"], info["python"]["version"]))
        for key in PACKAGES:
            out.append(_line(key, info["packages"][key]))
    else:
        out.append(_line("python", None) + "  (pass --python PATH for torch / vllm versions)")
    if info["checks"]:
        out.append("")
        out.append("pairing checks:")
        for check in info["checks"]:
            line = f"  {check['status'].upper():<5} {check['id']}: {check['evidence']}"
            if check["fix"] and check["status"] != "ok":
                line += f" -> {check['fix']}"
            out.append(line)
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    info = read_versions(args.root, args.python)
    emit(info, args.json, render)
    return 0


def _ranges(driver: dict) -> str:
    return ",".join(f"[{lo},{hi}]" for lo, hi in driver.get("compatible_version_fw") or [])
