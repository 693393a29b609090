"""Two operators and a Ctrl-C on one simulated host: nothing verified is lost (issue 22 §2, §3).

One simulated host with two 910B3 chips. In order, each step a real ``ansible-playbook deploy.yml``:

1. two runs at the same time (``vllm_service_max_num_seqs`` 16 and 8): one is refused naming the
   other's run, the host ends in the other's verified state and its fast-path record matches the
   running containers;
2. a definition that is healthy but fails every request, interrupted with SIGINT (to the process
   group, as Ctrl-C in a terminal) while verification runs: last-good/ still holds the verified
   definition (it used to move when /health answered, and the rerun "rolled back" to the bad
   definition itself); the rerun with the same inputs fails verification and rolls back to it;
3. a definition that never becomes healthy, interrupted during its health wait, then again during
   the rollback its rerun starts: the intent record names the interrupted phase, and the last rerun
   finishes the rollback; the verified definition serves and the record is gone.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ascend_sim import fleet
from ascend_sim.state import load_preset

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PREFIX = "interrupted"
HOST = f"{PREFIX}-0"
IMAGE = "quay.io/ascend/vllm-ascend:v0.23.0"
STATE = "/etc/ascend-deploy/qwen3"
BAD_REQUESTS = '{"vllm_service_extra_env": {"ASCEND_SIM_TEST_CRASH_ON_REQUEST": "1"}}'
# Replicas that keep running and never answer /health (the emulator's test-only hang switch), so
# the health wait lasts its whole (short) timeout: a Ctrl-C 3 s into it always lands inside it (a
# replica that exits at once let a fast host reach the rollback before the signal).
NEVER_HEALTHY = json.dumps(
    {
        "vllm_service_extra_env": {"ASCEND_SIM_TEST_HANG_AT_LOAD": "1"},
        "vllm_service_health_timeout": 40,
    }
)


def sh(*argv: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, timeout=timeout)


def on_host(script: str, check: bool = True) -> str:
    return sh("docker", "exec", HOST, "sh", "-c", script, check=check).stdout.strip()


def command(inventory: Path, tmp: Path, *args: str) -> list[str]:
    cmd = [str(BIN / "ansible-playbook"), "-i", str(REPO / "inventory" / "sim")]
    cmd += ["-i", str(inventory), str(REPO / "deploy.yml"), "--limit", f"{HOST},localhost"]
    return [*cmd, "-e", "ascend_canary=false", "-e", f"ascend_report_dir={tmp / 'reports'}", *args]


ENV = {
    **os.environ,
    "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
    "ANSIBLE_FORCE_COLOR": "0",
    "PYTHONUNBUFFERED": "1",
}


def deploy(inventory: Path, tmp: Path, name: str, *args: str) -> tuple[int, str]:
    done = subprocess.run(
        command(inventory, tmp, *args),
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    out = done.stdout + done.stderr
    (tmp / f"{name}.log").write_text(out)
    return done.returncode, re.sub(r"\s+", " ", out)


def interrupt(
    inventory: Path, tmp: Path, name: str, task: str, *args: str, settle: float = 3
) -> str:
    """Run deploy.yml and send SIGINT to its process group once ``task`` has started."""
    log = tmp / f"{name}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            command(inventory, tmp, *args),
            cwd=REPO,
            env=ENV,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 600
        while f"TASK [{task}" not in log.read_text():
            assert proc.poll() is None, f"{name} ended before {task!r}:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"{name}: {task!r} never started"
            time.sleep(0.5)
        time.sleep(settle)  # inside the task, as an operator's Ctrl-C would be
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    return log.read_text()


def read(path: str) -> str:
    return on_host(f"cat {path} 2>/dev/null || true")


def running_specs() -> dict[str, str]:
    names = on_host("docker ps --filter label=ascend-deploy.service=qwen3 --format '{{.Names}}'")
    specs = {}
    for name in names.split():
        labels = json.loads(on_host(f"docker inspect -f '{{{{json .Config.Labels}}}}' {name}"))
        specs[name] = labels["ascend-deploy.spec"]
    return specs


def definition_specs(text: str) -> dict[str, str]:
    return {r["name"]: r["labels"]["ascend-deploy.spec"] for r in json.loads(text)["replicas"]}


def healthy(port: int) -> bool:
    code = (
        "import urllib.request as u; "
        f"print(u.urlopen('http://127.0.0.1:{port}/health', timeout=5).status)"
    )
    return on_host(f'python3 -c "{code}" 2>/dev/null', check=False) == "200"


def wait_serving(specs: dict[str, str], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while running_specs() != specs or not all(healthy(port) for port in (8000, 8001)):
        assert time.monotonic() < deadline, f"not serving {specs}: {running_specs()}"
        time.sleep(2)


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    if sh("docker", "image", "inspect", "ascend-sim/host:latest", IMAGE, check=False).returncode:
        pytest.fail("needs Docker with ascend-sim/host and the emulator images (make images)")
    tmp = tmp_path_factory.mktemp("interrupted")
    state = load_preset("a2-910b3-8x64g")
    state["preset"] = "own-interrupted-2card"
    state["card"]["count"] = 2
    state["card"]["npu_ids"] = [0, 1]
    (tmp / "state.json").write_text(json.dumps(state))
    inventory = tmp / "hosts.yml"
    model = subprocess.run(
        [str(BIN / "ansible-playbook"), str(REPO / "playbooks" / "sim_model.yml")],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    assert model.returncode == 0, model.stdout[-2000:]
    fleet.down(PREFIX)
    try:
        fleet.up(
            [f"{HOST}={tmp / 'state.json'}"],
            PREFIX,
            images=[IMAGE],
            ports="8000-8001",
            inventory=inventory,
        )
        yield inventory, tmp
    finally:
        fleet.down(PREFIX, inventory)


def test_concurrent_runs_then_interruptions_keep_a_verified_definition(host):
    inventory, tmp = host

    # 1. Two operators at once: one run holds the host's lock, the other is refused naming it.
    runs = {}
    for seqs in (16, 8):
        runs[seqs] = subprocess.Popen(
            command(inventory, tmp, "-e", f"vllm_service_max_num_seqs={seqs}"),
            cwd=REPO,
            env=ENV,
            stdout=(tmp / f"concurrent-{seqs}.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        time.sleep(1)
    codes = {seqs: proc.wait(timeout=900) for seqs, proc in runs.items()}
    logs = {s: re.sub(r"\s+", " ", (tmp / f"concurrent-{s}.log").read_text()) for s in runs}
    assert sorted(codes.values())[0] == 0 and sorted(codes.values())[1] != 0, codes
    winner = next(s for s, rc in codes.items() if rc == 0)
    loser = next(s for s, rc in codes.items() if rc != 0)
    assert "holds this host" in logs[loser] or "deploy lock" in logs[loser], logs[loser][-3000:]
    argv = on_host("docker inspect -f '{{json .Config.Cmd}}' qwen3-0")
    assert f'"--max-num-seqs","{winner}"' in argv.replace(" ", ""), argv
    record = json.loads(read(f"{STATE}/deployed.json"))
    recorded = {c["name"]: c["spec"] for c in record["observed"]["containers"]}
    good = read(f"{STATE}/last-good/containers.json")
    assert recorded == running_specs() == definition_specs(good)
    assert read(f"{STATE}/transition.json") == ""

    # 2. Ctrl-C during the verification of a definition that is healthy but fails every request.
    bad = ["-e", f"vllm_service_max_num_seqs={winner}", "-e", BAD_REQUESTS]
    interrupt(
        inventory, tmp, "verify-sigint", "ascend_vllm.serving.deploy_verify : Verify every", *bad
    )
    # last-good/ did not move to the unverified definition; the intent record says where it stood
    assert read(f"{STATE}/last-good/containers.json") == good
    assert json.loads(read(f"{STATE}/transition.json"))["phase"] == "verifying"
    rc, out = deploy(inventory, tmp, "verify-rerun", *bad)
    assert rc != 0
    assert "an earlier run" in out and "was interrupted while verifying" in out
    wait_serving(definition_specs(good))
    assert read(f"{STATE}/last-good/containers.json") == good
    assert read(f"{STATE}/candidate/containers.json") == ""
    assert read(f"{STATE}/transition.json") == ""

    # 3. A definition that never becomes healthy: Ctrl-C in its health wait, then in the rollback.
    interrupt(
        inventory,
        tmp,
        "health-sigint",
        "ascend_vllm.serving.vllm_service : Wait until every",
        "-e",
        NEVER_HEALTHY,
    )
    assert json.loads(read(f"{STATE}/transition.json"))["phase"] == "replacing"
    assert read(f"{STATE}/last-good/containers.json") == good
    interrupt(
        inventory,
        tmp,
        "rollback-sigint",
        # The rollback records its phase just before this task; the kept definition needs removal,
        # eight starts and a health wait after it, so a Ctrl-C here always lands inside the rollback
        # (in "Start the kept replicas" a fast host finished the rollback before the signal).
        "ascend_vllm.serving.vllm_service : Remove the replicas of the failed",
        "-e",
        NEVER_HEALTHY,
        settle=1,
    )
    assert json.loads(read(f"{STATE}/transition.json"))["phase"] == "rolling-back"
    rc, out = deploy(inventory, tmp, "rollback-rerun", "-e", NEVER_HEALTHY)
    assert rc != 0
    assert "was interrupted while rolling-back" in out
    assert "Rolled back to the last good definition" in out
    wait_serving(definition_specs(good))
    assert read(f"{STATE}/last-good/containers.json") == good
    assert read(f"{STATE}/transition.json") == ""
