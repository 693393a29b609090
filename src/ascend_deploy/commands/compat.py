"""``ascend-deploy compat``: resolve a matching runtime set, or check the installed one."""

from __future__ import annotations

import argparse

from ..cli import emit
from ..errors import InputError
from ..host.versions import read_versions
from ..planning import compat
from .argtypes import add_matrix_argument

_FLAG_PACKAGES = (
    ("torch", "torch"),
    ("torch_npu", "torch-npu"),
    ("vllm", "vllm"),
    ("vllm_ascend", "vllm-ascend"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    res = actions.add_parser(
        "resolve",
        help="the vllm-ascend / vllm / torch / torch_npu set and image for a CANN version, "
        "a host's NPU driver, or a pinned release",
        description="Pick one row of the compatibility matrix for --cann (host mode: CANN "
        "installed on the host), --driver (container mode: the newest release whose CANN the "
        "driver runs) or --vllm-ascend (a pin; with --driver, checked against that driver). "
        "Final releases win over release candidates; RCs only with --allow-rc when no final "
        "release matches.",
    )
    which = res.add_mutually_exclusive_group()
    which.add_argument("--cann", metavar="VER", help="CANN version, e.g. 8.5.0")
    which.add_argument("--vllm-ascend", metavar="VER", help="a pinned release, e.g. v0.11.0")
    res.add_argument(
        "--driver",
        metavar="VER",
        help="NPU driver version, e.g. 25.2.0 (alone, or with --vllm-ascend to check the pin)",
    )
    res.add_argument("--hardware", default="a2", choices=compat.HARDWARE, help="default a2")
    res.add_argument("--python", metavar="X.Y", help="only rows supporting this Python")
    res.add_argument("--allow-rc", action="store_true", help="accept release candidates")
    res.add_argument(
        "--os", dest="os_variant", choices=compat.OS_VARIANTS, help="image OS (default ubuntu)"
    )
    res.add_argument(
        "--registry",
        default=compat.DEFAULT_REGISTRY,
        help="image registry (default quay.io/ascend)",
    )
    add_matrix_argument(res)
    res.add_argument("--json", action="store_true", help="print JSON")

    lst = actions.add_parser(
        "list",
        help="print the compatibility matrix (one line per vllm-ascend release)",
        description="Every release of the matrix with its vLLM, torch_npu, CANN and Python, "
        "newest first; --hardware keeps the releases that support it. With --matrix, rows of "
        "the site matrix are marked 'site' (column from).",
    )
    lst.add_argument("--hardware", choices=compat.HARDWARE, help="only releases for this one")
    lst.add_argument("--allow-rc", action="store_true", help="include release candidates")
    add_matrix_argument(lst)
    lst.add_argument("--json", action="store_true", help="print JSON")

    chk = actions.add_parser(
        "check",
        help="compare installed versions with the matrix (pitfall 1)",
        description="Installed versions come from `versions` (--root, --python) unless "
        "given as flags.",
    )
    chk.add_argument("--root", default="/", metavar="DIR", help="prefix for every path")
    chk.add_argument("--python", metavar="PATH", help="interpreter to read packages from")
    chk.add_argument("--cann", metavar="VER", help="CANN version (default: the installed one)")
    chk.add_argument("--hardware", default="a2", choices=compat.HARDWARE, help="default a2")
    for key, flag in _FLAG_PACKAGES:
        chk.add_argument(f"--{flag}", dest=key, metavar="VER", help=f"installed {flag} version")
    chk.add_argument("--python-version", metavar="X.Y.Z", help="installed Python version")
    add_matrix_argument(chk)
    chk.add_argument("--json", action="store_true", help="print JSON")


def render_row(row: dict) -> str:
    keys = (
        "vllm_ascend",
        "vllm",
        "torch",
        "torch_npu",
        "python",
        "cann",
        "hardware",
        "support",
        "released",
        "image",
        "pip",
    )
    lines = [f"{k:<12} {row.get(k)}" for k in keys if row.get(k) not in (None, "")]
    if row.get("image_built") is False:
        lines.append(f"{'image':<12} none built upstream (see the note)")
    for extra in ("triton_ascend", "mooncake", "base_image"):
        if row.get(extra):
            lines.append(f"{extra:<12} {row[extra]}")
    lines += [f"note         {n}" for n in row.get("notes") or []]
    if row.get("alternatives"):
        lines.append(f"also         {', '.join(row['alternatives'])}")
    return "\n".join(lines)


def render_findings(result: dict) -> str:
    lines = [f"CANN {result['cann']} on {result['hardware']}:"]
    for f in result["findings"]:
        line = f"  {f['status'].upper():<5} {f['id']}: {f['evidence']}"
        if f["fix"] and f["status"] != "ok":
            line += f"\n        fix: {f['fix']}"
        lines.append(line)
    return "\n".join(lines)


def list_rows(matrix: dict, hardware: str | None, allow_rc: bool) -> list[dict]:
    """The matrix's releases, newest first, as the columns `compat list` prints."""
    out = []
    for row in compat.load_matrix(matrix):
        if hardware and not compat.hardware_support(row, hardware)[0]:
            continue
        if not allow_rc and not compat.is_final(row):
            continue
        listed = row.get("hardware")
        out.append(
            {
                "vllm_ascend": row["vllm_ascend"],
                "vllm": row.get("vllm"),
                "torch_npu": compat.pins(row).get("torch_npu"),
                "cann": compat.row_cann(row, hardware or "a2"),
                "python": row.get("python"),
                "hardware": listed if isinstance(listed, list) else [],
                "released": row.get("released"),
                "from": compat.SITE if compat.is_site(row) else "shipped",
            }
        )
    out.sort(key=lambda r: compat.version_key(r["vllm_ascend"]), reverse=True)
    return out


def render_list(rows: list[dict]) -> str:
    head: tuple[str, ...] = (
        "vllm_ascend",
        "vllm",
        "torch_npu",
        "cann",
        "python",
        "hardware",
        "released",
    )
    if any(r.get("from") == compat.SITE for r in rows):
        head += ("from",)
    table = [head] + [
        tuple(",".join(r[k]) if isinstance(r[k], list) else str(r[k] or "-") for k in head)
        for r in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(head))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in table
    )


def run(args: argparse.Namespace) -> int:
    # the shipped matrix, read once here (with the site matrix of --matrix merged over it)
    matrix = compat.matrix_with_site(args.matrix)
    if args.action == "list":
        rows = list_rows(matrix, args.hardware, args.allow_rc)
        emit(rows, args.json, render_list)
        return 0
    if args.action == "resolve":
        where = {"os_variant": args.os_variant, "registry": args.registry, "matrix": matrix}
        options = {"python": args.python, "allow_rc": args.allow_rc, **where}
        if args.cann is not None and args.driver is not None:
            raise InputError(
                "--cann and --driver: give one (--cann for CANN installed on the host, --driver "
                "for container mode), or --vllm-ascend with --driver to check a pin"
            )
        if args.cann is None and args.vllm_ascend is None and args.driver is None:
            raise InputError("give --cann, --driver or --vllm-ascend (see compat resolve --help)")
        if not str(args.registry).strip():
            raise InputError(
                "--registry '' names no registry: the image would be '/vllm-ascend:...'. Fix: "
                f"leave it out (default {compat.DEFAULT_REGISTRY}) or name your mirror"
            )
        if args.vllm_ascend is not None:
            row = compat.resolve_pinned(args.vllm_ascend, args.hardware, **where)
            if args.driver is not None:
                row = compat.check_pin_against_driver(row, args.driver)
        elif args.driver is not None:
            row = compat.resolve_for_driver(args.driver, args.hardware, **options)
        else:
            row = compat.resolve(args.cann, args.hardware, **options)
        emit(row, args.json, render_row)
        return 0
    flags = {key: getattr(args, key) for key, _flag in _FLAG_PACKAGES}
    if any(flags.values()) or args.python_version:
        installed: dict = {"packages": flags, "python": args.python_version}
        cann = args.cann
        if cann is None:
            found = read_versions(args.root).get("cann")
            cann = found and found["version"]
    else:
        installed = read_versions(args.root, args.python)
        if not args.python:
            raise InputError(
                "compat check: pass --python PATH (the serving interpreter) or the "
                "installed versions as --torch/--torch-npu/--vllm/--vllm-ascend"
            )
        cann = args.cann or (installed["cann"] and installed["cann"]["version"])
    if not cann:
        raise InputError(
            f"compat check: no CANN installed under --root {args.root}; pass --cann VER"
        )
    findings = compat.check(installed, cann, args.hardware, matrix)
    result = {
        "cann": cann,
        "hardware": args.hardware,
        "findings": findings,
        "ok": not any(f["status"] == "fail" for f in findings),
    }
    emit(result, args.json, render_findings)
    return 0 if result["ok"] else 1
