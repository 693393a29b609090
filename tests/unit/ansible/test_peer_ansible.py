"""ascend_peer through ansible-playbook on the bare /usr/bin/python3: a detached server
outlives its module call and serves the model to a second task's fetch; a dead peer first in
the list is skipped; stopping it frees the port."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from conftest import ANSIBLE_PLAYBOOK, BARE_PYTHON, DATA, run_local_play

pytestmark = pytest.mark.skipif(
    not ANSIBLE_PLAYBOOK.exists() or not Path(BARE_PYTHON).exists(),
    reason="needs the project venv's ansible-playbook and /usr/bin/python3",
)
TOKEN = "peer-test-token-0123456789"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_fetch_stop(tmp_path):
    model = tmp_path / "qwen3"
    shutil.copytree(DATA / "tiny-qwen3-fp8", model)
    names = sorted(p.name for p in model.iterdir())
    sums = subprocess.run(["sha256sum", *names], cwd=model, capture_output=True, check=True)
    (model / "SHA256SUMS").write_bytes(sums.stdout)
    staging = tmp_path / ".copy.staging"
    staging.mkdir()
    shutil.copy(model / "SHA256SUMS", staging)
    port, state = _closed_port(), str(tmp_path / "peer.json")
    common = {"token": TOKEN, "state_file": state}
    tasks = [
        {"ascend_vllm.serving.ascend_peer": {"path": str(model), "state": "serving",
                                             "bind": "127.0.0.1", "port": port, **common},
         "register": "served"},
        {"ascend_vllm.serving.ascend_peer": {
            "path": str(staging), "state": "fetched", "stall_timeout": 2, **common,
            "peers": [f"http://127.0.0.1:{_closed_port()}", f"http://127.0.0.1:{port}"]},
         "register": "fetched"},
        {"ascend_vllm.serving.ascend_peer": {"state": "stopped", "state_file": state},
         "register": "stopped"},
        {"ansible.builtin.copy": {"dest": str(tmp_path / "out.json"), "mode": "0644",
                                  "content": "{{ {'served': served, 'fetched': fetched,"
                                             " 'stopped': stopped} | to_json }}"}},
    ]  # fmt: skip
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]
    proc = run_local_play(play, tmp_path, python=BARE_PYTHON, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["served"]["port"] == port
    fetched = out["fetched"]
    assert fetched["failed"] == [] and fetched["files"] == len(names)
    assert fetched["from"] == {f"http://127.0.0.1:{port}": len(names)}
    assert len(fetched["errors"]) == (len(names) + 1) // 2  # the dead peer is asked every 2nd file
    for name in names:
        assert (staging / name).read_bytes() == (model / name).read_bytes(), name
    assert out["stopped"]["changed"] is True
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0
