#!/usr/bin/python
"""Ansible module: find (and end) processes that hold the serving ports or NPU memory."""

# ruff: noqa: E402  (Ansible modules put DOCUMENTATION before the imports)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_procs
short_description: Find processes holding the serving ports or NPU memory; end stale ones of ours
description:
  - Thin wrapper over C(ascend_deploy.host.procs.find_holders) and C(procs.stop). A holder is
    C(managed) (ours) only when it, or a parent process, runs in a container labelled
    C(ascend-deploy.service=<service>) (every container vllm_service starts carries it). Names in
    command lines or container names never count, so another team's C(vllm serve) is foreign.
  - Holders inside the containers listed in C(keep) are the current replicas and are never ended.
  - With C(state=absent) the module ends managed holders outside C(keep) (and foreign holders only
    when C(kill_foreign) is true) with SIGTERM, then SIGKILL after C(grace_s). Check mode reports the
    PIDs it would end. The calling role fails and lists foreign holders otherwise.
options:
  ports:
    description: Serving ports to inspect (one per replica).
    type: list
    elements: int
    default: []
  service:
    description: Service name; containers labelled C(ascend-deploy.service) with it are ours.
    type: str
    required: true
  keep:
    description: Container names of the replicas that stay (their processes are not stale).
    type: list
    elements: str
    default: []
  npu_info:
    description: Parsed C(npu-smi info) (the C(ascend_npu.info) fact); without it NPUs are skipped.
    type: dict
  npus:
    description: >-
      NPU ids the service will use; foreign processes that hold only other NPUs (and none of
      C(ports)) are not reported. Empty means every NPU.
    type: list
    elements: int
    default: []
  proc_root:
    description: procfs mount.
    type: path
    default: /proc
  state:
    description: C(present) only reports; C(absent) ends stale holders.
    type: str
    choices: [present, absent]
    default: present
  kill_foreign:
    description: Also end foreign holders (explicit operator opt-in).
    type: bool
    default: false
  grace_s:
    description: Seconds between SIGTERM and SIGKILL.
    type: float
    default: 10
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Report holders of the serving ports and NPU memory
  ascend_procs:
    ports: [8000, 8001]
    service: vllm
    keep: [vllm-0, vllm-1]
    npu_info: "{{ ascend_npu.info }}"
  register: holders
"""

RETURN = r"""
managed:
  description: Holders that are ours (pid, name, argv, container_name, managed_by, npus, port).
  returned: always
  type: list
  elements: dict
stale:
  description: Managed holders outside C(keep) (earlier deployments).
  returned: always
  type: list
  elements: dict
stale_containers:
  description: Names of containers of earlier deployments that hold a port or NPU memory.
  returned: always
  type: list
  elements: str
foreign:
  description: Holders that are not ours.
  returned: always
  type: list
  elements: dict
others_used_mb:
  description: >-
    Per NPU id, HBM in use by processes that are not ours (for planning); with C(kill_foreign)
    the foreign holders' memory is not counted either (it is freed before the service starts).
  returned: when npu_info is given
  type: dict
stopped:
  description: >-
    Results of C(procs.stop) (or the PIDs that would be ended in check mode), each with what was
    ended - pid, result, detail, foreign, argv, user, container_name, memory_mb, npus, port.
  returned: always
  type: list
