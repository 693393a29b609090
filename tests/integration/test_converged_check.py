"""playbooks/tasks/converged_check.yml through ansible-playbook on localhost.

The fast path must never fail a deploy: an input that cannot be evaluated before the roles run
(a variable referring to a fact a later role sets) turns it off for the host with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ANSIBLE_PLAYBOOK, REPO, run_local_play

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="needs the venv's ansible-playbook"),
]


def check(tmp_path: Path, input_value: str) -> dict:
    out = tmp_path / "out.json"
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "vllm_service_name": "svc",
                "vllm_service_config_dir": str(tmp_path / "etc"),
                "deploy_verify_docker": "docker",
                "model_weights_source": "path",
                "vllm_service_input": input_value,
            },
            "tasks": [
                {
                    "name": "Inputs as the first play of deploy.yml names them",
                    "ansible.builtin.set_fact": {
                        "ascend_role_var_names": ["vllm_service_input", "vllm_service_name"],
                        "ascend_bundle_digest": "b" * 64,
                    },
                },
                {
                    "name": "The check",
                    "ansible.builtin.include_tasks": str(
                        REPO / "playbooks" / "tasks" / "converged_check.yml"
                    ),
                },
                {
                    "name": "Save",
                    "ansible.builtin.copy": {
                        "content": "{{ {'converged': ascend_converged,"
                        " 'digest': ascend_desired_digest | default(''),"
                        " 'reason': ascend_desired_reason | default('')} | to_json }}",
                        "dest": str(out),
                    },
                },
            ],
        }
    ]
    done = run_local_play(play, tmp_path)
    assert done.returncode == 0 and out.exists(), done.stdout[-3000:] + done.stderr[-2000:]
    return {**json.loads(out.read_text()), "stdout": done.stdout}


def test_inputs_that_evaluate_give_a_digest_and_no_record_means_a_full_run(tmp_path):
    res = check(tmp_path, "plain")
    assert res["converged"] is False and len(res["digest"]) == 64
    assert "full run: no record of a verified deployment" in res["stdout"]
    # The digest follows the inputs.
    other = check(tmp_path, "other")
    assert other["digest"] != res["digest"]
    assert check(tmp_path, "plain")["digest"] == res["digest"]


def test_an_input_that_refers_to_a_later_fact_turns_the_fast_path_off_not_the_deploy(tmp_path):
    res = check(tmp_path, "{{ fact_a_later_role_sets }}")
    assert res["converged"] is False and res["digest"] == ""
    assert "a role variable cannot be evaluated before the roles run" in res["reason"]
    assert "full run: a role variable cannot be evaluated before the roles run" in res["stdout"]
