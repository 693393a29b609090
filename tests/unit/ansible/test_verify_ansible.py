"""The ascend_verify and ascend_diagnose modules through ansible-playbook (bare /usr/bin/python3).

The target interpreter has no ascend_deploy installed: the modules only work because AnsiballZ
ships src/ascend_deploy as module_utils, and the rules / suite arrive as content.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ANSIBLE_PLAYBOOK, BARE_PYTHON, REPO, run_local_play

from ascend_sim.vllm_emulator.sandbox import (
    Emulator,
    emulator_env,
    make_root,
    write_row,
    write_tiny_random_model,
)

SHIPPED = REPO / "src" / "ascend_deploy" / "data"
LOGS = REPO / "tests" / "data" / "logs"

pytestmark = pytest.mark.skipif(
    not ANSIBLE_PLAYBOOK.exists() or not Path(BARE_PYTHON).exists(),
    reason="needs the project venv's ansible-playbook and /usr/bin/python3",
)


def run_play(tmp_path: Path, tasks: list[dict]) -> tuple[int, str]:
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]
    proc = run_local_play(play, tmp_path, timeout=600, python=BARE_PYTHON)
    return proc.returncode, proc.stdout + proc.stderr


def test_verify_and_diagnose_modules(tmp_path):
    model = write_tiny_random_model(str(tmp_path / "rand"))
    root = make_root(str(tmp_path / "root"))
    env = emulator_env(root, write_row(str(tmp_path / "row.json"), "v0.23.0"))
    suite = [{"id": "any", "prompt": "Hi", "expect_any": ["Paris"], "max_tokens": 4}]
    out = tmp_path / "out.json"
    rep = tmp_path / "rep"
    with Emulator([model, "--host", "127.0.0.1", "--port", "0", "--enforce-eager",
                   "--api-key", "k1"], env).start() as emu:  # fmt: skip
        assert emu.ready, emu.output()
        rc, log = run_play(
            tmp_path,
            [
                {
                    "name": "Verify",
                    "ascend_vllm.serving.ascend_verify": {
                        "url": emu.url,
                        "api_key": "k1",
                        "suite": suite,
                        "concurrency": 2,
                        "burst_tokens": 4,
                        "max_len_probe": False,
                        "report_dir": str(rep),
                    },
                    "register": "v",
                },
                {
                    "name": "Diagnose",
                    "ascend_vllm.serving.ascend_diagnose": {
                        "paths": [
                            f"{rep}/verify.json",
                            f"{LOGS}/pitfall5_2_example.log",
                            f"{tmp_path}/missing.log",
                        ],
                        "rules": "{{ lookup('ansible.builtin.file', '%s') | from_json }}"
                        % (SHIPPED / "diagnose_rules.json"),
                        "dest": f"{rep}/diagnosis.json",
                    },
                    "register": "d",
                },
                {
                    "name": "Save",
                    "ansible.builtin.copy": {
                        "content": "{{ {'v': v, 'd': d} | to_json }}",
                        "dest": str(out),
                    },
                },
            ],
        )
    assert rc == 0, log
    doc = json.loads(out.read_text())
    v, d = doc["v"], doc["d"]
    # The random model does not know Paris: the module reports it and does not fail the task.
    assert v["ok"] is False and not v.get("failed")
    assert {c["name"]: c["status"] for c in v["report"]["checks"]}["readiness"] == "pass"
    assert (rep / "verify.json").is_file() and (rep / "verify.md").is_file()
    assert "k1" not in (rep / "verify.json").read_text()
    assert d["findings"][0]["rule"] == "npu_out_of_memory"
    assert d["missing"] == [f"{tmp_path}/missing.log"]
    assert json.loads((rep / "diagnosis.json").read_text())["findings"]


def test_bad_rules_fail_the_task_with_one_line(tmp_path):
    bad = {"rules": [{"id": "x", "title": "t", "patterns": ["("], "explanation": "e", "fix": "f"}]}
    rc, log = run_play(
        tmp_path,
        [
            {
                "name": "Diagnose",
                "ascend_vllm.serving.ascend_diagnose": {
                    "paths": [f"{LOGS}/pitfall5_2_example.log"],
                    "rules": bad,
                },
            }
        ],
    )
    assert rc == 2
    assert "rules: rules[0]: invalid regex" in log