"""

from ansible.module_utils.ascend_deploy.errors import AscendDeployError
from ansible.module_utils.ascend_deploy.host import procs
from ansible.module_utils.basic import AnsibleModule

_SHOWN = ("pid", "name", "argv", "user", "container_name", "managed_by", "npus", "memory_mb")


def _brief(entry: dict) -> dict:
    out = {k: entry.get(k) for k in _SHOWN if entry.get(k) not in (None, [], "")}
    if entry.get("port") is not None:
        out["port"] = entry["port"]
    if entry.get("note"):
        out["note"] = entry["note"]
    return out


def _in_our_way(entry: dict, npus: list[int]) -> bool:
    """A holder of one of our ports, or of memory on one of our NPUs (all NPUs when unset)."""
    if not npus or entry.get("port") is not None:
        return True
    return any(use.get("npu") in npus for use in entry.get("npus") or [])


def collect(p: dict) -> dict:
    """Run find_holders for every port and the NPUs; merge the entries by pid."""
    containers = procs.docker_containers()
    merged: dict[int, dict] = {}
    scans = [(port, None) for port in p["ports"]] + [(None, p["npu_info"])]
    for port, npu_info in scans:
        if npu_info is None and port is None:
            continue
        found = procs.find_holders(
            port, p["service"], npu_info, proc_root=p["proc_root"], containers=containers
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
    managed = [e for e in merged.values() if e.get("managed")]
    foreign = [e for e in merged.values() if not e.get("managed") and _in_our_way(e, p["npus"])]
    stale = [e for e in managed if e.get("container_name") not in p["keep"]]
    result = {
        "managed": [_brief(e) for e in sorted(managed, key=lambda e: e["pid"])],
        "stale": [_brief(e) for e in sorted(stale, key=lambda e: e["pid"])],
        "stale_containers": sorted({e["container_name"] for e in stale if e.get("container_name")}),
        "foreign": [_brief(e) for e in sorted(foreign, key=lambda e: e["pid"])],
        "_stale_pids": sorted(e["pid"] for e in stale if not e.get("container_name")),
        "_foreign_pids": sorted(e["pid"] for e in foreign),
    }
    if p["npu_info"]:
        # Memory this run frees: ours, and foreign holders' when kill_foreign ends them.
        ours_mb: dict[int, int] = {}
        for entry in managed + (foreign if p["kill_foreign"] else []):
            for use in entry.get("npus") or []:
                if use.get("npu") is not None:
                    ours_mb[use["npu"]] = ours_mb.get(use["npu"], 0) + (use.get("memory_mb") or 0)
        result["others_used_mb"] = {
            str(chip["npu"]): max(0, (chip.get("hbm_used_mb") or 0) - ours_mb.get(chip["npu"], 0))
            for chip in p["npu_info"].get("chips") or []
            if chip.get("npu") is not None and chip.get("chip", 0) in (0, None)
        }
    return result


def _described(results: list[dict], found: dict) -> list[dict]:
    """Each stop result with what was ended: command, owner, container, memory, NPUs, port."""
    known = {e["pid"]: dict(e, foreign=False) for e in found["stale"]}
    known.update({e["pid"]: dict(e, foreign=True) for e in found["foreign"]})
    return [{**known.get(r["pid"], {"foreign": False}), **r} for r in results]


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "ports": {"type": "list", "elements": "int", "default": []},
            "service": {"type": "str", "required": True},
            "keep": {"type": "list", "elements": "str", "default": []},
            "npu_info": {"type": "dict"},
            "npus": {"type": "list", "elements": "int", "default": []},
            "proc_root": {"type": "path", "default": "/proc"},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "kill_foreign": {"type": "bool", "default": False},
            "grace_s": {"type": "float", "default": 10.0},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        found = collect(p)
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    pids = found.pop("_stale_pids")
    foreign_pids = found.pop("_foreign_pids")
    if p["kill_foreign"]:
        pids = sorted(set(pids) | set(foreign_pids))
    found["stopped"] = []
    if p["state"] == "absent" and pids:
        if module.check_mode:
            found["stopped"] = _described(
                [{"pid": pid, "result": "would stop"} for pid in pids], found
            )
        else:
            try:
                stopped = procs.stop(pids, p["grace_s"], proc_root=p["proc_root"])
            except AscendDeployError as exc:
                module.fail_json(msg=str(exc), **found)
            found["stopped"] = _described(stopped, found)
            after = collect(p)
            after.pop("_stale_pids")
            after.pop("_foreign_pids")
            found.update(after)
    module.exit_json(changed=bool(found["stopped"]), **found)


if __name__ == "__main__":
    main()
