#!/usr/bin/python
"""Ansible module: gather Ascend NPU facts from ``npu-smi``."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: npu_facts
short_description: Gather Ascend NPU facts from npu-smi
description:
  - Runs C(npu-smi info) and C(npu-smi info -m) on the target and returns them parsed as
    the fact C(ascend_npu).
  - Uses the C(ascend_deploy) library of this bundle, shipped to the target as
    module_utils, so the target needs only Python 3.
  - Read-only; never reports a change and runs the same in check mode.
options:
  npu_smi_path:
    description:
      - The npu-smi binary, a name looked up on C(PATH) (then in C(/usr/local/bin) and
        C(/usr/local/sbin)) or an absolute path.
    type: str
    default: npu-smi
  timeout:
    description: Seconds to wait for each npu-smi call.
    type: float
    default: 30
  hardware:
    description:
      - The hardware family the operator declared (C(ascend_runtime_hardware)). When the chip
        names show another family the module fails naming both and the fix, so a playbook can
        stop a host before it changes anything. C(auto) checks nothing.
    type: str
    default: auto
    choices: [auto, a2, a3, a5, 310p]
author:
  - ascend-deploy maintainers
"""

EXAMPLES = r"""
- name: Gather NPU facts
  npu_facts:

- name: Use the npu-smi mounted into a container
  npu_facts:
    npu_smi_path: /usr/local/sbin/npu-smi

- name: Stop a host whose chips are not the declared family, before any change
  npu_facts:
    hardware: "{{ ascend_runtime_hardware }}"

- name: Refuse hosts with an unhealthy chip
  ansible.builtin.assert:
    that: >-
      ansible_facts.ascend_npu.info.chips
      | rejectattr('health', 'equalto', 'OK') | list | length == 0
    fail_msg: "An NPU chip is not healthy"
"""

RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: success
  type: dict
  contains:
    ascend_npu:
      description: Parsed npu-smi output.
      type: dict
      contains:
        info:
          description: >-
            C(npu-smi info): C(kind), driver C(version), C(chips) (npu, chip, device, phy_id, name,
            health, power_w, temp_c, aicore_pct, bus_id, hbm_used_mb, hbm_total_mb,
            memory_used_mb, memory_total_mb, hugepages_used, hugepages_total) and
            C(processes) (npu, chip, pid, name, memory_mb).
          type: dict
          sample:
            kind: info
            version: 24.1.1
            chips:
              - {npu: 0, chip: 0, device: 0, phy_id: null, name: 910B4, health: OK, power_w: 88.2,
                 temp_c: 30.0, aicore_pct: 0.0, bus_id: "0000:C1:00.0", hbm_used_mb: 26838,
                 hbm_total_mb: 32768, memory_used_mb: 0, memory_total_mb: 0,
                 hugepages_used: 0, hugepages_total: 0}
            processes: []
        hardware:
          description: >-
            The hardware family the chip names show (a2 = 910B*, a3 = 910 with Phy-IDs or
            910_93*, 310p = 310P*, a5 = 950*), or null when no chip name says. The roles use it
            when C(ascend_runtime_hardware) is C(auto) (the default).
          type: str
          sample: a2
        map:
          description: >-
            C(npu-smi info -m) rows (npu, chip, logic_id, chip_name), or null when that
            command failed on this host.
          type: dict
          sample:
            kind: map
            rows:
              - {npu: 0, chip: 0, logic_id: 0, chip_name: Ascend 910B4}
              - {npu: 0, chip: 1, logic_id: null, chip_name: Mcu}
        map_error:
          description: Why C(map) is null.
          type: str
          returned: when npu-smi info -m failed
        text:
          description:
            - The text of C(npu-smi info) as read (at most 8 MiB, within C(timeout)), for reports
              such as the failure report of C(deploy_verify).
          type: str
          returned: success
"""

# Ansible modules import after their documentation blocks.
from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.errors import (
    AscendDeployError,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.host.npu_smi import (
    assign_devices,
    hardware_mismatch,
    hardware_of,
    parse,
    run_npu_smi,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "npu_smi_path": {"type": "str", "default": "npu-smi"},
            "timeout": {"type": "float", "default": 30.0},
            "hardware": {
                "type": "str",
                "default": "auto",
                "choices": ["auto", "a2", "a3", "a5", "310p"],
            },
        },
        supports_check_mode=True,
    )
    binary = module.params["npu_smi_path"]
    timeout = module.params["timeout"]
    try:
        text = run_npu_smi(["info"], binary=binary, timeout=timeout)
        info = parse(
            text,
            kind="info",
            source=f"`{binary} info` output",
        )
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    mismatch = hardware_mismatch(module.params["hardware"], info.get("chips") or [])
    if mismatch:
        module.fail_json(msg=f"{mismatch[0]}. Fix: {mismatch[1]}")
    facts: dict = {
        "info": info,
        "hardware": hardware_of(info.get("chips") or []),
        "map": None,
        "text": text,
    }
    try:
        facts["map"] = parse(
            run_npu_smi(["info", "-m"], binary=binary, timeout=timeout),
            kind="map",
            source=f"`{binary} info -m` output",
        )
    except AscendDeployError as exc:
        facts["map_error"] = str(exc)
    try:
        assign_devices(info, facts["map"])
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, ansible_facts={"ascend_npu": facts})


if __name__ == "__main__":
    main()
