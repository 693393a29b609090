"""tools/demo_usage.py on the inventory ``python -m ascend_sim.fleet up`` writes (issue 24).

The fleet lists each host under the fleet group with its variables and again, empty, under its
preset's group; demo_usage merged the groups itself and the empty entry won, so ``make demo``
printed nothing. Now Ansible's own merge (ansible-inventory) is read. The printed commands are
run against a deployed host in tests/integration/test_collection.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO

from ascend_sim.fleet import HostStatus, write_inventory


def _inventory(tmp_path: Path) -> Path:
    inv = tmp_path / "sim"
    shutil.copytree(REPO / "inventory" / "sim", inv, ignore=shutil.ignore_patterns("hosts.yml"))
    ports = {8000 + i: 40000 + i for i in range(8)}
    host = HostStatus("demo-0", "a2-910b3-8x64g", "running", True, ports)
    write_inventory(inv / "hosts.yml", [host], "ascend_llm")  # as the Makefile's demo target
    return inv


def _usage(inventory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "tools" / "demo_usage.py"), "--inventory", str(inventory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_demo_host_gets_curl_verify_and_client_commands(tmp_path):
    done = _usage(_inventory(tmp_path))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    base = "http://127.0.0.1:40000"
    assert lines[0].startswith(f"# demo-0: replica 0 (port 8000 on the host) is {base}")
    assert lines[1] == f"curl -s -H 'Authorization: Bearer sim-demo-key' {base}/v1/models"
    assert '-d \'{"model": "qwen3-tiny"' in lines[2] and "/v1/chat/completions" in lines[2]
    assert lines[3] == f"VLLM_API_KEY=sim-demo-key .venv/bin/ascend-deploy verify --url {base}"
    assert lines[4].startswith(".venv/bin/python -c 'import openai; ")
    assert lines[5] == (
        "# the other replicas' ports on 127.0.0.1: 8001 -> 40001, 8002 -> 40002, "
        "8003 -> 40003, 8004 -> 40004, 8005 -> 40005, 8006 -> 40006, 8007 -> 40007"
    )


def test_no_published_port_says_so(tmp_path):
    inv = tmp_path / "sim"
    shutil.copytree(REPO / "inventory" / "sim", inv, ignore=shutil.ignore_patterns("hosts.yml"))
    done = _usage(inv)
    assert done.returncode == 1 and "was `make demo` run?" in done.stderr
