#!/usr/bin/python
"""Ansible module: plan vllm serve arguments from the model and the NPU memory."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_plan
short_description: Plan vLLM-Ascend serve arguments (TP, replicas, max length, KV, env)
description:
  - Thin wrapper over C(ascend_deploy.planning.plan.make_plan). Read-only; supports check mode.
  - Never fails on an infeasible plan; returns C(feasible) and C(reasons) so the role asserts
    with the numbers.
options:
  model_dir:
    description: Model directory on the target (config.json and safetensors).
    type: path
    required: true
  hbm_total_mb:
    description:
      - HBM per NPU in MB. Give this or C(chips).
    type: int
  chips:
    description:
      - The C(npu-smi info) chips (npu_facts' C(info.chips)) of the NPUs this service gets, in
        place of C(hbm_total_mb) - the smallest HBM of them, or their DDR (C(Memory-Usage)) on
        310P cards, which report no HBM (C(ascend_deploy.planning.preflight.npu_memory)).
    type: list
    elements: dict
  hbm_used_mb:
    description: HBM already in use on the NPUs we get (largest value), MB.
    type: int
    default: 0
  npus:
    description:
      - Number of NPUs available for this service (NPUs 0 to npus-1).
      - One NPU when neither this nor C(npu_ids) is given.
    type: int
  npu_ids:
    description:
      - Device ids of the chips this service gets (npu_facts' chip C(device), the Chip Logic ID of
        C(npu-smi info -m); on Atlas A2 the NPU id, on A3 one per die, on 300I Duo one per chip);
        replaces C(npus).
      - Each replica mounts C(/dev/davinci<id>) of its ids and numbers them 0..k-1 in
        C(ASCEND_RT_VISIBLE_DEVICES) (docs/device-numbering.md).
    type: list
    elements: int
  service:
    description: Service name; replica I(i) runs in the container C(<service>-<i>).
    type: str
    default: vllm
  hccl_base_port:
    description:
      - First HCCL host-NIC port (C(HCCL_IF_BASE_PORT)) of NPU 0; a TP > 1 replica gets it plus
        its first NPU id times the rules' stride. Default the rules' base (60000).
    type: int
  hardware:
    description: Hardware family (a2, a3, 310p).
    type: str
    default: a2
  vllm_ascend:
    description: vllm-ascend release that will serve (changes flags and quantization rules).
    type: str
  max_model_len:
    description: Requested maximum context length (lowered or refused when it does not fit).
    type: int
  max_num_seqs:
    description: Requested concurrent sequences; sized from the KV capacity when omitted.
    type: int
  tp:
    description: Requested tensor-parallel size; one replica per NPU when omitted and it fits.
    type: int
  gpu_memory_utilization:
    description: Fraction of HBM vLLM may use.
    type: float
    default: 0.9
  quantization:
    description: Requested C(--quantization) value; refused when it does not match the checkpoint.
    type: str
  enforce_eager:
    description: Disable graph capture.
    type: bool
    default: false
  host_ram_mb:
    description: Host RAM in MB (weights are read through host memory).
    type: int
  port:
    description: First serving port (replica i listens on port + i).
    type: int
    default: 8000
  host:
    description: Bind address passed to C(vllm serve --host).
    type: str
    default: 0.0.0.0
  served_model_name:
    description: Name clients use in requests.
    type: str
  api_key_env:
    description: The container gets C(VLLM_API_KEY) from its env file (never C(--api-key) in argv).
    type: bool
    default: false
  extra_args:
    description: Extra C(vllm serve) arguments (must not repeat a planned flag).
    type: list
    elements: str
    default: []
  served_model_dir:
    description: Directory vLLM serves (the BF16 copy of an FP8 checkpoint).
    type: path
  additional_config:
    description: Operator C(--additional-config) keys, merged over the planned ones (these win).
    type: dict
    default: {}
  extra_env:
    description: The operator's extra container environment (removed variables are warned about).
    type: dict
    default: {}
  host_cpus:
    description: CPUs the serving container may use (CPU binding's need, v0.15.0rc1+).
    type: int
  host_npus:
    description: NPUs (logical, as npu-smi info -m lists them) on the host.
    type: int
  host_arch:
    description: CPU architecture of the host (CPU binding is ARM only).
    type: str
  rules:
    description:
      - Content of C(ascend_deploy/data/serve_rules.json). AnsiballZ ships only Python files,
        so the role reads the rules on the controller and passes them here; they go to
        C(make_plan) as they are.
    type: dict
  options:
    description: Further keyword arguments for C(make_plan), passed unchanged.
    type: dict
    default: {}
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Plan the service
  ascend_plan:
    model_dir: /srv/models/qwen3-4b-bf16
    hbm_total_mb: 65536
    npus: 8
  register: plan
"""

