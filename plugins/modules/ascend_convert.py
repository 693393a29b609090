#!/usr/bin/python
"""Ansible module: convert a block-FP8 checkpoint to BF16/FP16 (idempotent, check mode, diff)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_convert
short_description: Convert a block-wise FP8 checkpoint to BF16 (or FP16) where the release cannot serve it
description:
  - Thin wrapper over C(ascend_deploy.fp8.convert). A2/A3/310P NPUs have no FP8 compute path, and
    no tagged vLLM-Ascend release serves a generic block-FP8 checkpoint on Ascend 950 either
    (serving rules C(block_fp8)), so an FP8 checkpoint is dequantized to BF16 once and served
    from C(dst). With C(hardware), C(fp8_native) says whether the release serves it as it is.
  - C(dtype=float16) writes FP16 instead (Atlas 300I Duo / 310P has no BF16; vllm-ascend serves
    it with --dtype float16); C(dtype=auto) takes the serving rules' dtype of C(hardware).
  - Check mode and C(status_only) use the standard-library C(conversion_status) only, so they run
    on any target. The conversion itself needs numpy and ml_dtypes in the interpreter that runs
    the module (set C(ansible_python_interpreter) for the task), or run the converter inside the
    serving image (the model_weights role does that by default).
options:
  src:
    description: FP8 checkpoint directory.
    type: path
    required: true
  dst:
    description: Output directory (BF16, or FP16 with C(dtype=float16)).
    type: path
    required: true
  dtype:
    description: Output dtype. C(auto) needs C(hardware) and takes its dtype from the serving
      rules (float16 on 310p, else bfloat16; C(ascend_deploy.fp8.numeric.conversion_dtype)).
      A value FP16 cannot hold (beyond 65504) fails the conversion, naming the tensor.
    type: str
    choices: [auto, bfloat16, float16]
    default: bfloat16
  workers:
    description: Worker processes for the conversion.
    type: int
  verify:
    description: Re-read the output and compare with the source after converting.
    type: bool
    default: false
  force:
    description: Convert even when C(dst) is up to date.
    type: bool
    default: false
  status_only:
    description: Only report C(needed), C(up-to-date) or C(not-needed); never convert.
    type: bool
    default: false
  hardware:
    description: Hardware key of the serving rules (a2, a3, a5, 310p); with it the module reports
      C(fp8_native) and C(fp8_reason) (the planner's decision, C(planning.rules.block_fp8_native)).
    type: str
  vllm_ascend:
    description: The vllm-ascend release that will serve the model (empty = unknown).
    type: str
  rules:
    description: The serving rules (serve_rules.json, read on the controller); required with
      C(hardware).
    type: dict
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Convert FP8 to BF16
  ascend_convert:
    src: /srv/models/qwen3-4b-fp8
    dst: /srv/models/qwen3-4b-fp8-bf16

- name: Convert FP8 to FP16 for an Atlas 300I Duo (310P has no BF16)
  ascend_convert:
    src: /srv/models/qwen3-4b-fp8
    dst: /srv/models/qwen3-4b-fp8-fp16
    dtype: float16
"""

RETURN = r"""
status:
  description: converted, up-to-date or not-needed (needed in check mode / status_only).
  returned: always
  type: str
dtype:
  description: The output dtype (bfloat16 or float16; C(auto) resolved).
  returned: always
  type: str
fp8_native:
  description: The release serves the block-FP8 checkpoint as it is on C(hardware) (no conversion).
  returned: when hardware is given
  type: bool
fp8_reason:
  description: Why it does not (the release's outcome, or no FP8 compute).
  returned: when hardware is given
  type: str
result:
  description: The converter's report (tensors, bytes, seconds).
  returned: when converted
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.errors import (
    AscendDeployError,
)


def _fp8_native(hardware: str, vllm_ascend: str | None, rules: dict) -> tuple[dict, dict]:
    """``fp8_native`` / ``fp8_reason`` as the planner decides them for this release, and the
    hardware's rules entry."""
    from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.planning.rules import (
        block_fp8_native,
        check_rules,
    )
    from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.planning.validation import (
        hardware_entry,
    )

    rules = check_rules(rules, "ascend_convert rules")
    _key, hw = hardware_entry(rules, hardware, None)
    native, reason = block_fp8_native(rules, hw, vllm_ascend)
    return {"fp8_native": native, "fp8_reason": reason}, hw


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "src": {"type": "path", "required": True},
            "dst": {"type": "path", "required": True},
            "dtype": {
                "type": "str",
                "choices": ["auto", "bfloat16", "float16"],
                "default": "bfloat16",
            },
            "workers": {"type": "int"},
            "verify": {"type": "bool", "default": False},
            "force": {"type": "bool", "default": False},
            "status_only": {"type": "bool", "default": False},
            "hardware": {"type": "str"},
            "vllm_ascend": {"type": "str"},
            "rules": {"type": "dict"},
        },
        supports_check_mode=True,
        required_by={"hardware": ["rules"]},
        required_if=[("dtype", "auto", ["hardware"])],
    )
    p = module.params
    from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.fp8.convert import (
        conversion_status,
    )
    from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.fp8.numeric import (
        conversion_dtype,
    )

    native: dict = {}
    hw = None
    try:
        if p["hardware"]:
            native, hw = _fp8_native(p["hardware"], p["vllm_ascend"] or None, p["rules"])
        dtype = conversion_dtype(p["dtype"], hw)
        before = conversion_status(p["src"], p["dst"], dtype)
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    # --force only permits replacing a DST that is not an earlier conversion of SRC; an
    # up-to-date conversion is never redone, so check mode predicts exactly that.
    needed = before == "needed"
    diff = {"before": f"{p['dst']}: {before}\n", "after": f"{p['dst']}: up-to-date\n"}
    if module.check_mode or p["status_only"] or not needed:
        module.exit_json(
            changed=needed and not p["status_only"],
            status=before,
            dtype=dtype,
            diff=diff if module._diff and needed else None,
            **native,
        )
    try:
        from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.fp8.convert import (
            convert_checkpoint,
        )

        result = convert_checkpoint(
            p["src"],
            p["dst"],
            workers=p["workers"],
            verify=p["verify"],
            force=p["force"],
            dtype=dtype,
        )
    except ImportError as exc:
        module.fail_json(
            msg=(
                f"ascend_convert: the interpreter running the module lacks {exc.name or exc}; "
                "install numpy and ml_dtypes there (pip install 'ascend-deploy[convert]') or "
                "use model_weights_convert_backend: container"
            )
        )
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    status = result.get("status", "converted")
    module.exit_json(
        changed=status == "converted",
        status=status,
        dtype=dtype,
        result=result,
        diff=diff if module._diff else None,
    )


if __name__ == "__main__":
    main()
