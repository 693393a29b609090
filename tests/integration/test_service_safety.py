"""vllm_service refuses an open endpoint and env values that would inject lines (issue 11 D).

Each case runs the role's validation and then writes service.env from the role's own template,
as the role does, through ansible-playbook on localhost.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO, run_local_play

pytestmark = pytest.mark.slow

TEMPLATE = REPO / "roles" / "vllm_service" / "templates" / "service.env.j2"


def write_env(tmp_path: Path, **variables) -> tuple[int, str, Path]:
    """Validate, then render service.env with ``variables``; (rc, output, env file)."""
    dest = tmp_path / "service.env"
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "vllm_service_name": "qwen3",
                "vllm_service_plan": {"env": {"HCCL_OP_EXPANSION_MODE": "AIV"}},
                # the template task runs outside the role: its defaults are not in scope there
                "vllm_service_extra_env": {},
                "vllm_service_api_key": "",
                **variables,
            },
            "tasks": [
                {
                    "name": "validate",
                    "ansible.builtin.include_role": {
                        "name": "vllm_service",
                        "tasks_from": "validate.yml",
                    },
                },
                {
                    "name": "render",
                    "ansible.builtin.template": {
                        "src": str(TEMPLATE),
                        "dest": str(dest),
                        "mode": "0600",
                    },
                },
            ],
        }
    ]
    done = run_local_play(play, tmp_path)
    return done.returncode, done.stdout + done.stderr, dest


def test_newline_in_extra_env_cannot_add_ld_preload(tmp_path):
    rc, out, dest = write_env(
        tmp_path,
        vllm_service_api_key="k",
        vllm_service_extra_env={"MY_FLAG": "1\nLD_PRELOAD=/tmp/evil.so"},
    )
    assert rc != 0
    assert not dest.exists(), dest.read_text()
    assert "vllm_service_extra_env MY_FLAG holds a line break" in out


def test_newline_in_the_api_key_is_refused_without_printing_it(tmp_path):
    rc, out, dest = write_env(tmp_path, vllm_service_api_key="s3cret\nLD_PRELOAD=/tmp/evil.so")
    assert rc != 0 and not dest.exists()
    assert "vllm_service_api_key holds a line break" in out
    assert "s3cret" not in out


@pytest.mark.parametrize(
    "key", ["two words", "ключ-ключ", "tab\tkey"], ids=["space", "cyrillic", "tab"]
)
def test_a_key_that_cannot_be_a_header_is_refused_before_the_replicas_restart(tmp_path, key):
    rc, out, dest = write_env(tmp_path, vllm_service_api_key=key)
    assert rc != 0 and not dest.exists()
    flat = re.sub(r"\s+", " ", out)
    assert "vllm_service_api_key holds a space or a character that is not visible ASCII" in flat
    assert key not in out


def test_bad_variable_name_is_refused(tmp_path):
    rc, out, dest = write_env(
        tmp_path, vllm_service_api_key="k", vllm_service_extra_env={"A=B": "1"}
    )
    assert rc != 0 and not dest.exists()
    assert 'name "A=B" is not an environment variable name' in out


def test_no_key_on_all_interfaces_stops_with_the_vault_fix(tmp_path):
    rc, out, dest = write_env(tmp_path)  # role defaults: 0.0.0.0, no key
    assert rc != 0 and not dest.exists()
    flat = re.sub(r"\s+", " ", out)
    assert "vllm_service_bind_address is 0.0.0.0 and no API key is set" in flat
    assert "ansible-vault encrypt_string --name vault_vllm_service_api_key" in flat
    assert "vllm_service_allow_unauthenticated: true" in flat


@pytest.mark.parametrize(
    "variables",
    [
        {"vllm_service_bind_address": "127.0.0.1"},
        {"vllm_service_allow_unauthenticated": True},
        {
            "vllm_service_api_key": "k-123",
            "vllm_service_extra_env": {"VLLM_LOGGING_LEVEL": "DEBUG"},
        },
    ],
    ids=["loopback", "allowed", "key"],
)
def test_accepted_settings_write_one_line_per_variable(tmp_path, variables):
    rc, out, dest = write_env(tmp_path, **variables)
    assert rc == 0, out[-3000:]
    lines = [ln for ln in dest.read_text().splitlines() if ln and not ln.startswith("#")]
    expected = {"HCCL_OP_EXPANSION_MODE=AIV"}
    if "vllm_service_api_key" in variables:
        expected |= {"VLLM_API_KEY=k-123", "VLLM_LOGGING_LEVEL=DEBUG"}
    assert set(lines) == expected
    if variables.get("vllm_service_allow_unauthenticated"):
        assert "serving on 0.0.0.0 without an API key" in out


def test_zero_for_an_optional_number_is_refused_naming_it(tmp_path):
    """One convention for "not set": null (the default) is unset, 0 is refused before any change."""
    rc, out, dest = write_env(
        tmp_path, vllm_service_api_key="k", vllm_service_max_model_len=0, vllm_service_tp="0"
    )
    assert rc != 0 and not dest.exists()
    flat = re.sub(r"\s+", " ", out)
    assert "vllm_service_max_model_len is 0: it must be >= 1" in flat
    assert "vllm_service_tp is 0: it must be >= 1" in flat
    assert "Fix: leave it unset (null, the default: the planner picks the size)" in flat
    # Unset (null) and positive values pass.
    rc, out, dest = write_env(
        tmp_path, vllm_service_api_key="k", vllm_service_max_model_len=None, vllm_service_tp=2
    )
    assert rc == 0, out[-3000:]


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"vllm_service_port": 70000}, "vllm_service_port is 70000: it must be from 1 to 65535"),
        ({"vllm_service_port": "80a"}, "vllm_service_port is 80a: it must be a whole number"),
        ({"vllm_service_health_timeout": -5}, "vllm_service_health_timeout is -5: it must be >="),
    ],
    ids=["port-too-big", "port-not-a-number", "negative-health-timeout"],
)
def test_a_port_or_health_bound_out_of_range_is_refused_naming_the_variable(
    tmp_path, variables, named
):
    rc, out, dest = write_env(tmp_path, vllm_service_api_key="k", **variables)
    assert rc != 0 and not dest.exists()
    flat = re.sub(r"\s+", " ", out)
    assert named in flat and "Fix: " in flat, flat[-2000:]
    assert "--port" not in flat  # the variable, not the planner's CLI flag


@pytest.mark.parametrize("key", ["change-me", "sim-demo-key", "EMPTY"])
def test_a_well_known_key_on_all_interfaces_is_refused(tmp_path, key):
    rc, out, dest = write_env(tmp_path, vllm_service_api_key=key)
    assert rc != 0 and not dest.exists()
    flat = re.sub(r"\s+", " ", out)
    assert "vllm_service_api_key is a key everyone knows" in flat
    assert "would listen on 0.0.0.0" in flat
    assert (
        "Fix: ansible-vault encrypt_string --name vault_vllm_service_api_key 'YOUR-KEY' > "
        "inventory/production/group_vars/ascend_llm/vault.yml" in flat
    )


@pytest.mark.parametrize(
    "variables",
    [{"vllm_service_bind_address": "127.0.0.1"}, {"vllm_service_allow_well_known_key": True}],
    ids=["loopback", "allowed"],
)
def test_a_well_known_key_is_accepted_on_loopback_or_when_allowed(tmp_path, variables):
    rc, out, dest = write_env(tmp_path, vllm_service_api_key="change-me", **variables)
    assert rc == 0, out[-3000:]
    assert "VLLM_API_KEY=change-me" in dest.read_text()


def test_the_example_placeholder_is_refused_even_on_loopback(tmp_path):
    rc, out, dest = write_env(
        tmp_path,
        vllm_service_api_key="REPLACE-WITH-A-VAULTED-KEY",
        vllm_service_bind_address="127.0.0.1",
        vllm_service_allow_well_known_key=True,
    )
    assert rc != 0 and not dest.exists()
    flat = re.sub(r"\s+", " ", out)
    assert "vllm_service_api_key is still the placeholder of inventory/production.example" in flat


def _foreign(tmp_path, found: list[dict]) -> tuple[int, str]:
    tmp_path.mkdir()
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {"vllm_service_name": "qwen3", "vllm_service_foreign_found": found},
            "tasks": [
                {
                    "name": "foreign",
                    "ansible.builtin.include_role": {
                        "name": "vllm_service",
                        "tasks_from": "foreign.yml",
                    },
                }
            ],
        }
    ]
    done = run_local_play(play, tmp_path)
    return done.returncode, re.sub(r"\s+", " ", done.stdout + done.stderr)


def test_another_service_in_the_way_is_named_and_kill_foreign_is_not_offered(tmp_path):
    """issue 22: the fix offered vllm_service_kill_foreign, which would end the other service."""
    other = {"pid": 41, "name": "python3", "user": "root", "container_name": "chat-0"}
    other |= {"other_service": "chat", "npus": [{"npu": 2, "memory_mb": 30000}]}
    rc, out = _foreign(tmp_path / "a", [other])
    assert rc != 0
    assert "PID 41 (python3, user root, container chat-0, service chat of this bundle)" in out
    assert "chat is another service of this bundle on this host" in out
    assert "undeploy chat first" in out and "vllm_service_kill_foreign never ends it" in out
    assert "set vllm_service_kill_foreign: true" not in out
    stranger = {"pid": 42, "name": "python3", "user": "bob", "port": 8000}
    rc, out = _foreign(tmp_path / "b", [stranger])
    assert rc != 0 and "set vllm_service_kill_foreign: true to end them" in out
