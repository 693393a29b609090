"""``ascend-deploy procs``: who holds the port and NPU memory; end only what is ours."""

from __future__ import annotations

import argparse

from ..cli import emit
from ..errors import InputError
from ..host.procs import find_holders, load_npu_info, stop
from ..reporting.tables import Column
from ..reporting.tables import render as render_table


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"{value} is outside 1-65535")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=_port, metavar="P", help="TCP port the server uses")
    parser.add_argument(
        "--service",
        metavar="NAME",
        help="the service the bundle deployed: processes in containers labelled "
        "ascend-deploy.service=NAME are ours (names in command lines never count)",
    )
    parser.add_argument(
        "--npu-smi-file",
        metavar="FILE",
        help="saved `npu-smi info` output instead of running npu-smi (- = stdin)",
    )
    parser.add_argument(
        "--kill",
        action="store_true",
        help="end the managed service's own processes (by PID; this stops the service)",
    )
    parser.add_argument(
        "--kill-foreign",
        action="store_true",
        help="end the foreign processes only (listed first; check the owner before)",
    )
    parser.add_argument(
        "--grace", type=float, default=10.0, metavar="S", help="seconds between SIGTERM and SIGKILL"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


HEADERS = [
    Column("ROLE"),
    Column("PID", align=">"),
    Column("OWNER?"),
    Column("WHERE"),
    Column("UNIT/CONTAINER"),
    Column("COMMAND"),
]


def _row(role: str, e: dict) -> list[object]:
    owner = e.get("container_name") or (e.get("container_id") or "")[:12]
    owner = f"container:{owner}" if owner else (e.get("systemd_unit") or e.get("user") or "-")
    who = "managed" if e.get("managed") else ("gone" if not e.get("alive") else "FOREIGN")
    where = (
        f"{e['address']}:{e['port']}"
        if role == "listener"
        else ",".join(f"{n['npu']}/{n['chip']}" for n in e.get("npus", [])) + f" {e['memory_mb']}MB"
    )
    cmd = e.get("cmdline") or e.get("npu_smi_name") or e.get("name") or "?"
    return [role, e.get("pid") or "?", who, where, owner, cmd[:70]]


def render(result: dict) -> str:
    holders = [("listener", e) for e in result["listeners"]]
    holders += [("npu", e) for e in result["npu_holders"]]
    lines = render_table(HEADERS, [_row(role, e) for role, e in holders], sep=" ")
    # a holder's note goes on its own line under the OWNER? column
    indent = " " * lines[0].index("OWNER?")
    for i, (_, e) in reversed(list(enumerate(holders))):
        if e.get("note"):
            lines.insert(i + 2, f"{indent}note: {e['note']}")
    if len(lines) == 1:  # nothing found: say what was checked, never an all-clear for the rest
        checked = [f"port {result['port']}"] if result["port"] else []
        if not result.get("npu_smi_error"):
            checked.append("NPU memory")
        lines = [f"nothing holds {' or '.join(checked)}"] if checked else []
    if result.get("npu_smi_error"):
        lines.append(f"NPU holders: not checked ({result['npu_smi_error']})")
    for item in result.get("stopped") or []:
        lines.append(f"pid {item['pid']}: {item['result']} {item['detail']}".rstrip())
    for pid in result.get("left_alone") or []:
        lines.append(f"pid {pid}: foreign, left running (add --kill-foreign to end it)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.kill and not args.service:
        raise InputError("procs --kill needs --service NAME to know which processes are ours")
    npu_info, npu_error = load_npu_info(args.npu_smi_file)
    result = find_holders(args.port, args.service, npu_info)
    result["npu_smi_error"] = npu_error
    if args.kill or args.kill_foreign:
        entries = [e for e in result["listeners"] + result["npu_holders"] if e.get("pid")]
        proxies = {e["pid"] for e in entries if e.get("name") == "docker-proxy"}
        targets = [p for p in result["foreign_pids"] if args.kill_foreign and p not in proxies]
        targets += [p for p in result["managed_pids"] if args.kill and p not in proxies]
        result["stopped"] = stop(targets, grace_s=args.grace)
        ended = {
            s["pid"]
            for s in result["stopped"]
            if s["result"] in ("terminated", "killed", "not-running")
        }
        result["left_alone"] = [p for p in result["foreign_pids"] if p not in ended]
        failed = [s for s in result["stopped"] if s["result"] in ("failed", "refused")]
        emit(result, args.json, render)
        return 1 if failed or result["left_alone"] else 0
    emit(result, args.json, render)
    # An unchecked NPU is not an all-clear: exit 1 as for a foreign holder.
    return 1 if result["foreign_pids"] or npu_error else 0
