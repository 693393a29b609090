"""host_bootstrap on the converged bare host, case by case (runs after test_bootstrap.py).

Each case plants a daemon.json (and what else it needs) on the host, runs the role through
``ansible-playbook case.yml`` with the scenario's inventory and checks the result fact and the host.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
INVENTORY = os.environ.get("MOLECULE_INVENTORY_FILE", "")
OUT = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent")) / "results"
ADR_DIR = "/usr/local/Ascend/Ascend-Docker-Runtime"
# A container that keeps running: an image of /bin/sleep and the libraries ldd names.
SLEEP_IMAGE = r"""
set -e
d=$(mktemp -d)
mkdir -p "$d/bin"
cp /usr/bin/sleep "$d/bin/"
for lib in $(ldd /usr/bin/sleep | grep -o '/[^ ]*'); do
    mkdir -p "$d$(dirname "$lib")"
    cp "$lib" "$d$lib"
done
tar -C "$d" -c . | docker import - bootstrap-sleep:1 >/dev/null
rm -rf "$d"
"""


def run_role(name: str, *extra: str) -> dict:
    if not INVENTORY:
        pytest.fail("MOLECULE_INVENTORY_FILE is not set: run through molecule verify")
    out = OUT / f"case-{name}.json"
    out.unlink(missing_ok=True)
    cmd = [
        str(REPO / ".venv" / "bin" / "ansible-playbook"),
        "-i",
        INVENTORY,
        str(REPO / "molecule" / "bootstrap" / "case.yml"),
        "-e",
        f"bootstrap_case_out={out}",
        *extra,
    ]
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0"}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    assert out.is_file(), (
        f"case {name} left no result (rc {done.returncode}):\n{done.stdout[-3000:]}"
    )
    return json.loads(out.read_text())


def plant(host, config: object) -> None:
    """Write daemon.json on the host (a str as it is, anything else as JSON)."""
    text = config if isinstance(config, str) else json.dumps(config)
    assert host.run(f"printf '%s' {shlex.quote(text)} > /etc/docker/daemon.json").rc == 0


def daemon_json(host) -> str:
    return host.file("/etc/docker/daemon.json").content_string


def test_a_daemon_json_that_is_not_an_object_fails_and_is_kept(host):
    plant(host, '["not", "an", "object"]')
    case = run_role("not-object")
    assert case["failed"] is True
    assert "/etc/docker/daemon.json" in case["msg"]
    assert "cannot be read as a JSON object" in case["msg"]
    assert json.loads(daemon_json(host)) == ["not", "an", "object"]


def test_a_running_container_holds_the_restart_back(host):
    plant(host, {"log-driver": "json-file", "log-opts": {"max-size": "50m", "max-file": "5"}})
    assert host.run("docker info").rc == 0
    build = host.run(SLEEP_IMAGE)
    assert build.rc == 0, build.stderr
    started = host.run("docker run -d --name bootstrap-busy bootstrap-sleep:1 /bin/sleep 600")
    assert started.rc == 0, started.stderr
    pid_before = host.check_output("cat /var/run/docker.pid")
    try:
        case = run_role("busy", "-e", "host_bootstrap_log_max_size=20m")
        assert case["failed"] is False, case
        rotation = case["result"]["log_rotation"]
        assert rotation["changed"] is True
        assert rotation["restart"] == "pending"
        assert "1 running containers" in rotation["message"]
        assert "restart docker" in rotation["message"]
        assert json.loads(daemon_json(host))["log-opts"]["max-size"] == "20m"
        # dockerd was not restarted and the container still runs.
        assert host.check_output("cat /var/run/docker.pid") == pid_before
        running = host.check_output("docker inspect -f '{{.State.Running}}' bootstrap-busy")
        assert running == "true"
    finally:
        host.run("docker rm -f bootstrap-busy")


def test_ascend_docker_runtime_is_detected_and_another_drivers_options_replaced(host):
    wrapper = f"{ADR_DIR}/ascend-docker-runtime"
    assert (
        host.run(
            f"mkdir -p {ADR_DIR} && printf '#!/bin/sh\\nexec runc \"$@\"\\n' > {wrapper}"
            f" && chmod 755 {wrapper}"
        ).rc
        == 0
    )
    plant(
        host,
        {
            "log-driver": "local",
            "log-opts": {"compress": "false"},
            "runtimes": {"ascend": {"path": wrapper, "runtimeArgs": []}},
            "default-runtime": "runc",
        },
    )
    case = run_role("ascend-runtime")
    assert case["failed"] is False, case
    result = case["result"]
    config = json.loads(daemon_json(host))
    # The other driver's option is gone (it is not valid for json-file); the runtime is kept.
    assert config["log-driver"] == "json-file"
    assert config["log-opts"] == {"max-size": "50m", "max-file": "5"}
    assert config["runtimes"]["ascend"]["path"] == wrapper
    assert config["default-runtime"] == "runc"
    assert result["log_rotation"]["restart"] == "restarted"
    adr = result["ascend_docker_runtime"]
    assert adr["present"] is True
    assert f"directory {ADR_DIR}" in adr["evidence"]
    assert "/etc/docker/daemon.json runtime ascend" in adr["evidence"]
    assert "docker info runtime ascend" in adr["evidence"]
    assert "does not need it" in adr["message"]
    # The restarted engine knows the runtime.
    deadline = time.monotonic() + 30
    while host.run("docker info").rc != 0 and time.monotonic() < deadline:
        time.sleep(1)
    assert "ascend" in json.loads(host.check_output("docker info --format '{{json .Runtimes}}'"))


def test_the_engine_comes_back_after_a_reboot(host):
    # The bare host's entrypoint plays a sysvinit boot: an installed, enabled /etc/init.d/docker
    # starts again when the host (the container) restarts.
    name = host.backend.get_hostname()
    restarted = subprocess.run(
        ["docker", "restart", "-t", "10", name], capture_output=True, text=True, check=False
    )
    assert restarted.returncode == 0, restarted.stderr
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready = subprocess.run(
            ["docker", "exec", name, "test", "-e", "/run/ascend-sim/ready"], check=False
        )
        if ready.returncode == 0 and host.run("docker info").rc == 0:
            break
        time.sleep(1)
    out = host.check_output("docker info --format '{{.ServerVersion}} {{.LoggingDriver}}'")
    assert out.split()[1] == "json-file"
    logs = subprocess.run(
        ["docker", "logs", "--tail", "5", name], capture_output=True, text=True, check=False
    ).stderr
    assert "init: /etc/init.d/docker started" in logs
