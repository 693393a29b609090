"""``ascend-deploy versions``: driver, firmware, CANN, NNAL and Python package versions.

Its pairing checks are preflight's (``planning.preflight.pairing_verdicts``): one verdict per
check id. Exit 0 when none fails, 1 when one does, 2 for unreadable input.
"""

from __future__ import annotations

import argparse

from ..cli import emit
from ..host.versions import PACKAGES, read_versions
from ..planning.preflight import pairing_verdicts


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


def _extra(parts: list[str | None], path: str) -> str:
    """``(a, b) path`` from the parts that are known (no ``None`` in the output)."""
    known = [p for p in parts if p]
    return (f"({', '.join(known)}) " if known else "") + path


def render(info: dict) -> str:
    out = []
    d, f, c, n = info["driver"], info["firmware"], info["cann"], info["nnal"]
    if d:
        fw = _ranges(d)
        inner = d.get("innerversion")
        extra = _extra(
            [inner and f"Innerversion {inner}", fw and f"compatible firmware {fw}"], d["path"]
        )
        out.append(_line("driver", d["version"], extra))
    else:
        out.append(_line("driver", None))
    pkg = f and f.get("package_version")
    out.append(
        _line("firmware", f and f["version"], f and _extra([pkg and f"package {pkg}"], f["path"]))
    )
    cann_extra = ""
    if c:
        cann_extra = _extra(
            [f"{c['layout']} layout" if c.get("layout") else None, c.get("inner_code")], c["path"]
        )
        if len(c.get("installed") or []) > 1:
            cann_extra += f"; installed: {', '.join(c['installed'])}"
    out.append(_line("CANN", c and c["version"], cann_extra))
    out.append(_line("NNAL/ATB", n and n["version"], n and _extra([n.get("build")], n["path"])))
    ii = info["install_info"]
    out.append(
        _line(
            "install",
            ii and ii["path"],
            ii and " ".join(f"{k}={v}" for k, v in ii.items() if k != "path" and v),
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
    info["checks"] = pairing_verdicts(info)
    emit(info, args.json, render)
    return 1 if any(check["status"] == "fail" for check in info["checks"]) else 0


def _ranges(driver: dict) -> str:
    return ",".join(f"[{lo},{hi}]" for lo, hi in driver.get("compatible_version_fw") or [])
