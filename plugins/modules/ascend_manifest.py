#!/usr/bin/python
"""Ansible module: verify a model directory against a SHA256SUMS manifest (model.checksums)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_manifest
short_description: Verify model files against a sha256 manifest
description:
  - The manifest has one C(<sha256>  <relative path>) line per file (the output of
    C(sha256sum) run inside the model directory; C(*) binary markers are accepted).
  - Files whose size and mtime match an earlier successful verification (recorded in
    C(<dir>/.ascend-deploy-verified.json)) are not hashed again, so a second deploy run is fast.
  - Read-only apart from that record; supports check mode (nothing is written then).
options:
  path:
    description: Model directory.
    type: path
    required: true
  manifest:
    description: Manifest file; relative paths are taken inside C(path).
    type: path
    default: SHA256SUMS
  use_cache:
    description: Trust the record of an earlier verification for unchanged files.
    type: bool
    default: true
  list_only:
    description: Only parse the manifest and return C(entries) (for downloads); hash nothing.
    type: bool
    default: false
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Verify weights
  ascend_manifest:
    path: /srv/models/qwen3-4b-fp8
"""

RETURN = r"""
files:
  description: Number of files in the manifest.
  returned: always
  type: int
hashed:
  description: Files hashed in this run (the rest matched the record).
  returned: always
  type: int
bytes:
  description: Total size of the files in the manifest.
  returned: unless list_only
  type: int
entries:
  description: Relative path -> sha256 from the manifest.
  returned: with list_only
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.errors import (
    AscendDeployError,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.model.checksums import (
    ChecksumMismatch,
    manifest_path,
    read_sums,
    verify_dir,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "manifest": {"type": "path", "default": "SHA256SUMS"},
            "use_cache": {"type": "bool", "default": True},
            "list_only": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        if p["list_only"]:
            entries = read_sums(manifest_path(p["path"], p["manifest"]))
            module.exit_json(changed=False, entries=entries, files=len(entries))
        result = verify_dir(p["path"], p["manifest"], p["use_cache"], record=not module.check_mode)
    except ChecksumMismatch as exc:
        module.fail_json(msg=str(exc), problems=exc.problems)
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
