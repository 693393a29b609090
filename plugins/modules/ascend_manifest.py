#!/usr/bin/python
"""Ansible module: verify a model directory against a SHA256SUMS manifest (model.checksums),
or make the manifest of a hub download on the controller (model.hub)."""

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
  make_dest:
    description:
      - Make the manifest instead of verifying (on the controller, before staging). C(path) may
        be a plain directory or a hub download (Hugging Face cache or C(--local-dir),
        ModelScope); a directory with its own C(manifest) keeps it, otherwise the manifest is
        written here, with each sha256 from the hub's metadata where it is on disk, else
        computed (C(origin) says which). The source is never written to.
    type: path
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
dir:
  description: The directory holding the model's files (a hub cache resolves to its snapshot).
  returned: with make_dest
  type: str
manifest:
  description: The manifest to stage and check (the directory's own, or the one made).
  returned: with make_dest
  type: str
origin:
  description: Where the checksums come from (hub metadata, computed, the directory's own).
  returned: with make_dest
  type: str
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
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.model.hub import (
    controller_manifest,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "manifest": {"type": "path", "default": "SHA256SUMS"},
            "use_cache": {"type": "bool", "default": True},
            "list_only": {"type": "bool", "default": False},
            "make_dest": {"type": "path"},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        if p["make_dest"]:
            made = controller_manifest(p["path"], p["manifest"], p["make_dest"])
            module.exit_json(changed=False, **made)
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
