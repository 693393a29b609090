"""Hostile service names on a simulated host: undeploy.yml and deploy.yml delete nothing (issue 22).

Directories are planted in the config directory, beside it (/etc/victim) and above it (/etc); then
undeploy.yml runs with an empty service name (``-e vllm_service_name=``, the unset-shell-variable
case that used to delete all of /etc/ascend-deploy), with ``../victim`` (used to delete
/etc/victim) and with ``..``; deploy.yml with the same names. Every run fails naming the variable
and the pattern, and every planted file is still there. An undeploy with a plain name removes its
own directory only.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_sim import fleet

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PREFIX = "hostile-names"
HOST = f"{PREFIX}-0"
PLANTED = (
    "/etc/ascend-deploy/qwen3/service.env",
    "/etc/ascend-deploy/other/last-good/containers.json",
    "/etc/victim/keep",
)


def on_host(script: str) -> str:
    return subprocess.run(
        ["docker", "exec", HOST, "sh", "-c", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout


def playbook(inventory: Path, name: str, *args: str) -> tuple[int, str]:
    cmd = [str(BIN / "ansible-playbook"), "-i", str(REPO / "inventory" / "sim")]
    cmd += ["-i", str(inventory), name, *args, "--limit", f"{HOST},localhost"]
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0"}
    done = subprocess.run(
        cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    return done.returncode, re.sub(r"\s+", " ", done.stdout + done.stderr)


def present() -> list[str]:
    listed = on_host("for f in " + " ".join(PLANTED) + "; do [ -e $f ] && echo $f; done; true")
    return listed.split()


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("names")
    inventory = tmp / "hosts.yml"
    fleet.down(PREFIX)
    try:
        fleet.up(["a2-910b3-8x64g"], PREFIX, images=[], ports="8000-8001", inventory=inventory)
        yield inventory
    finally:
        fleet.down(PREFIX, inventory)


def plant() -> None:
    on_host(
        "for f in "
        + " ".join(PLANTED)
        + "; do mkdir -p $(dirname $f) && echo x > $f; done; chmod 700 /etc/ascend-deploy/qwen3"
    )


@pytest.mark.parametrize("play", ["playbooks/undeploy.yml", "deploy.yml"])
@pytest.mark.parametrize("name", ["", "../victim", "..", "-rf"])
def test_hostile_service_name_deletes_nothing(host, play, name):
    plant()
    rc, out = playbook(host, play, "-e", f"vllm_service_name={name}")
    assert rc != 0, out[-3000:]
    assert "vllm_service_name is" in out and "must match ^[A-Za-z0-9]" in out, out[-3000:]
    assert present() == list(PLANTED)


def test_undeploy_with_a_plain_name_removes_only_its_directory_and_targets(host, tmp_path):
    """Only qwen3's directory and qwen3's Prometheus targets leave; service other keeps both."""
    plant()
    sd = tmp_path / "targets.json"
    groups = [
        {"targets": [f"127.0.0.1:{port}"], "labels": {"host": HOST, "service": svc, "replica": rep}}
        for port, svc, rep in ((8000, "qwen3", "qwen3-0"), (8004, "other", "other-0"))
    ]
    sd.write_text(json.dumps(groups))
    rc, out = playbook(
        host,
        "playbooks/undeploy.yml",
        "-e",
        "vllm_service_name=qwen3",
        "-e",
        f"ascend_prometheus_sd_file={sd}",
    )
    assert rc == 0, out[-3000:]
    assert present() == list(PLANTED[1:])
    assert [g["labels"]["replica"] for g in json.loads(sd.read_text())] == ["other-0"]
