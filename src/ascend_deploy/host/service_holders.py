"""Who holds a service's ports and NPUs, and ending our stale holders (what ``ascend_procs`` runs).

One survey per port plus one of the NPUs (:func:`procs.find_holders`), merged by PID. A holder is
``managed`` only when it runs in a container labelled ``ascend-deploy.service=<service>`` (or
descends from one); the managed ones outside ``keep`` are ``stale``. Foreign holders count only
when they hold one of our ports or memory on one of our chips (by device id; by NPU for a chip
without one); one labelled with another service's name has ``other_service`` set and is never
ended, ``kill_foreign`` or not. ``others_used_mb`` is the HBM per NPU that stays in use after
this run (ours and, with ``kill_foreign``, the foreign holders' freed).
Standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import AscendDeployError
from . import procs

SHOWN = (
    "pid",
    "name",
    "argv",
    "user",
    "container_name",
    "managed_by",
    "other_service",
    "npus",
    "memory_mb",
)


class StopFailed(AscendDeployError):
    """Ending a holder failed; ``result`` is the survey taken before (for the report)."""

    def __init__(self, message: str, result: dict) -> None:
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class Scope:
    service: str
    ports: Sequence[int] = ()
    npu_info: dict | None = None  # parsed `npu-smi info`; None: NPUs are not surveyed
    npus: Sequence[int] = ()  # our NPUs; empty = every NPU
    devices: Sequence[int] = ()  # our chips' device ids (npu_facts' ``device``); empty = by NPU
    keep: Sequence[str] = ()  # container names of the replicas that stay
    kill_foreign: bool = False
    proc_root: str = "/proc"
    containers: dict | None = None  # procs.docker_containers() form; None: ask docker


@dataclass
class Survey:
    result: dict
    stale_pids: list[int] = field(
        default_factory=list
    )  # outside containers (containers go by name)
    foreign_pids: list[int] = field(default_factory=list)


def brief(entry: dict) -> dict:
    """The fields of a holder that the report shows."""
    out = {k: entry.get(k) for k in SHOWN if entry.get(k) not in (None, [], "")}
    if entry.get("port") is not None:
        out["port"] = entry["port"]
    if entry.get("note"):
        out["note"] = entry["note"]
    return out


def device_ids(npu_info: dict | None) -> dict[tuple[int, int], int]:
    """(NPU id, chip) -> device id of every chip npu_facts numbered (``assign_devices``)."""
    out: dict[tuple[int, int], int] = {}
    for chip in (npu_info or {}).get("chips") or []:
        if chip.get("npu") is not None and chip.get("device") is not None:
            out[(int(chip["npu"]), int(chip.get("chip") or 0))] = int(chip["device"])
    return out


def in_our_way(
    entry: dict,
    npus: Sequence[int],
    devices: Sequence[int] = (),
    device_of: dict[tuple[int, int], int] | None = None,
) -> bool:
    """A holder of one of our ports, or of memory on one of our chips (all when none is given).

    With ``devices`` the chip is the unit: memory on the other die of an A3 card, or on the
    other chip of a 300I Duo card, is not in the way. A use whose chip has no known device id
    counts by its NPU (``npus``), the conservative reading.
    """
    if entry.get("port") is not None or not (npus or devices):
        return True
    for use in entry.get("npus") or []:
        npu = use.get("npu")
        if npu is None:
            continue
        device = (device_of or {}).get((int(npu), int(use.get("chip") or 0)))
        if devices and device is not None:
            if device in devices:
                return True
        elif not npus or npu in npus:
            return True
    return False


def others_used_mb(npu_info: dict, freed: list[dict]) -> dict[str, int]:
    """HBM in use per NPU (first chip) minus what the ``freed`` holders hold there."""
    ours_mb: dict[int, int] = {}
    for entry in freed:
        for use in entry.get("npus") or []:
            if use.get("npu") is not None:
                ours_mb[use["npu"]] = ours_mb.get(use["npu"], 0) + (use.get("memory_mb") or 0)
    return {
        str(chip["npu"]): max(0, (chip.get("hbm_used_mb") or 0) - ours_mb.get(chip["npu"], 0))
        for chip in npu_info.get("chips") or []
        if chip.get("npu") is not None and chip.get("chip", 0) in (0, None)
    }


def others_used_by_device(npu_info: dict, freed: list[dict]) -> dict[str, int]:
    """Memory in use per chip, by device id (npu_facts' ``device``), minus what ``freed`` holds.

    Every chip counts on its own (an A3 die, a 300I Duo chip): its HBM in use, or its DDR
    (``memory_used_mb``) on 310P chips, which report no HBM. Chips without a device id are left out.
    """
    ours_mb: dict[tuple[int, int], int] = {}
    for entry in freed:
        for use in entry.get("npus") or []:
            if use.get("npu") is not None:
                key = (int(use["npu"]), int(use.get("chip") or 0))
                ours_mb[key] = ours_mb.get(key, 0) + (use.get("memory_mb") or 0)
    out: dict[str, int] = {}
    for chip in npu_info.get("chips") or []:
        if chip.get("device") is None or chip.get("npu") is None:
            continue
        used = chip.get("hbm_used_mb")
        if used is None:
            used = chip.get("memory_used_mb")
        key = (int(chip["npu"]), int(chip.get("chip") or 0))
        out[str(chip["device"])] = max(0, (used or 0) - ours_mb.get(key, 0))
    return out


def survey(scope: Scope) -> Survey:
    """Find every live holder of the ports and NPUs in ``scope``, merged by PID."""
    containers = procs.docker_containers() if scope.containers is None else scope.containers
    merged: dict[int, dict] = {}
    scans = [(port, None) for port in scope.ports]
    if scope.npu_info is not None:
        scans.append((None, scope.npu_info))
    for port, npu_info in scans:
        found = procs.find_holders(
            port, scope.service, npu_info, proc_root=scope.proc_root, containers=containers
        )
        for entry in found["listeners"] + found["npu_holders"]:
            pid = entry.get("pid")
            if not pid or not entry.get("alive"):
                continue
            old = merged.get(pid)
            if old is None:
                merged[pid] = dict(entry, port=port if port is not None else entry.get("port"))
            elif entry.get("npus") and not old.get("npus"):
                old["npus"], old["memory_mb"] = entry["npus"], entry.get("memory_mb")
    managed = sorted((e for e in merged.values() if e.get("managed")), key=lambda e: e["pid"])
    device_of = device_ids(scope.npu_info)
    foreign = sorted(
        (
            e
            for e in merged.values()
            if not e.get("managed") and in_our_way(e, scope.npus, scope.devices, device_of)
        ),
        key=lambda e: e["pid"],
    )
    stale = [e for e in managed if e.get("container_name") not in scope.keep]
    result = {
        "managed": [brief(e) for e in managed],
        "stale": [brief(e) for e in stale],
        "stale_containers": sorted({e["container_name"] for e in stale if e.get("container_name")}),
        "foreign": [brief(e) for e in foreign],
    }
    if scope.npu_info:
        freed = managed + (
            [e for e in foreign if not e.get("other_service")] if scope.kill_foreign else []
        )
        result["others_used_mb"] = others_used_mb(scope.npu_info, freed)
        result["others_used_by_device"] = others_used_by_device(scope.npu_info, freed)
    # Another service of this bundle (labelled ascend-deploy.service=<other>) is in the way too,
    # but kill_foreign never ends it: the fix names that service instead.
    result["other_services"] = sorted(
        {e["other_service"] for e in foreign if e.get("other_service")}
    )
    return Survey(
        result,
        stale_pids=[e["pid"] for e in stale if not e.get("container_name")],
        foreign_pids=[e["pid"] for e in foreign if not e.get("other_service")],
    )


def _described(results: list[dict], found: dict) -> list[dict]:
    """Each stop result with what was ended: command, owner, container, memory, NPUs, port."""
    known = {e["pid"]: dict(e, foreign=False) for e in found["stale"]}
    known.update({e["pid"]: dict(e, foreign=True) for e in found["foreign"]})
    return [{**known.get(r["pid"], {"foreign": False}), **r} for r in results]


def settle(scope: Scope, end: bool, dry_run: bool, grace_s: float = 10.0) -> dict:
    """Survey; with ``end``, stop the stale holders outside containers (and the foreign ones with
    ``kill_foreign``) and survey again. ``stopped`` lists what was (``dry_run``: would be) ended.
    """
    first = survey(scope)
    found = dict(first.result, stopped=[])
    pids = sorted(set(first.stale_pids) | set(first.foreign_pids if scope.kill_foreign else ()))
    if not (end and pids):
        return found
    if dry_run:
        found["stopped"] = _described([{"pid": pid, "result": "would stop"} for pid in pids], found)
        return found
    try:
        stopped = procs.stop(pids, grace_s, proc_root=scope.proc_root)
    except AscendDeployError as exc:
        raise StopFailed(str(exc), found) from None
    found["stopped"] = _described(stopped, found)
    found.update(survey(scope).result)
    return found
