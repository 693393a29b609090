#!/usr/bin/python
"""Ansible module: resolve the vllm-ascend / torch_npu / CANN set that matches a host."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_compat
short_description: Resolve or check a matching vllm-ascend, torch_npu and CANN set
description:
  - Thin wrapper over C(ascend_deploy.planning.compat). Read-only; supports check mode.
  - C(resolve) picks the compat-matrix row (and its image) for the host's CANN and hardware.
  - When C(installed) is given, C(check) compares installed packages with that row.
  - When C(driver) is given, C(driver_supports_cann) says whether the driver can run that CANN.
options:
  cann:
    description:
      - CANN version on the host (host mode). Empty (container mode, where CANN is in the
        image) picks the newest final release whose CANN the host C(driver) can run.
    type: str
  hardware:
    description: Hardware family key of the compat matrix.
    type: str
    default: a2
  python:
    description: Python version (C(3.11)) the row must support.
    type: str
  allow_rc:
    description: Also consider release candidates.
    type: bool
    default: false
  os_variant:
    description: Image OS variant (for example C(openeuler)); default is the Ubuntu image.
    type: str
  registry:
    description: Image registry and namespace.
    type: str
    default: quay.io/ascend
  vllm_ascend:
    description: Pin this vllm-ascend release instead of resolving one (the row is still checked).
    type: str
  installed:
    description: Installed package versions (C(ascend_versions.packages)) to check against the row.
    type: dict
  driver:
    description: Installed driver version; checked against the row's CANN.
    type: str
  matrix:
    description:
      - Content of C(ascend_deploy/data/compat_matrix.json). AnsiballZ ships only Python files,
        so the role reads the matrix on the controller and passes it here; the library
        resolves against it as it is.
    type: dict
  fail_on_error:
    description: Fail when no row matches; when false, return C(error) instead.
    type: bool
    default: true
extends_documentation_fragment:
  - ascend_vllm.serving.site_matrix
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Pick the image for this host
  ascend_compat:
    cann: "{{ ascend_versions.cann.version }}"
    hardware: a2
    driver: "{{ ascend_versions.driver.version }}"
  register: compat
"""

RETURN = r"""
row:
  description: The matching compat-matrix row, with C(image).
  returned: when a row matched
  type: dict
image:
  description: The vllm-ascend image reference for the row; null when upstream built none for the hardware (the row's notes say which releases have one).
  returned: when a row matched
  type: str
findings:
  description: Findings of C(compat.check) (id, pitfall, status, evidence, fix).
  returned: always
  type: list
  elements: dict
driver_supports_cann:
  description: True, false, or null when the pairing is unknown.
  returned: when driver is given
  type: bool
driver_note:
  description: The driver's pairing with the row's CANN is not published (a warning).
  returned: when driver is given and the pairing is not published
  type: str
error:
  description: Why no row matched (only with fail_on_error false).
  returned: on a resolve error with fail_on_error false
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.errors import (
    AscendDeployError,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.planning import (
    compat,
)


def _resolve(p: dict) -> dict:
    where = {
        "os_variant": p["os_variant"] or None,
        "registry": p["registry"],
        "matrix": p["matrix"],
    }
    if p["vllm_ascend"]:
        return compat.resolve_pinned(p["vllm_ascend"], p["hardware"], **where)
    options = {"python": p["python"], "allow_rc": p["allow_rc"], **where}
    if p["cann"]:
        return compat.resolve(p["cann"], p["hardware"], **options)
    return compat.resolve_for_driver(p["driver"], p["hardware"], **options)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "cann": {"type": "str"},
            "hardware": {"type": "str", "default": "a2"},
            "python": {"type": "str"},
            "allow_rc": {"type": "bool", "default": False},
            "os_variant": {"type": "str"},
            "registry": {"type": "str", "default": "quay.io/ascend"},
            "vllm_ascend": {"type": "str"},
            "installed": {"type": "dict"},
            "driver": {"type": "str"},
            "matrix": {"type": "dict"},
            "site_matrix": {"type": "raw"},
            "site_matrix_file": {"type": "str"},
            "fail_on_error": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    result: dict = {"changed": False, "findings": []}
    try:
        p["matrix"] = compat.with_site_rows(p["matrix"], p["site_matrix"], p["site_matrix_file"])
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))  # a broken site row fails even with fail_on_error false
    try:
        row = _resolve(p)
    except AscendDeployError as exc:
        if p["fail_on_error"]:
            module.fail_json(msg=str(exc))
        result["error"] = str(exc)
        module.exit_json(**result)
    result["row"] = row
    result["image"] = row.get("image")
    result["pip_requirements"] = [
        row["pins"][k] for k in ("torch", "torch_npu", "vllm", "vllm_ascend") if k in row["pins"]
    ]
    cann = p["cann"] or row.get("cann")
    try:
        if p["installed"] is not None:
            result["findings"] = compat.check(p["installed"], cann, p["hardware"], p["matrix"])
        if p["driver"]:
            verdict = compat.driver_supports_cann(p["driver"], row["cann"])
            result["driver_supports_cann"] = verdict
            note = row.get("driver_note") or (
                compat.pairing_note(p["driver"], row["cann"]) if verdict is None else None
            )
            if note:
                result["driver_note"] = note
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
