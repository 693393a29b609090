#!/usr/bin/python
"""Ansible module: find (and end) processes that hold the serving ports or NPU memory."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_procs
short_description: Find processes holding the serving ports or NPU memory; end stale ones of ours
description:
  - Thin wrapper over C(ascend_deploy.host.service_holders) (C(procs.find_holders), C(procs.stop)).
    A holder is C(managed) (ours) only when it, or a parent process, runs in a container labelled
    C(ascend-deploy.service=<service>) (every container vllm_service starts carries it). Names in
    command lines or container names never count, so another team's C(vllm serve) is foreign.
  - Holders inside the containers listed in C(keep) are the current replicas and are never ended.
  - With C(state=absent) the module ends managed holders outside C(keep) (and foreign holders only
    when C(kill_foreign) is true) with SIGTERM, then SIGKILL after C(grace_s). Check mode reports
    the PIDs it would end. The calling role fails and lists foreign holders otherwise.
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
  devices:
    description: >-
      Device ids (npu_facts' C(device)) of the chips the service will use. When given, a foreign
      process counts only when it holds memory on one of these chips (the other die of an A3
      card, or the other chip of a 300I Duo card, is not in the way); a chip without a device id
      is judged by C(npus). Empty means by NPU.
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
  description: >-
    Holders that are not ours; one in a container of another service of this bundle has
    C(other_service) (its C(ascend-deploy.service) label) and is never ended, C(kill_foreign) or not.
  returned: always
  type: list
  elements: dict
other_services:
  description: The other services of this bundle among the foreign holders.
  returned: always
  type: list
  elements: str
others_used_mb:
  description: >-
    Per NPU id, HBM in use by processes that are not ours (for planning); with C(kill_foreign)
    the foreign holders' memory is not counted either (it is freed before the service starts),
    except another service's.
  returned: when npu_info is given
  type: dict
others_used_by_device:
  description: >-
    The same per chip, by device id (npu_facts' chip C(device)): every A3 die and 300I Duo chip on
    its own, HBM in use or, on 310P chips, DDR in use. What the plan sizes each replica's chips by.
  returned: when npu_info is given
  type: dict
stopped:
  description: >-
    Results of C(procs.stop) (or the PIDs that would be ended in check mode), each with what was
    ended - pid, result, detail, foreign, argv, user, container_name, memory_mb, npus, port.
  returned: always
  type: list
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.errors import (
    AscendDeployError,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.host.service_holders import (
    Scope,
    StopFailed,
    settle,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "ports": {"type": "list", "elements": "int", "default": []},
            "service": {"type": "str", "required": True},
            "keep": {"type": "list", "elements": "str", "default": []},
            "npu_info": {"type": "dict"},
            "npus": {"type": "list", "elements": "int", "default": []},
            "devices": {"type": "list", "elements": "int", "default": []},
            "proc_root": {"type": "path", "default": "/proc"},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "kill_foreign": {"type": "bool", "default": False},
            "grace_s": {"type": "float", "default": 10.0},
        },
        supports_check_mode=True,
    )
    p = module.params
    names = ("service", "ports", "npu_info", "npus", "devices", "keep", "kill_foreign", "proc_root")
    scope = Scope(**{k: p[k] for k in names})
    try:
        found = settle(scope, p["state"] == "absent", module.check_mode, p["grace_s"])
    except StopFailed as exc:
        module.fail_json(msg=str(exc), **exc.result)
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=bool(found["stopped"]), **found)


if __name__ == "__main__":
    main()
