"""playbooks/preflight.yml writes reports/preflight.json, also under --check (issue 11 F).

A host without npu-smi fails its checks; the fleet table and its JSON still come out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ANSIBLE_PLAYBOOK, REPO

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("check", [True, False], ids=["check", "run"])
def test_preflight_json_is_written(tmp_path, check):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        json.dumps(
            {
                "ascend_llm": {
                    "hosts": {
                        "own-local": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": sys.executable,
                        }
                    }
                }
            }
        )
    )
    reports = tmp_path / "reports"
    cmd = [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(REPO / "playbooks" / "preflight.yml")]
    cmd += ["-e", f"ascend_report_dir={reports}"] + (["--check"] if check else [])
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_FACT_CACHING": "memory",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
        # no npu-smi on this machine: the host fails its checks
        "PATH": f"{tmp_path}:{os.path.dirname(sys.executable)}:/usr/bin:/bin",
    }
    done = subprocess.run(
        cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode != 0, done.stdout[-3000:]
    rows = json.loads((reports / "preflight.json").read_text())
    assert [r["host"] for r in rows] == ["own-local"]
    assert "npu-smi: not found" in rows[0]["problems"][0], rows


def _second_service_npu_smi(tmp_path, pid: int):
    """npu-smi printing the real 910B1 sample as service B finds the host: A's process (``pid``)
    holds NPU 0, NPU 7 is idle (its process row dropped, its HBM use lowered)."""
    from conftest import SAMPLES

    text = (SAMPLES / "npu-smi-info_with_processes_910B1_elided_3.txt").read_text()
    lines = [
        line for line in text.splitlines() if not line.startswith(("| 1       0 ", "| 7       0 "))
    ]
    text = "\n".join(lines).replace("2441447", f"{pid:<7}").replace("64114/", " 3197/")
    (tmp_path / "npu-smi-info.txt").write_text(text + "\n")
    fake = tmp_path / "bin" / "npu-smi"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "info" ] && [ -z "$2" ]; then /bin/cat "{tmp_path / "npu-smi-info.txt"}"; '
        "exit 0; fi\necho unsupported >&2; exit 1\n"
    )
    fake.chmod(0o755)
    return fake.parent


def _preflight_rows(tmp_path, *args: str) -> list[dict]:
    inventory = tmp_path / "hosts.yml"
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(json.dumps({"ascend_llm": {"hosts": {"own-local": host}}}))
    reports = tmp_path / "reports"
    cmd = [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(REPO / "playbooks" / "preflight.yml")]
    cmd += ["-e", f"ascend_report_dir={reports}", "-e", "vllm_service_name=qwen3b", *args]
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_FACT_CACHING": "memory",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
        "PATH": f"{tmp_path / 'bin'}:{os.path.dirname(sys.executable)}:/usr/bin:/bin",
    }
    done = subprocess.run(
        cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert (reports / "preflight.json").exists(), done.stdout[-3000:]
    return json.loads((reports / "preflight.json").read_text())


@pytest.mark.parametrize(
    ("npus", "judged"),
    [(None, True), ("[7]", False), ("[0, 7]", True)],
    ids=["every-npu", "disjoint", "overlapping"],
)
def test_preflight_of_a_second_service_judges_only_its_npus(tmp_path, npus, judged):
    """Issue 22 item 4: A's replica holds NPU 0; B on NPU 7 is not failed by A's memory."""
    a_replica = subprocess.Popen(["sleep", "300"])
    try:
        tmp = tmp_path / "run"
        tmp.mkdir()
        _second_service_npu_smi(tmp, a_replica.pid)
        args = ("-e", json.dumps({"vllm_service_npus": json.loads(npus)})) if npus else ()
        (row,) = _preflight_rows(tmp, *args)
    finally:
        a_replica.kill()
        a_replica.wait(timeout=10)
    assert row["host"] == "own-local"
    # free HBM of the NPUs judged: NPU 7 alone has 65536 - 3197 MB; with NPU 0, 65536 - 64293
    assert int(row["free_hbm_mb"]) == (1243 if judged else 62339), row
    held = [p for p in row["problems"] if p.startswith("npu.foreign-memory")]
    if judged:
        assert held and f"pid {a_replica.pid}" in held[0] and "59618 MB" in held[0], row
        assert "vllm_service_npus" in held[0]
    else:
        assert held == [], row
        assert "npu.other-memory" not in " ".join(row["problems"] + row["warnings"])