RETURN = r"""
plan:
  description:
    - The plan (feasible, reasons, tp, replicas, max_model_len, argv, env, ...).
    - C(replica_launch) holds one complete spec per replica (name, index, npus, devices,
      port, env, argv).
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.errors import (
    AscendDeployError,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.planning.plan import (
    make_plan,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.planning.preflight import (
    npu_memory,
)

_DIRECT = (
    "hbm_total_mb",
    "hbm_used_mb",
    "npus",
    "hardware",
    "vllm_ascend",
    "max_model_len",
    "max_num_seqs",
    "tp",
    "gpu_memory_utilization",
    "quantization",
    "enforce_eager",
    "host_ram_mb",
    "port",
    "host",
    "served_model_name",
    "api_key_env",
    "extra_args",
    "served_model_dir",
    "service",
    "hccl_base_port",
    "additional_config",
    "extra_env",
    "host_cpus",
    "host_npus",
    "host_arch",
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "model_dir": {"type": "path", "required": True},
            "hbm_total_mb": {"type": "int"},
            "chips": {"type": "list", "elements": "dict"},
            "hbm_used_mb": {"type": "int", "default": 0},
            "npus": {"type": "int"},
            "npu_ids": {"type": "list", "elements": "int"},
            "service": {"type": "str", "default": "vllm"},
            "hardware": {"type": "str", "default": "a2"},
            "vllm_ascend": {"type": "str"},
            "max_model_len": {"type": "int"},
            "max_num_seqs": {"type": "int"},
            "tp": {"type": "int"},
            "gpu_memory_utilization": {"type": "float", "default": 0.9},
            "quantization": {"type": "str"},
            "enforce_eager": {"type": "bool", "default": False},
            "host_ram_mb": {"type": "int"},
            "port": {"type": "int", "default": 8000},
            "host": {"type": "str", "default": "0.0.0.0"},
            "served_model_name": {"type": "str"},
            "api_key_env": {"type": "bool", "default": False},
            "extra_args": {"type": "list", "elements": "str", "default": []},
            "served_model_dir": {"type": "path"},
            "hccl_base_port": {"type": "int"},
            "additional_config": {"type": "dict", "default": {}},
            "extra_env": {"type": "dict", "default": {}},
            "host_cpus": {"type": "int"},
            "host_npus": {"type": "int"},
            "host_arch": {"type": "str"},
            "rules": {"type": "dict"},
            "options": {"type": "dict", "default": {}},
        },
        mutually_exclusive=[("npus", "npu_ids"), ("hbm_total_mb", "chips")],
        required_one_of=[("hbm_total_mb", "chips")],
        supports_check_mode=True,
    )
    p = module.params
    kwargs = {name: p[name] for name in _DIRECT}
    if p["chips"] is not None:
        memory = npu_memory(p["chips"])
        if memory is None:
            module.fail_json(
                msg="ascend_plan: npu-smi gave no HBM or memory figures for the chips "
                f"{[c.get('npu') for c in p['chips']]}; pass hbm_total_mb (MB per NPU)"
            )
        kwargs["hbm_total_mb"] = memory[0]
    if p["npu_ids"] is not None:
        kwargs["npus"] = p["npu_ids"]
    kwargs.update(p["options"])
    try:
        plan = make_plan(p["model_dir"], rules=p["rules"], **kwargs)
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    except TypeError as exc:
        module.fail_json(msg=f"ascend_plan: unsupported option in 'options': {exc}")
    module.exit_json(changed=False, plan=plan)


if __name__ == "__main__":
    main()
