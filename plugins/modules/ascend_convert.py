#!/usr/bin/python
"""Ansible module: convert a block-FP8 checkpoint to BF16 (idempotent, check mode, diff)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_convert
short_description: Convert a block-wise FP8 checkpoint to BF16 for Atlas A2/A3
description:
  - Thin wrapper over C(ascend_deploy.fp8.convert). A2/A3 NPUs have no FP8 compute path, so an
    FP8 checkpoint is dequantized to BF16 once and served from C(dst).
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
    description: BF16 output directory.
    type: path
    required: true
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
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Convert FP8 to BF16
  ascend_convert:
    src: /srv/models/qwen3-4b-fp8
    dst: /srv/models/qwen3-4b-fp8-bf16
"""

RETURN = r"""
status:
  description: converted, up-to-date or not-needed (needed in check mode / status_only).
  returned: always
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


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "src": {"type": "path", "required": True},
            "dst": {"type": "path", "required": True},
            "workers": {"type": "int"},
            "verify": {"type": "bool", "default": False},
            "force": {"type": "bool", "default": False},
            "status_only": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    p = module.params
    from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.fp8.convert import (
        conversion_status,
    )

    try:
        before = conversion_status(p["src"], p["dst"])
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
            diff=diff if module._diff and needed else None,
        )
    try:
        from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.fp8.convert import (
            convert_checkpoint,
        )

        result = convert_checkpoint(
            p["src"], p["dst"], workers=p["workers"], verify=p["verify"], force=p["force"]
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
        result=result,
        diff=diff if module._diff else None,
    )


if __name__ == "__main__":
    main()
