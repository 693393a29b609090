"""The fleet playbooks stop at once when the inventory gives them no NPU host (issue 24).

Real ansible-playbook runs, no Docker: no -i (ansible.cfg's inventory/sim before make demo), a
mistyped -i path, an inventory whose group is not called ascend_llm and a --limit outside the
fleet each fail in the first play, naming the group and -i, in --check too. Before, deploy.yml and
preflight.yml "succeeded" against zero hosts (rc 0, "Preflight of 0 host(s)"). And preflight.yml
with every host unreachable still prints its table and writes reports/preflight.json with the SSH
error in each row (it used to end before the table: facts were gathered outside the rescue).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from conftest import ANSIBLE_PLAYBOOK, REPO

FLEET_PLAYBOOKS = [
    ("deploy.yml",),
    ("deploy.yml", "--check"),
    ("playbooks/preflight.yml", "--check"),
    ("playbooks/rollout.yml", "--check"),
    ("playbooks/convert.yml", "--check"),
    ("playbooks/undeploy.yml", "--check"),
]


def _play(tmp_path: Path, *args: str, inventory: str | None = None) -> tuple[int, str]:
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_FACT_CACHING": "memory",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
    }
    if inventory is not None:  # what "no -i" reads: ansible.cfg's inventory, here a fresh copy
        env["ANSIBLE_INVENTORY"] = inventory
    cmd = [str(ANSIBLE_PLAYBOOK), *args, "-e", f"ascend_report_dir={tmp_path / 'reports'}"]
    done = subprocess.run(
        cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False
    )
    return done.returncode, done.stdout + done.stderr


def _fresh_sim_inventory(tmp_path: Path) -> str:
    """inventory/sim as a fresh clone has it (no hosts.yml until make demo)."""
    sim = tmp_path / "inventory" / "sim"
    shutil.copytree(REPO / "inventory" / "sim", sim, ignore=shutil.ignore_patterns("hosts.yml"))
    return str(sim)


@pytest.mark.parametrize("args", FLEET_PLAYBOOKS, ids=lambda a: " ".join(a))
def test_no_inventory_fails_naming_the_group_and_dash_i(tmp_path, args):
    rc, out = _play(tmp_path, *args, inventory=_fresh_sim_inventory(tmp_path))
    assert rc != 0, out[-3000:]
    assert "No hosts in group ascend_llm" in out, out[-3000:]
    assert "inventory/sim; it has no hosts (inventory/sim is the simulated fleet: make demo" in out
    assert "Fix: pass your inventory with -i (e.g. -i inventory/production" in out
    assert "Deploy vLLM-Ascend serving" not in out and "Preflight of 0 host" not in out


def test_a_mistyped_dash_i_path_is_named(tmp_path):
    typo = tmp_path / "inventory" / "prodution"
    rc, out = _play(tmp_path, "-i", str(typo), "playbooks/preflight.yml", "--check")
    assert rc != 0
    assert f"Inventory: {typo} ({typo}: no such file or directory); it has no hosts." in out, out


def test_another_group_name_is_named_with_its_hosts(tmp_path):
    inventory = tmp_path / "hosts.yml"
    hosts = {"npu-1": {}, "npu-2": {}}
    inventory.write_text(json.dumps({"all": {"children": {"npu_hosts": {"hosts": hosts}}}}))
    rc, out = _play(tmp_path, "-i", str(inventory), "deploy.yml", "--check")
    assert rc != 0
    assert "its groups with hosts: npu_hosts (2 hosts)" in out, out[-3000:]
    assert "(or make ascend_llm a parent of npu_hosts)" in out


def test_a_limit_outside_the_fleet_is_named(tmp_path):
    inventory = tmp_path / "hosts.yml"
    groups = {"ascend_llm": {"hosts": {"npu-1": {}}}, "other": {"hosts": {"web-1": {}}}}
    inventory.write_text(json.dumps({"all": {"children": groups}}))
    rc, out = _play(tmp_path, "-i", str(inventory), "deploy.yml", "--check", "--limit", "web-1")
    assert rc != 0
    assert "--limit web-1 selects none of the 1 host(s) of group ascend_llm" in out, out[-3000:]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("check", [True, False], ids=["check", "run"])
def test_preflight_with_every_host_unreachable_writes_the_table(tmp_path, check):
    port = _closed_port()
    ssh = {
        "ansible_connection": "ssh",
        "ansible_host": "127.0.0.1",
        "ansible_port": port,
        "ansible_python_interpreter": "/usr/bin/python3",
    }
    hosts = {name: ssh for name in ("gone-a", "gone-b")}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"ascend_llm": {"hosts": hosts}}}}))
    args = ["-i", str(inventory), "playbooks/preflight.yml"] + (["--check"] if check else [])
    rc, out = _play(tmp_path, *args)
    assert rc != 0, out[-3000:]
    rows = json.loads((tmp_path / "reports" / "preflight.json").read_text())
    assert [r["host"] for r in rows] == ["gone-a", "gone-b"]
    for row in rows:
        (problem,) = row["problems"]
        assert f"{row['host']} did not answer (" in problem, problem
        assert "Fix: check that the host is up" in problem
        if shutil.which("ssh"):  # docker/ci-setup.sh installs openssh-client
            assert f"port {port}: Connection refused" in problem, problem
    assert '"Preflight of 2 host(s)"' in out
    assert "Preflight problems on gone-a, gone-b; see the table above." in out
    # One table line per list item, the long SSH error wrapped (no 355-column lines).
    shown = out.split("TASK [Print the table]", 1)[1].split("TASK [", 1)[0]
    table = [line for line in shown.splitlines() if line.startswith('        "')]
    assert any(line.startswith('        "gone-a  -') for line in table), shown
    assert max(len(line) for line in table) < 200, shown


def test_the_copied_example_stops_at_its_placeholder_key_before_any_host(tmp_path):
    """README step 1 without step 3: the example's key is a placeholder that fails loudly."""
    production = tmp_path / "inventory" / "production"
    shutil.copytree(REPO / "inventory" / "production.example", production)
    rc, out = _play(tmp_path, "-i", str(production), "deploy.yml", "--check")
    assert rc != 0
    flat = " ".join(out.split())
    assert "vllm_service_api_key is still the placeholder of inventory/production.example" in flat
    assert "ansible-vault encrypt_string --name vault_vllm_service_api_key 'YOUR-KEY' >" in flat
    assert "did not answer" not in out  # refused in the first play, before any connection
