#!/usr/bin/python
"""Ansible module: the record of the last verified deployment, and the check against it."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_deployed
short_description: Record a verified deployment; tell whether a host is still exactly that
description:
  - Thin wrapper over C(ascend_deploy.host.deployed_state) (deploy.yml's converged fast path).
  - C(state=check) compares the host with C(<state_dir>/deployed.json) - the desired-state
    digest, the managed files and model directories the record lists, the service's containers -
    and asks every recorded replica's C(/health). Read-only; returns C(converged), C(reasons) and
    the recorded C(facts).
  - C(state=present) writes the record (0600) after a verification passed; C(state=absent)
    removes it after one failed. Both are bookkeeping and never report a change; check mode
    writes nothing.
  - C(state=digest) returns C(digest), the sha256 of the bundle's files under C(root)
    (C(parts)); run it on the controller.
options:
  state:
    description: What to do.
    type: str
    choices: [check, present, absent, digest]
    default: check
  state_dir:
    description: The service's state directory (C(/etc/ascend-deploy/<service>)).
    type: path
  service:
    description: Service name (containers carry the label C(ascend-deploy.service=<service>)).
    type: str
  files:
    description:
      - With C(state=present), managed files inside C(state_dir) (content, mode, owner).
    type: list
    elements: str
    default: []
  dirs:
    description:
      - With C(state=present), the model directories (file names, sizes, mtimes).
    type: list
    elements: path
    default: []
  desired:
    description: The controller's digest of every input of the deployment.
    type: str
  facts:
    description: With C(state=present), facts the skipped roles would have set (no secrets).
    type: dict
    default: {}
  ports:
    description: With C(state=present), the replicas' ports that C(check) asks for /health.
    type: list
    elements: int
    default: []
  docker:
    description: Docker CLI on the host.
    type: str
    default: docker
  restart_threshold:
    description:
      - C(check) - a replica restarted more often than this since the verification (its restart
        policy hides a crash loop) sends the run through every step; C(restarts) reports them all.
    type: int
    default: 0
  root:
    description: With C(state=digest), the bundle's directory.
    type: path
  parts:
    description: With C(state=digest), files and directories under C(root) that make the bundle.
    type: list
    elements: str
    default: []
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Is this host still what the last verified deploy left?
  ascend_deployed:
    state: check
    state_dir: /etc/ascend-deploy/qwen3
    service: qwen3
    desired: "{{ ascend_desired_digest }}"
  register: converged
"""

RETURN = r"""
converged:
  description: The record matches and every replica is healthy (state=check).
  returned: state=check
  type: bool
reasons:
  description: Why the host is not converged (empty when it is).
  returned: state=check
  type: list
facts:
  description: The facts recorded with the deployment (only when converged).
  returned: state=check
  type: dict
restarts:
  description: Restarts of each replica container since the verification (only those with any).
  returned: state=check
  type: dict
digest:
  description: sha256 of the bundle's files.
  returned: state=digest
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.errors import (
    AscendDeployError,
    InputError,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.host import (
    deployed_state,
)

NEEDS = {
    "check": ("state_dir", "service", "desired"),
    "present": ("state_dir", "service", "desired"),
    "absent": ("state_dir",),
    "digest": ("root",),
}


def run(module: AnsibleModule) -> dict:
    p = module.params
    missing = [name for name in NEEDS[p["state"]] if not p[name]]
    if missing:
        raise InputError(f"state={p['state']} needs {', '.join(missing)}")
    if p["state"] == "digest":
        return {"digest": deployed_state.tree_digest(p["root"], p["parts"])}
    if p["state"] == "absent":
        if module.check_mode:
            return {"removed": False}
        return {"removed": deployed_state.forget(p["state_dir"])}
    if p["state"] == "check":
        return deployed_state.check(
            p["state_dir"], p["service"], p["desired"], p["docker"], p["restart_threshold"]
        )
    observed = deployed_state.observe(
        p["state_dir"], p["service"], p["files"], p["dirs"], p["docker"]
    )
    if module.check_mode:
        return {"path": ""}
    path = deployed_state.write_record(
        p["state_dir"], p["desired"], observed, p["facts"], p["ports"]
    )
    return {"path": path}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {
                "type": "str",
                "choices": ["check", "present", "absent", "digest"],
                "default": "check",
            },
            "state_dir": {"type": "path"},
            "service": {"type": "str"},
            "files": {"type": "list", "elements": "str", "default": []},
            "dirs": {"type": "list", "elements": "path", "default": []},
            "desired": {"type": "str"},
            "facts": {"type": "dict", "default": {}},
            "ports": {"type": "list", "elements": "int", "default": []},
            "docker": {"type": "str", "default": "docker"},
            "restart_threshold": {"type": "int", "default": 0},
            "root": {"type": "path"},
            "parts": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
