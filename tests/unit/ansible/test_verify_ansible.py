"""The ascend_verify and ascend_diagnose modules through ansible-playbook (bare /usr/bin/python3).

The target interpreter has no ascend_deploy installed: the modules only work because AnsiballZ
ships src/ascend_deploy as module_utils, and the rules / suite arrive as content.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

from ascend_sim.vllm_emulator.sandbox import (
    Emulator,
    emulator_env,
    make_root,
    write_row,
    write_tiny_random_model,
)

PLAYBOOK_BIN = REPO / ".venv" / "bin" / "ansible-playbook"
BARE_PYTHON = "/usr/bin/python3"
DATA = REPO / "src" / "ascend_deploy" / "data"
LOGS = REPO / "tests" / "data" / "logs"

pytestmark = pytest.mark.skipif(
    not PLAYBOOK_BIN.exists() or not Path(BARE_PYTHON).exists(),
    reason="needs the project venv's ansible-playbook and /usr/bin/python3",
)


def run_play(tmp_path: Path, tasks: str) -> tuple[int, str]:
    play = tmp_path / "play.yml"
    play.write_text(f"- hosts: localhost\n  gather_facts: false\n  tasks:\n{tasks}")
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_FACT_CACHING": "memory",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-local"),
        "ANSIBLE_REMOTE_TEMP": str(tmp_path / "ansible-remote"),
    }
    proc = subprocess.run(
        [str(PLAYBOOK_BIN), "-i", "localhost,", "-c", "local", "-e",
         f"ansible_python_interpreter={BARE_PYTHON}", str(play)],
        capture_output=True, text=True, timeout=600, env=env, cwd=REPO,
    )  # fmt: skip
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
            f"""    - name: Verify
      ascend_verify:
        url: "{emu.url}"
        api_key: k1
        suite: {json.dumps(suite)}
        concurrency: 2
        burst_tokens: 4
        max_len_probe: false
        report_dir: "{rep}"
      register: v
    - name: Diagnose
      ascend_diagnose:
        paths: ["{rep}/verify.json", "{LOGS}/pitfall5_2_example.log", "{tmp_path}/missing.log"]
        rules: "{{{{ lookup('ansible.builtin.file', '{DATA}/diagnose_rules.json') | from_json }}}}"
        dest: "{rep}/diagnosis.json"
      register: d
    - name: Save
      ansible.builtin.copy:
        content: "{{{{ {{'v': v, 'd': d}} | to_json }}}}"
        dest: "{out}"
""",
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
    rc, log = run_play(
        tmp_path,
        f"""    - name: Diagnose
      ascend_diagnose:
        paths: ["{LOGS}/pitfall5_2_example.log"]
        rules: {{"rules": [{{"id": "x", "title": "t", "patterns": ["("],
                 "explanation": "e", "fix": "f"}}]}}
""",
    )
    assert rc == 2
    assert "rules: rules[0]: invalid regex" in log
