"""ascend_runtime_hardware: auto, through ansible-playbook with real npu-smi samples (issue 21 §2).

npu_facts publishes the family the chip names show; every role that takes a hardware input
resolves it the same way from its own defaults and vars: the declared value, else (auto, the
default) ascend_npu.hardware, else a2. A mixed fleet therefore gets each host's own family.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import ANSIBLE_PLAYBOOK, BARE_PYTHON, REPO, SAMPLES, run_local_play

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not ANSIBLE_PLAYBOOK.exists() or not Path(BARE_PYTHON).exists(),
        reason="needs the project venv's ansible-playbook and /usr/bin/python3",
    ),
]

ROLES = {
    "ascend_runtime": "ascend_runtime_hardware",
    "npu_preflight": "npu_preflight_hardware",
    "model_weights": "model_weights_hardware",
    "vllm_service": "vllm_service_hardware",
}


def fake_npu_smi(tmp_path: Path, sample: str) -> Path:
    path = tmp_path / "npu-smi"
    path.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "info" ] && [ -z "$2" ]; then /bin/cat "{SAMPLES / sample}"; exit 0; fi\n'
        "echo unsupported >&2; exit 1\n"
    )
    path.chmod(0o755)
    return path


def resolved(tmp_path: Path, sample: str, extra: dict) -> dict:
    """Each role's resolved family after npu_facts read ``sample`` (extra vars: ``extra``)."""
    out = tmp_path / "hw.json"
    tasks: list[dict] = [
        {
            "name": "Read the NPUs",
            "ascend_vllm.serving.npu_facts": {"npu_smi_path": str(fake_npu_smi(tmp_path, sample))},
        }
    ]
    for role in ROLES:
        for part in ("defaults", "vars"):
            tasks.append(
                {
                    "name": f"Load {role} {part}",
                    "ansible.builtin.include_vars": str(REPO / "roles" / role / part / "main.yml"),
                }
            )
    content = "{{ {" + ", ".join(f"'{r}': _{r}_hw" for r in ROLES) + "} | to_json }}"
    tasks.append(
        {
            "name": "Save",
            "ansible.builtin.copy": {"content": content, "dest": str(out)},
        }
    )
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]
    args = ["-e", json.dumps(extra)] if extra else []
    done = run_local_play(
        play, tmp_path, env={"ANSIBLE_NOCOLOR": "1"}, args=args, python=BARE_PYTHON
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize(
    "sample, family",
    [
        ("npu-smi-info_A3_26.0.rc1_wide_trimmed_2.txt", "a3"),
        ("npu-smi-info_310P3_duo_25.2.0_partial_4.txt", "310p"),
        ("npu-smi-info_910B4_32GB_24.1.1_partial_7.txt", "a2"),
        # 910A (Atlas 800 training) is no family of the matrix: a2, and preflight warns and fails
        # it as unsupported (tests/unit/planning/test_preflight.py).
        ("npu-smi-info_910A_8card_1.txt", "a2"),
    ],
)
def test_auto_is_the_family_npu_smi_names(tmp_path, sample, family):
    assert resolved(tmp_path, sample, {}) == dict.fromkeys(ROLES, family)


def test_a_declared_family_is_used_as_declared(tmp_path):
    # preflight then fails the host naming both (test_preflight: declared hardware ... disagrees)
    found = resolved(
        tmp_path, "npu-smi-info_A3_26.0.rc1_wide_trimmed_2.txt", {"ascend_runtime_hardware": "a2"}
    )
    assert found == dict.fromkeys(ROLES, "a2")
    one_role = resolved(
        tmp_path, "npu-smi-info_310P3_duo_25.2.0_partial_4.txt", {"vllm_service_hardware": "a2"}
    )
    assert one_role == {**dict.fromkeys(ROLES, "310p"), "vllm_service": "a2"}


def facts_with_declared(tmp_path: Path, sample: str, declared: str):
    task = {"npu_smi_path": str(fake_npu_smi(tmp_path, sample)), "hardware": declared}
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [{"name": "Read the NPUs", "ascend_vllm.serving.npu_facts": task}],
        }
    ]
    return run_local_play(play, tmp_path, env={"ANSIBLE_NOCOLOR": "1"}, python=BARE_PYTHON)


def test_npu_facts_stops_a_declared_family_the_chips_contradict(tmp_path):
    done = facts_with_declared(tmp_path, "npu-smi-info_A3_26.0.rc1_wide_trimmed_2.txt", "a2")
    out = " ".join(done.stdout.split())
    assert done.returncode != 0, out[-3000:]
    assert "declared hardware a2, but npu-smi shows a3 chips" in out, out[-3000:]
    assert "Fix: set ascend_runtime_hardware: a3 for this host" in out, out[-3000:]
    agrees = facts_with_declared(tmp_path, "npu-smi-info_310P3_duo_25.2.0_partial_4.txt", "310p")
    assert agrees.returncode == 0, agrees.stdout[-3000:]


def test_deploy_checks_the_family_before_host_bootstrap_changes_anything():
    """playbooks/deploy.yml: the family check (npu_facts, declared value) precedes bootstrap."""
    play = yaml.safe_load((REPO / "playbooks" / "deploy.yml").read_text())
    (deploy,) = [p for p in play if p.get("name") == "Deploy vLLM-Ascend serving"]
    (block,) = [t for t in deploy["tasks"] if t.get("name") == "Deploy this host"]
    names = [t["name"] for t in block["block"]]
    check = names.index("Check the declared hardware family against npu-smi (before any change)")
    assert check < names.index(
        "Host bootstrap (Docker engine, SDK, log rotation; host_bootstrap_result)"
    )
    task = block["block"][check]["ascend_vllm.serving.npu_facts"]
    assert task["hardware"] == "{{ ascend_runtime_hardware | default('auto') }}"
