"""Verify host_bootstrap on the bare simulated host (molecule/bootstrap).

The host started without a Docker engine, Docker SDK or requests; prepare staged the offline
package set on the controller, planted an operator's daemon.json and ran the role with --check
(kept in results/check.json); converge ran the role for real (results/converge.json).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

RESULTS = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent")) / "results"
PACKAGES = ["docker.io", "python3-docker", "python3-requests"]
OPERATOR_DAEMON_JSON = {
    "runtimes": {"sim-runc": {"path": "/usr/sbin/runc"}},
    "log-opts": {"labels": "team"},
}


def _result(name: str) -> dict:
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        pytest.fail(f"{path} is missing: the {name} step did not record its result")
    return json.loads(path.read_text())


def test_check_mode_changed_nothing_and_said_what_it_would_do():
    check = _result("check")
    result, host = check["result"], check["host"]
    assert result["check_mode"] is True
    assert result["would_install"] == PACKAGES
    assert result["installed"] == []
    assert result["changed"] is True
    assert result["log_rotation"]["changed"] is True
    # The host is as prepare left it: no engine, the operator's daemon.json untouched.
    assert host["dockerd"] is None
    assert json.loads(host["daemon_json"]) == OPERATOR_DAEMON_JSON


def test_engine_answers(host):
    out = host.check_output("docker info --format '{{.ServerVersion}} {{.LoggingDriver}}'")
    version, driver = out.split()
    assert version.startswith("20.10")
    assert driver == "json-file"


def test_engine_started_by_the_service_manager_and_enabled(host):
    # Debian's init script started it (its pid file), and the boot links are in place.
    assert host.file("/var/run/docker-ssd.pid").exists
    assert host.run("ls /etc/rc2.d/S*docker").rc == 0


def test_sdk_imports_and_talks_to_the_engine(host):
    out = host.check_output(
        "python3 -c 'import docker, requests; c = docker.from_env();"
        ' print(docker.__version__, requests.__version__, c.ping(), c.info()["ServerVersion"])\''
    )
    docker_version, requests_version, ping, server = out.split()
    assert ping == "True"
    assert server.startswith("20.10")
    assert docker_version and requests_version


def test_daemon_json_has_log_rotation_and_kept_the_operators_keys(host):
    config = json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert config["log-driver"] == "json-file"
    assert config["log-opts"] == {"labels": "team", "max-size": "50m", "max-file": "5"}
    assert config["runtimes"] == OPERATOR_DAEMON_JSON["runtimes"]
    # The engine read it: the operator's runtime is one of its runtimes.
    runtimes = json.loads(host.check_output("docker info --format '{{json .Runtimes}}'"))
    assert "sim-runc" in runtimes


def test_installed_from_the_staged_set_without_a_mirror(host):
    converge = _result("converge")
    assert converge["source"] == "staged"
    assert converge["installed"] == PACKAGES
    for pkg in PACKAGES:
        assert host.package(pkg).is_installed
    # apt never fetched a package index: the packages came from the copied .deb files.
    lists = host.run("ls /var/lib/apt/lists").stdout.split()
    assert not [n for n in lists if n.endswith("_Packages") or n.endswith("InRelease")]
    staged = host.run("ls /var/cache/ascend-deploy/bootstrap-debs").stdout.split()
    assert any(n.startswith("docker.io_") for n in staged)


def test_result_fact(host):
    converge = _result("converge")
    assert converge["engine"]["answers"] is True
    assert converge["engine"]["service_manager"] == "sysvinit"
    assert converge["python_sdk"]["docker"] and converge["python_sdk"]["requests"]
    assert converge["log_rotation"]["restart"] == "restarted"
    assert converge["problems"] == []
    adr = converge["ascend_docker_runtime"]
    assert adr["present"] is False
    assert adr["evidence"] == []
    assert "Ascend Docker Runtime package" in adr["message"]
    assert "does not install it" in adr["message"]
