#!/usr/bin/python
"""Ansible module: weights from peers (serve a staged model to other hosts, or fetch it)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_peer
short_description: Serve a verified model directory to peer hosts, or fetch one from them
description:
  - Thin wrapper over C(ascend_deploy.model.peer_transfer).
  - C(state=serving) starts a detached HTTP server for the files C(path)'s manifest lists, to
    requests carrying C(token), until C(lifetime) seconds pass or nothing is asked for
    C(idle) seconds; C(state=stopped) ends it.
  - C(state=fetched) downloads every file of the manifest already written in C(path) (a
    staging directory) from C(peers) in turn, each checked against its sha256; it fails only on
    bad arguments and returns the files no peer delivered in C(failed).
options:
  path:
    description: The model directory served (C(serving)) or the staging directory filled (C(fetched)).
    type: path
  state:
    description: C(serving), C(stopped) or C(fetched).
    type: str
    choices: [serving, stopped, fetched]
    required: true
  manifest:
    description: The manifest's name inside C(path).
    type: str
    default: SHA256SUMS
  token:
    description: Shared secret of the rollout (at least 16 characters).
    type: str
    no_log: true
  bind:
    description: Address the server listens on (the host's serving-network address).
    type: str
    default: 0.0.0.0
  port:
    description: Port the server listens on.
    type: int
    default: 8470
  lifetime:
    description: Seconds after which the server stops by itself.
    type: int
    default: 7200
  idle:
    description: Seconds without a request after which the server stops.
    type: int
    default: 900
  state_file:
    description: Where the server's record (PID, port) is kept.
    type: path
    default: /run/ascend-deploy-peer.json
  peers:
    description: Base URLs of the peers (C(http://ADDRESS:PORT)), asked in turn.
    type: list
    elements: str
    default: []
  start:
    description: Index of the first peer to ask (spreads a batch over its peers).
    type: int
    default: 0
  stall_timeout:
    description: Seconds without a byte after which a peer is given up for that file.
    type: int
    default: 30
  timeout:
    description: Seconds the whole fetch may take.
    type: int
    default: 3600
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Serve the staged model to the next batch
  ascend_peer:
    path: /srv/ascend-deploy/models/qwen3
    state: serving
    token: "{{ rollout_token }}"
    bind: 10.0.0.5

- name: Fetch it from the hosts that have it
  ascend_peer:
    path: /srv/ascend-deploy/models/.qwen3.staging
    state: fetched
    token: "{{ rollout_token }}"
    peers: [http://10.0.0.5:8470, http://10.0.0.6:8470]
"""

RETURN = r"""
port:
  description: The port the server listens on (serving).
  returned: with state=serving
  type: int
files:
  description: Files fetched (fetched).
  returned: with state=fetched
  type: int
bytes:
  description: Bytes fetched (fetched).
  returned: with state=fetched
  type: int
from:
  description: Files fetched per peer (fetched).
  returned: with state=fetched
  type: dict
failed:
  description: Files no peer delivered (fetched); the caller stages them from its source.
  returned: with state=fetched
  type: list
errors:
  description: One line per failed attempt (peer, file, cause).
  returned: with state=fetched
  type: list
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.errors import (
    AscendDeployError,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.model import (
    peer_transfer,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path"},
            "state": {
                "type": "str",
                "choices": ["serving", "stopped", "fetched"],
                "required": True,
            },
            "manifest": {"type": "str", "default": "SHA256SUMS"},
            "token": {"type": "str", "no_log": True},
            "bind": {"type": "str", "default": "0.0.0.0"},
            "port": {"type": "int", "default": 8470},
            "lifetime": {"type": "int", "default": 7200},
            "idle": {"type": "int", "default": 900},
            "state_file": {"type": "path", "default": "/run/ascend-deploy-peer.json"},
            "peers": {"type": "list", "elements": "str", "default": []},
            "start": {"type": "int", "default": 0},
            "stall_timeout": {"type": "int", "default": 30},
            "timeout": {"type": "int", "default": 3600},
        },
        required_if=[
            ("state", "serving", ["path", "token"]),
            ("state", "fetched", ["path", "token"]),
        ],
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode:
        module.exit_json(changed=p["state"] != "stopped")
    try:
        if p["state"] == "stopped":
            module.exit_json(changed=peer_transfer.stop_daemon(p["state_file"]))
        if p["state"] == "serving":
            peer_transfer.stop_daemon(p["state_file"])
            record = peer_transfer.start_daemon(
                p["path"], p["manifest"], p["bind"], p["port"], p["token"],
                p["lifetime"], p["idle"], p["state_file"],
            )  # fmt: skip
            module.exit_json(changed=True, port=record["port"], pid=record.get("pid"))
        result = peer_transfer.fetch_model(
            p["path"], p["manifest"], p["peers"], p["token"],
            p["stall_timeout"], p["timeout"], p["start"],
        )  # fmt: skip
    except AscendDeployError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=result["files"] > 0, **result)


if __name__ == "__main__":
    main()
