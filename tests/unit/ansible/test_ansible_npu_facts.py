"""The npu_facts module through ansible-playbook: the library ships as module_utils.

The target interpreter is /usr/bin/python3, which does not have ascend_deploy installed,
so the module only works if AnsiballZ packs src/ascend_deploy (ansible.cfg module_utils).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import ANSIBLE_PLAYBOOK, BARE_PYTHON, SAMPLES, run_local_play

INFO = SAMPLES / "npu-smi-info_A3_26.0.rc1_wide_trimmed_2.txt"
MAP = SAMPLES / "npu-smi-info-m_910B_4.txt"

pytestmark = pytest.mark.skipif(
    not ANSIBLE_PLAYBOOK.exists() or not Path(BARE_PYTHON).exists(),
    reason="needs the project venv's ansible-playbook and /usr/bin/python3",
)


def bare_python_lacks_library() -> bool:
    probe = subprocess.run(
        [BARE_PYTHON, "-c", "import ascend_deploy"], capture_output=True, check=False,
        env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    return probe.returncode != 0


def playbook(tmp_path: Path, module_args: dict, check: bool = False) -> tuple[int, dict, str]:
    """Run one npu_facts task on localhost; return rc, the registered result and output."""
    out = tmp_path / "result.json"
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Gather NPU facts",
                    "ascend_vllm.serving.npu_facts": module_args,
                    "register": "npu",
                    "ignore_errors": True,
                },
                {
                    "name": "Save the result",
                    "ansible.builtin.copy": {"content": "{{ npu | to_json }}", "dest": str(out)},
                    "check_mode": False,
                },
            ],
        }
    ]
    done = run_local_play(
        play,
        tmp_path,
        env={"ANSIBLE_NOCOLOR": "1"},
        args=["--check"] if check else [],
        python=BARE_PYTHON,
    )
    result = json.loads(out.read_text()) if out.exists() else {}
    return done.returncode, result, done.stdout + done.stderr


def fake_npu_smi(tmp_path: Path) -> Path:
    path = tmp_path / "npu-smi"
    path.write_text(
        "#!/bin/sh\n"
        f'if [ "$1 $2" = "info -m" ]; then /bin/cat "{MAP}"; exit 0; fi\n'
        f'if [ "$1" = "info" ]; then /bin/cat "{INFO}"; exit 0; fi\n'
        "echo unsupported >&2; exit 1\n"
    )
    path.chmod(0o755)
    return path


@pytest.mark.slow
def test_npu_facts_on_bare_python(tmp_path):
    assert bare_python_lacks_library(), "the test needs a Python without ascend_deploy"
    binary = fake_npu_smi(tmp_path)
    rc, result, output = playbook(tmp_path, {"npu_smi_path": str(binary)})
    assert rc == 0, output
    assert result.get("failed") is not True, output
    assert result["changed"] is False
    facts = result["ansible_facts"]["ascend_npu"]
    info = facts["info"]
    assert info["kind"] == "info" and info["version"] == "26.0.rc1"
    assert [(c["npu"], c["chip"], c["phy_id"]) for c in info["chips"]] == [
        (0, 0, 0), (0, 1, 1), (5, 0, 10), (5, 1, 11)]  # fmt: skip
    assert info["chips"][0]["hbm_used_mb"] == 59807
    assert info["processes"][1] == {
        "npu": 0, "chip": 1, "pid": 1777209, "name": "VLLMWorker_PP", "memory_mb": 56684,
    }  # fmt: skip
    assert facts["map"]["rows"][1] == {"npu": 0, "chip": 1, "logic_id": None, "chip_name": "Mcu"}
    assert facts["hardware"] == "a3"  # "Ascend910" chips with Phy-IDs: the roles' auto


@pytest.mark.slow
def test_npu_facts_check_mode_and_missing_binary(tmp_path):
    binary = fake_npu_smi(tmp_path)
    rc, result, output = playbook(tmp_path, {"npu_smi_path": str(binary)}, check=True)
    assert rc == 0, output
    assert result["changed"] is False and "skipped" not in result, output
    assert result["ansible_facts"]["ascend_npu"]["info"]["chips"][3]["bus_id"] == "0000:8B:00.0"
    # the text as read, for reports (deploy_verify's failure report saves it)
    assert "0000:8B:00.0" in result["ansible_facts"]["ascend_npu"]["text"]

    missing = tmp_path / "no" / "npu-smi"
    rc, result, output = playbook(tmp_path, {"npu_smi_path": str(missing)})
    assert result["failed"] is True, output
    assert result["msg"] == (
        f"{missing}: npu-smi not found at this path; the Ascend driver is not installed here "
        "or the path is wrong (in a container, mount /usr/local/bin/npu-smi from the host)"
    )
