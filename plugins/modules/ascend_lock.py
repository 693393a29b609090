#!/usr/bin/python
"""Ansible module: one deploy run per host at a time (a lock file naming its holder)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_lock
short_description: Take, check and release the per-host deploy lock
description:
  - Thin wrapper over C(ascend_deploy.host.run_lock), the one copy of the rule.
  - C(state=controller) (on the controller, delegated to localhost) returns this controller's host
    name and the PID and start time of the ansible-playbook process running the task.
  - C(state=acquired) (on the host) creates C(path) holding C(holder), waiting up to C(wait)
    seconds while another run holds it; it does not fail when the lock stays held, it returns
    C(acquired=false) and the C(holder) record. C(takeover) replaces the lock of that run id (one
    known to be gone). Check mode takes no lock.
  - C(state=alive) (on the controller) tells whether C(holder) still runs (true, false, or null
    when this controller cannot tell) and words the refusal in C(message).
  - C(state=released) (on the host) removes C(path) when C(holder.run) holds it; never another's.
options:
  state:
    description: What to do.
    type: str
    choices: [controller, acquired, alive, released]
    required: true
  path:
    description: The lock file on the host (C(acquired), C(released)).
    type: path
  holder:
    description: The run's record (run, controller, pid, pid_started, playbook, since); with
      C(alive), the record read from the lock.
    type: dict
  wait:
    description: With C(acquired), seconds to wait while another run holds the lock.
    type: float
    default: 0
  takeover:
    description: With C(acquired), the run id of a holder known to be gone.
    type: str
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Take the deploy lock of this host
  ascend_lock:
    state: acquired
    path: /run/lock/ascend-deploy/deploy.lock
    holder: "{{ ascend_lock_holder }}"
  register: ascend_lock_taken
"""

RETURN = r"""
acquired:
  description: With C(acquired), whether this run holds the lock now.
  returned: state=acquired
  type: bool
holder:
  description: The record of the run that holds the lock (C(acquired) false).
  returned: state=acquired
  type: dict
took_over:
  description: The record of the gone run whose lock was taken over.
  returned: state=acquired
  type: dict
alive:
  description: With C(alive), true, false, or null when this controller cannot tell.
  returned: state=alive
  type: bool
message:
  description: With C(alive), the refusal naming the holder and the fix.
  returned: state=alive
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.errors import (
    AscendDeployError,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.host import (
    run_lock,
)


def run(module: AnsibleModule) -> dict:
    p = module.params
    state = p["state"]
    if state == "controller":
        return {"changed": False, **run_lock.controller()}
    if state == "alive":
        alive = run_lock.holder_alive(p["holder"] or {})
        message = str(
            run_lock.refusal(p["path"] or "the lock", p["holder"] or {}, p["wait"], alive)
        )
        return {"changed": False, "alive": alive, "message": message}
    if not p["path"] or not p["holder"]:
        module.fail_json(msg=f"ascend_lock state={state} needs path and holder")
    if state == "released":
        if module.check_mode:
            return {"changed": False}
        return {"changed": run_lock.release(p["path"], str(p["holder"].get("run", "")))}
    if module.check_mode:
        return {"changed": False, "acquired": True, "took_over": None}
    return run_lock.acquire(p["path"], p["holder"], p["wait"], p["takeover"])


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {
                "type": "str",
                "choices": ["controller", "acquired", "alive", "released"],
                "required": True,
            },
            "path": {"type": "path"},
            "holder": {"type": "dict"},
            "wait": {"type": "float", "default": 0},
            "takeover": {"type": "str"},
        },
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
