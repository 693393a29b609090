#!/usr/bin/python
"""Ansible module: atomic staging of a model directory (space check, switch, discard)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_stage
short_description: Stage a model directory atomically, checking free space first
description:
  - Thin wrapper over C(ascend_deploy.model.staging). Copies go into C(.<name>.staging) beside
    C(path); C(commit) switches it into place with renames, C(absent) removes it.
  - C(state=space) is read-only (also in check mode) and fails naming the bytes needed and free.
options:
  path:
    description: The model directory the service reads (absolute).
    type: path
    required: true
  state:
    description: C(space) checks free space, C(commit) switches the staged copy into place,
      C(absent) removes the staging directory.
    type: str
    choices: [space, commit, absent]
    default: space
  need_bytes:
    description: Bytes the copy needs (C(state=space)).
    type: int
    default: 0
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Check free space before copying
  ascend_stage:
    path: /srv/ascend-deploy/models/qwen3
    need_bytes: 8044936192
"""

RETURN = r"""
staging:
  description: The staging directory beside C(path).
  returned: always
  type: str
need_bytes:
  description: Bytes needed (state=space).
  returned: with state=space
  type: int
free_bytes:
  description: Bytes free on the filesystem of the staging directory (state=space).
  returned: with state=space
  type: int
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.errors import (
    AscendDeployError,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.model import staging


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "state": {"type": "str", "choices": ["space", "commit", "absent"], "default": "space"},
            "need_bytes": {"type": "int", "default": 0},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        tmp = staging.staging_dir(p["path"])
        if p["state"] == "space":
            replaced = staging.dir_bytes(p["path"])
            result = staging.check_space(p["path"], p["need_bytes"], replaced)
            module.exit_json(changed=False, staging=tmp, replaced_bytes=replaced, **result)
        if p["state"] == "absent":
            changed = os.path.lexists(tmp)
            if changed and not module.check_mode:
                staging.discard(p["path"])
            module.exit_json(changed=changed, staging=tmp)
        if not module.check_mode:
            staging.commit(p["path"])
        module.exit_json(changed=True, staging=tmp)
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc), staging=staging.staging_dir(p["path"]))
    except OSError as exc:
        module.fail_json(
            msg=f"{p['path']}: {exc.strerror} ({exc.filename}); the previous model is untouched"
        )


if __name__ == "__main__":
    main()
