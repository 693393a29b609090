"""Every role variable is checked in deploy.yml's first play, before any host is touched (issue 22).

Real ansible-playbook runs of deploy.yml (no Docker) against a host whose SSH port is closed: the
first play needs no connection, so a value it refuses fails the run before "Check that the host
answers", and a value it accepts gets the run that far (the host then fails as UNREACHABLE). Each
message names the Ansible variable, its value and the fix. Before, a huge
vllm_service_max_num_seqs reached the planner and was blamed on HBM after runtime and weights ran,
bad deploy_verify_* numbers failed in verification after the service restarted, and an API key
holding '{{' failed as a template error naming no variable.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from pathlib import Path

import pytest
from conftest import ANSIBLE_PLAYBOOK, REPO

REACHED_HOST = "TASK [Check that the host answers]"
VAULT_PASSWORD = "test-vault-password"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(
    tmp_path: Path, *args: str, group_vars: dict | None = None, hosts: dict | None = None
) -> tuple[int, str]:
    """deploy.yml on gone hosts (``hosts``: name -> host vars; default one, gone-host)."""
    connection = {
        "ansible_connection": "ssh",
        "ansible_host": "127.0.0.1",
        "ansible_port": _closed_port(),
        "ansible_python_interpreter": "/usr/bin/python3",
    }
    listed = {name: {**connection, **own} for name, own in (hosts or {"gone-host": {}}).items()}
    group = {"vllm_service_api_key": "test-key", "vllm_service_name": "chat", **(group_vars or {})}
    inventory = {"all": {"children": {"ascend_llm": {"hosts": listed, "vars": group}}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    (tmp_path / "vault-pass").write_text(VAULT_PASSWORD + "\n")
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0"}
    cmd = [str(ANSIBLE_PLAYBOOK), "-i", str(tmp_path / "hosts.yml"), str(REPO / "deploy.yml")]
    cmd += ["--vault-password-file", str(tmp_path / "vault-pass")]
    cmd += ["-e", f"ascend_report_dir={tmp_path / 'reports'}", *args]
    done = subprocess.run(
        cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    return done.returncode, done.stdout + done.stderr


def _flat(out: str) -> str:
    return re.sub(r"\s+", " ", out)


def _vaulted(tmp_path: Path, name: str, secret: str) -> Path:
    """A vars file holding ``name`` as a real ansible-vault encrypted string."""
    (tmp_path / "vault-pass").write_text(VAULT_PASSWORD + "\n")
    done = subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK.parent / "ansible-vault"),
            "encrypt_string",
            "--vault-password-file",
            str(tmp_path / "vault-pass"),
            "--name",
            name,
            secret,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "$ANSIBLE_VAULT;1.1;AES256" in done.stdout and secret not in done.stdout
    path = tmp_path / "vault.yml"
    path.write_text(done.stdout)
    return path


def test_a_huge_max_num_seqs_is_refused_naming_the_variable_not_the_hbm(tmp_path):
    rc, out = _run(tmp_path, "-e", "vllm_service_max_num_seqs=100000000")
    flat = _flat(out)
    assert rc != 0
    assert "gone-host: vllm_service_max_num_seqs is 100000000: it must be from 1 to 65536" in flat
    assert "Fix: leave it unset (the plan sizes it from the KV cache, at most 256)" in flat
    assert "HBM" not in flat and "activation" not in flat
    assert REACHED_HOST not in out, flat[-3000:]


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("deploy_verify_concurrency=-3", "deploy_verify_concurrency is -3: it must be >= 1"),
        ("deploy_verify_full_replicas=0", "deploy_verify_full_replicas is 0: it must be >= 1"),
        ("deploy_verify_timeout=soon", "deploy_verify_timeout is soon: it must be a whole number"),
        ("deploy_verify_burst_tokens=0", "deploy_verify_burst_tokens is 0: it must be >= 1"),
        (
            "deploy_verify_when_unchanged=always",
            "deploy_verify_when_unchanged is always: it must be one of smoke, full",
        ),
        ("vllm_service_health_timeout=-5", "vllm_service_health_timeout is -5: it must be >= 1"),
        (
            "vllm_service_gpu_memory_utilization=1.5",
            "vllm_service_gpu_memory_utilization is 1.5: it must be more than 0 and at most 1",
        ),
        (
            "model_weights_download_throttle=0",
            "model_weights_download_throttle is 0: it must be >= 1",
        ),
        ("host_bootstrap_engine_wait=-1", "host_bootstrap_engine_wait is -1: it must be >= 1"),
    ],
    ids=lambda v: v.split("=")[0] if "=" in v else None,
)
def test_bad_numbers_of_any_role_stop_the_first_play(tmp_path, setting, expected):
    rc, out = _run(tmp_path, "-e", setting)
    flat = _flat(out)
    assert rc != 0
    assert f"gone-host: {expected}" in flat, flat[-3000:]
    assert "Fix: " in flat
    assert REACHED_HOST not in out


def test_every_problem_of_a_host_is_named_at_once_from_the_inventory(tmp_path):
    rc, out = _run(
        tmp_path,
        group_vars={"deploy_verify_request_timeout": 0, "vllm_service_npus": [0, "one"]},
    )
    flat = _flat(out)
    assert rc != 0
    assert "deploy_verify_request_timeout is 0: it must be >= 1" in flat
    assert "vllm_service_npus is [0, 'one']: it must be a list whose every element" in flat
    assert REACHED_HOST not in out


def test_valid_values_from_the_command_line_pass_the_first_play(tmp_path):
    _rc, out = _run(
        tmp_path,
        "-e",
        "vllm_service_max_num_seqs=65536",
        "-e",
        "deploy_verify_full_replicas=2",
        "-e",
        "vllm_service_gpu_memory_utilization=0.85",
        "-e",
        "vllm_service_enforce_eager=yes",
    )
    assert REACHED_HOST in out, _flat(out)[-3000:]  # then UNREACHABLE: the host is gone
    assert "it must be" not in out


def test_a_vaulted_key_holding_braces_is_data(tmp_path):
    vault = _vaulted(tmp_path, "vault_vllm_service_api_key", "ab{{cd}}ef{%x")
    _rc, out = _run(
        tmp_path,
        "-e",
        f"@{vault}",
        group_vars={"vllm_service_api_key": "{{ vault_vllm_service_api_key }}"},
    )
    assert REACHED_HOST in out, _flat(out)[-3000:]
    assert "Syntax error" not in out and "is read as a template" not in out
    assert "ab{{cd}}ef" not in out


def test_a_vaulted_key_with_a_space_and_braces_is_refused_by_the_key_rule(tmp_path):
    vault = _vaulted(tmp_path, "vllm_service_api_key", "two {{ words")
    rc, out = _run(tmp_path, "-e", f"@{vault}")
    flat = _flat(out)
    assert rc != 0
    assert "gone-host: vllm_service_api_key holds a space or a character that is not" in flat
    assert "Syntax error" not in flat and "two {{ words" not in flat
    assert REACHED_HOST not in out


def test_a_key_holding_braces_given_with_dash_e_is_named_not_a_template_error(tmp_path):
    rc, out = _run(tmp_path, "-e", json.dumps({"vllm_service_api_key": "s3cr{{t"}))
    flat = _flat(out)
    assert rc != 0
    assert "gone-host: vllm_service_api_key holds '{{' or '{%' and is read as a template" in flat
    assert "Fix: if it is data (a key), vault it" in flat
    assert "s3cr{{t" not in flat
    assert REACHED_HOST not in out


def test_each_host_is_checked_with_its_own_values(tmp_path):
    rc, out = _run(
        tmp_path,
        "-e",
        "ascend_canary=false",
        hosts={"host-a": {}, "host-b": {"deploy_verify_concurrency": 0}},
    )
    flat = _flat(out)
    assert rc != 0
    assert "host-b: deploy_verify_concurrency is 0: it must be >= 1" in flat
    assert "host-a: deploy_verify_concurrency" not in flat
    # host-a goes on to the deploy play (then fails as unreachable); host-b never gets there
    answers = out[out.index(REACHED_HOST) :]
    assert "[host-a]" in answers and "[host-b]" not in answers, flat[-3000:]
