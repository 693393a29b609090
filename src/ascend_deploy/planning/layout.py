"""Replica layout: which NPUs, device files, environment, port and argv each replica gets.

Replica ``r`` of a service at TP ``t`` runs in container ``<service>-<r>`` on the NPUs
``ids[r*t:(r+1)*t]`` (the host device ids the service was given), sees them through
``/dev/davinci<id>`` plus the shared device files of the vllm-ascend ``docker run`` example
(https://docs.vllm.ai/projects/ascend/en/latest/installation.html), addresses them in the
container's own numbering, ``ASCEND_RT_VISIBLE_DEVICES=0,..,t-1`` (inside a container the
runtime numbers the mounted devices 0..k-1: docs/device-numbering.md), and listens on
``port + r``. At TP > 1 with several
replicas each gets its own HCCL port range (``hccl_ports`` in the serving rules).
Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import InputError
from .rules import rule_applies

# Shared device files every serving container needs besides its /dev/davinciN.
CONTROL_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")


def planned_env(
    rules: dict, tp: int, version: tuple | None, hardware: str, model_type: str | None = None
) -> dict[str, str]:
    """The environment the serving rules set for this TP, release, hardware and model type."""
    return {
        rule["name"]: str(rule["value"])
        for rule in rules["env"]
        if rule_applies(rule.get("when", {}), tp, version, hardware, model_type)
    }


def swap_space(
    rule: dict,
    tp: int,
    version: tuple | None,
    hardware: str,
    host_ram_mb: int | None,
    ranks: int,
    notes: list[str],
) -> int | None:
    """GiB for --swap-space, or None when the version lacks it or host RAM does not allow."""
    if host_ram_mb is None:
        return None
    if not rule_applies(rule.get("when", {}), tp, version, hardware):
        notes.append(
            "--swap-space omitted: removed in vLLM 0.18.0 / unused by the V1 engine"
            + (" (vllm-ascend version unknown)" if version is None else "")
        )
        return None
    limit = int(host_ram_mb * rule.get("max_ram_fraction", 0.4) / 1024 / ranks)
    gib = min(int(rule.get("default_gib", 4)), limit)
    if gib < 1:
        notes.append(
            f"--swap-space omitted: {host_ram_mb} MB host RAM cannot give {ranks} NPU "
            "worker(s) 1 GiB each within 40% of RAM"
        )
        return None
    return gib


def container_visible_devices(count: int) -> str:
    """``ASCEND_RT_VISIBLE_DEVICES`` for a container that mounts ``count`` /dev/davinciN.

    The runtime numbers the mounted devices 0..count-1 in the order of their host ids, and
    the variable indexes that numbering, not the host's (docs/device-numbering.md).
    """
    return ",".join(str(i) for i in range(count))


def hccl_base_port(hccl: dict, npu_ids: list[int]) -> int:
    """The first HCCL host-NIC port of a replica on host NPUs ``npu_ids``: ``base`` plus its
    first NPU id times ``stride_per_npu``. NPU ids are unique on a host, so replicas of any
    services on disjoint NPUs get disjoint ranges."""
    port = int(hccl["base"]) + min(npu_ids) * int(hccl["stride_per_npu"])
    if port + int(hccl["stride_per_npu"]) > 65536:
        raise InputError(
            f"HCCL ports {port}-{port + int(hccl['stride_per_npu']) - 1} for NPUs {npu_ids} "
            "pass 65535; set a lower base (vllm_service_hccl_base_port)"
        )
    return port


def replica_specs(
    service: str,
    npu_ids: list[int],
    tp: int,
    port: int,
    env: dict[str, str],
    argv_for: Callable[[int], list[str]],
    hccl: dict | None,
) -> list[dict]:
    """One complete spec per replica: name, index, npus, devices, port, env, argv."""
    count = len(npu_ids) // tp
    specs = []
    for r in range(count):
        ids = npu_ids[r * tp : (r + 1) * tp]
        renv = dict(env)
        renv["ASCEND_RT_VISIBLE_DEVICES"] = container_visible_devices(len(ids))
        if tp > 1 and hccl:
            renv["HCCL_IF_BASE_PORT"] = str(hccl_base_port(hccl, ids))
        specs.append(
            {
                "name": f"{service}-{r}",
                "index": r,
                "npus": ids,
                "devices": [f"/dev/davinci{i}" for i in ids] + list(CONTROL_DEVICES),
                "port": port + r,
                "env": renv,
                "argv": argv_for(port + r),
            }
        )
    return specs
