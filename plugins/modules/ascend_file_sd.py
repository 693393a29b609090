#!/usr/bin/python
"""Ansible module: the fleet's Prometheus file_sd targets file (controller side)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_file_sd
short_description: Write a Prometheus file_sd targets file with one target per vLLM replica
description:
  - Thin wrapper over C(ascend_deploy.reporting.file_sd). Runs on the controller
    (C(delegate_to=localhost),
    C(run_once)); deploy.yml's last play calls it (playbooks/tasks/prometheus_targets.yml).
  - Writes a JSON list of C({targets, labels}) groups as Prometheus' C(file_sd_configs) reads it,
    one group per replica labelled C(host), C(npu), C(model), C(service), C(replica).
  - The groups of C(hosts) are replaced by those built from C(replicas); groups of other hosts
    are kept, except hosts not in C(fleet) (when given), which are dropped.
  - The file is replaced atomically; an unchanged file is not rewritten. Check mode writes nothing
    and reports whether the file would change.
options:
  path:
    description: The targets file (C(.json)); its directory is created.
    type: path
    required: true
  replicas:
    description:
      - One dict per replica with C(host), C(address), C(port), C(npus), C(model), C(service),
        C(replica).
    type: list
    elements: dict
    default: []
  hosts:
    description: Inventory hosts whose groups this call replaces (hosts deployed by this run).
    type: list
    elements: str
    default: []
  fleet:
    description: Every host of the fleet; groups of other hosts are dropped. Omit to keep them.
    type: list
    elements: str
  services:
    description:
      - Host to service name. A host named here loses only the groups of that service (other
        services on the host keep their targets). Hosts not named lose all their groups.
    type: dict
    default: {}
  labels:
    description: Labels added to every group (they cannot replace the replica's own).
    type: dict
    default: {}
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Prometheus targets of the fleet
  ascend_file_sd:
    path: /etc/prometheus/file_sd/ascend-vllm.json
    replicas:
      - {host: npu-01, address: 10.0.0.11, port: 8000, npus: [0], model: qwen3-4b,
         service: qwen3, replica: qwen3-0}
    hosts: [npu-01]
    fleet: "{{ groups['ascend_llm'] }}"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
path:
  description: The targets file.
  returned: always
  type: str
groups:
  description: The target groups now in the file (or that would be, in check mode).
  returned: always
  type: list
  elements: dict
targets:
  description: Number of targets in the file.
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.errors import (
    AscendDeployError,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.reporting import (
    file_sd,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "replicas": {"type": "list", "elements": "dict", "default": []},
            "hosts": {"type": "list", "elements": "str", "default": []},
            "fleet": {"type": "list", "elements": "str"},
            "labels": {"type": "dict", "default": {}},
            "services": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        changed, groups = file_sd.update(
            p["path"],
            p["replicas"],
            p["hosts"],
            p["fleet"],
            p["labels"],
            module.check_mode,
            {str(h): str(s) for h, s in p["services"].items()},
        )
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(
        changed=changed,
        path=p["path"],
        groups=groups,
        targets=sum(len(g["targets"]) for g in groups),
    )


if __name__ == "__main__":
    main()
