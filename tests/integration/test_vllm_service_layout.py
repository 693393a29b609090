"""vllm_service starts the plan's replica specs as they are (issue 14 §1).

Plans for real NPU ids go through the role's own container definitions
(roles/vllm_service/vars/main.yml) with ansible-playbook on localhost: names, ports, NPUs, device
files and ASCEND_RT_VISIBLE_DEVICES are the plan's; the role computes none of them again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ANSIBLE_PLAYBOOK, REPO, run_local_play

from ascend_deploy.planning.plan import make_plan

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="needs the venv's ansible-playbook"),
]
CONTROL = ["/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]


def definitions(tmp_path: Path, plan: dict) -> dict:
    """The role's ``_vllm_service_definitions`` for ``plan`` (as tasks/plan.yml sets it)."""
    out = tmp_path / "definitions.json"
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars_files": [str(REPO / "roles/vllm_service/vars/main.yml")],
            "vars": {
                "vllm_service_name": "qwen3",
                "vllm_service_image": "quay.io/ascend/vllm-ascend:v0.23.0",
                "vllm_service_config_dir": str(tmp_path / "etc"),
                "vllm_service_model_dir": plan["model_dir"],
                "vllm_service_serve_dir": "",
                "vllm_service_plan": plan,
                "vllm_service_replicas": plan["replica_launch"],
            },
            "tasks": [
                {
                    "name": "Write the definitions",
                    "ansible.builtin.copy": {
                        "content": "{{ _vllm_service_definitions | to_json }}",
                        "dest": str(out),
                        "mode": "0600",
                    },
                }
            ],
        }
    ]
    done = run_local_play(play, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(out.read_text())


def test_containers_get_the_planned_npus_devices_and_visible_ids(tmp_path, qwen3_checkpoints):
    plan = make_plan(
        qwen3_checkpoints["4b-bf16"], hbm_total_mb=65536, npus=[2, 5, 7, 3], tp=2, service="qwen3"
    )
    defs = definitions(tmp_path, plan)
    reps = defs["replicas"]
    assert [r["name"] for r in reps] == ["qwen3-0", "qwen3-1"]
    assert [r["port"] for r in reps] == [8000, 8001]
    assert [r["npus"] for r in reps] == [[2, 5], [7, 3]]
    assert reps[0]["devices"] == ["/dev/davinci2", "/dev/davinci5", *CONTROL]
    assert reps[1]["devices"] == ["/dev/davinci7", "/dev/davinci3", *CONTROL]
    assert [r["env"]["ASCEND_RT_VISIBLE_DEVICES"] for r in reps] == ["0,1", "0,1"]
    assert [r["labels"]["ascend-deploy.npus"] for r in reps] == ["2,5", "7,3"]  # the host's ids
    # per replica: its HCCL port range; the shared env goes to service.env, not here
    assert [set(r["env"]) for r in reps] == [{"ASCEND_RT_VISIBLE_DEVICES", "HCCL_IF_BASE_PORT"}] * 2
    assert reps[0]["env"]["HCCL_IF_BASE_PORT"] != reps[1]["env"]["HCCL_IF_BASE_PORT"]
    assert [r["command"] for r in reps] == [s["argv"] for s in plan["replica_launch"]]
