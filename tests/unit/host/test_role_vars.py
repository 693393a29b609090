"""Role variables against their argument spec and value bounds (issue 22 item 5).

The rule (ascend_deploy.host.role_vars) on the roles' real meta/argument_specs.yml and
meta/value_bounds.yml, with values as an operator gives them: -e strings, YAML numbers, lists.
"""

from __future__ import annotations

import pytest
import yaml
from conftest import REPO

from ascend_deploy.errors import InputError
from ascend_deploy.host import role_vars

ROLES = sorted(p.parent.parent.name for p in (REPO / "roles").glob("*/meta/argument_specs.yml"))


def spec(role: str) -> tuple[dict, dict]:
    meta = REPO / "roles" / role / "meta"
    options = yaml.safe_load((meta / "argument_specs.yml").read_text())["argument_specs"]["main"]
    bounds_file = meta / "value_bounds.yml"
    bounds = yaml.safe_load(bounds_file.read_text()) if bounds_file.is_file() else {}
    return options["options"], bounds or {}


@pytest.mark.parametrize("role", ROLES)
def test_every_sidecar_names_options_of_its_spec_with_known_keys(role):
    options, bounds = spec(role)
    role_vars.check_bounds(options, bounds, role)
    for name, entry in bounds.items():
        assert options[name]["type"] in ("int", "float", "list", "str"), name
        if "pattern" not in entry:
            assert {"min", "max", "above"} & set(entry), name


@pytest.mark.parametrize("role", ROLES)
def test_every_number_of_every_role_has_a_range(role):
    """A new int/float option without a bound fails here: add it to meta/value_bounds.yml."""
    options, bounds = spec(role)
    numbers = [n for n, o in options.items() if o.get("type") in ("int", "float")]
    assert [n for n in numbers if n not in bounds] == []


@pytest.mark.parametrize("role", ROLES)
def test_every_default_passes_its_own_spec(role):
    options, bounds = spec(role)
    defaults = {n: o["default"] for n, o in options.items() if "default" in o}
    assert role_vars.check_values(options, bounds, defaults) == []


def test_a_sidecar_entry_for_an_unknown_option_or_key_is_refused():
    options, _ = spec("vllm_service")
    with pytest.raises(InputError, match="vllm_service_prot is not an option"):
        role_vars.check_bounds(options, {"vllm_service_prot": {"min": 1}}, "value_bounds.yml")
    with pytest.raises(InputError, match="vllm_service_port takes only"):
        role_vars.check_bounds(options, {"vllm_service_port": {"minimum": 1}}, "value_bounds.yml")


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (
            {"vllm_service_max_num_seqs": 100000000},
            "vllm_service_max_num_seqs is 100000000: it must be from 1 to 65536",
        ),
        ({"vllm_service_port": "70000"}, "vllm_service_port is 70000: it must be from 1 to 65535"),
        ({"vllm_service_port": "8k"}, "vllm_service_port is 8k: it must be a whole number"),
        ({"vllm_service_port": True}, "vllm_service_port is True: it must be a whole number, not"),
        ({"vllm_service_health_timeout": -5}, "vllm_service_health_timeout is -5: it must be >= 1"),
        (
            {"vllm_service_gpu_memory_utilization": "0"},
            "vllm_service_gpu_memory_utilization is 0: it must be more than 0 and at most 1",
        ),
        (
            {"vllm_service_gpu_memory_utilization": "nan"},
            "vllm_service_gpu_memory_utilization is nan: it must be a finite number",
        ),
        (
            {"vllm_service_npus": "0,-1"},
            "vllm_service_npus is 0,-1: it must be a list whose every element is >= 0 (element 1",
        ),
        (
            {"vllm_service_enforce_eager": "maybe"},
            "vllm_service_enforce_eager is maybe: it must be true or false",
        ),
        (
            {"vllm_service_extra_env": ["A=1"]},
            "vllm_service_extra_env is ['A=1']: it must be a mapping",
        ),
        ({"vllm_service_shm_size": {"a": 1}}, "vllm_service_shm_size is {'a': 1}: it must be a"),
        ({"vllm_service_tp": 0}, "vllm_service_tp is 0: it must be >= 1"),
    ],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else None,
)
def test_bad_vllm_service_values_are_named_with_the_fix(values, expected):
    options, bounds = spec("vllm_service")
    (problem,) = role_vars.check_values(options, bounds, values)
    assert problem.startswith(expected), problem
    assert ". Fix: " in problem


@pytest.mark.parametrize(
    "values",
    [
        {"vllm_service_port": "8000", "vllm_service_max_num_seqs": "65536"},
        {"vllm_service_tp": None, "vllm_service_max_model_len": None},  # null: not set
        {"vllm_service_npus": [0, "3"], "vllm_service_enforce_eager": "yes"},
        {"vllm_service_gpu_memory_utilization": 1, "vllm_service_extra_env": '{"A": "1"}'},
        {"vllm_service_hardware": "a3", "vllm_service_port": 8000.0},
    ],
)
def test_values_ansible_would_accept_pass(values):
    options, bounds = spec("vllm_service")
    assert role_vars.check_values(options, bounds, values) == []


def test_choices_are_checked_on_every_role():
    options, bounds = spec("ascend_runtime")
    (problem,) = role_vars.check_values(options, bounds, {"ascend_runtime_hardware": "910b"})
    assert problem.startswith(
        "ascend_runtime_hardware is 910b: it must be one of auto, a2, a3, a5, 310p (Hardware"
    )
    options, bounds = spec("deploy_verify")
    (problem,) = role_vars.check_values(options, bounds, {"deploy_verify_when_unchanged": "x"})
    assert "it must be one of smoke, full" in problem


def test_a_no_log_value_is_never_quoted():
    options, bounds = spec("vllm_service")
    (problem,) = role_vars.check_values(options, bounds, {"vllm_service_api_key": ["s3cret"]})
    assert problem.startswith("vllm_service_api_key is (hidden: no_log): it must be a string")
    assert "s3cret" not in problem


def test_every_problem_is_reported_and_unknown_names_are_ignored():
    options, bounds = spec("deploy_verify")
    problems = role_vars.check_values(
        options,
        bounds,
        {"deploy_verify_concurrency": -3, "deploy_verify_timeout": "abc", "not_a_role_var": 1},
        " (hint)",
    )
    assert [p.split(":")[0] for p in problems] == [
        "deploy_verify_concurrency is -3",
        "deploy_verify_timeout is abc",
    ]
    assert all(p.endswith(" (hint)") for p in problems)
