"""Own versus foreign on a simulated host: deploy.yml and playbooks/undeploy.yml (issue 11 E, F).

One simulated host with 3 x 910B3, NPU 2 in Warning health, and the default service name
``vllm``. Another team runs, before anything of ours: a container named ``vllm`` (no bundle label)
and a host process ``/usr/local/bin/vllm serve /models/other-team``, both holding NPU 2 memory and
a port of the undeploy's range. Ownership is decided by the bundle's container label, so:

1. deploy.yml serves on NPUs 0 and 1, says why NPU 2 is left out, and leaves both foreign
   processes running;
2. ``ascend-deploy procs``/``preflight --service vllm`` on the host call the replicas ours and
   never suggest ending them;
3. with ``vllm_service_kill_foreign: true`` a foreign process on our NPU 1 is ended and reported
   with PID, command, owner, container and memory; the other two still run;
4. undeploy.yml (check mode changes nothing) removes our replicas and config only.
"""

from __future__ import annotations

import json
import os
import re
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
PREFIX = "own-undeploy"
HOST = f"{PREFIX}-0"
IMAGE = "quay.io/ascend/vllm-ascend:v0.23.0"
# Another team's server: registers NPU memory with the simulator (as a serving process does)
# and answers HTTP on --port. Installed as /usr/local/bin/vllm and /opt/other-team/vllm.
OTHER_TEAM = """#!/usr/bin/python3
import http.server, sys
sys.path.insert(0, "/opt/ascend-sim/src")
from ascend_sim.npu_registry import register
args = sys.argv[1:]
port, npu = int(args[args.index("--port") + 1]), int(args[args.index("--npu") + 1])
register("/usr/local/dcmi/.ascend-sim/procs", npu, 0, "python3", 2048)
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"other-team")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("0.0.0.0", port), Handler).serve_forever()
"""


def sh(*argv: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, timeout=timeout)


def on_host(script: str, check: bool = True) -> str:
    return sh("docker", "exec", HOST, "sh", "-c", script, check=check).stdout.strip()


def playbook(inventory: Path, tmp: Path, name: str, *args: str) -> tuple[int, str]:
    """ansible-playbook with the simulated fleet's group vars, limited to our host."""
    cmd = [
        str(BIN / "ansible-playbook"),
        "-i",
        str(REPO / "inventory" / "sim"),
        "-i",
        str(inventory),
    ]
    cmd += [*args, "--limit", f"{HOST},localhost", "-e", "vllm_service_name=vllm"]
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0"}
    done = subprocess.run(
        cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    (tmp / f"{name}.log").write_text(done.stdout + done.stderr)
    return done.returncode, done.stdout


def answers(port: int) -> bool:
    code = (
        f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{port}/', timeout=5)"
        ".read().decode())"
    )
    return on_host(f'python3 -c "{code}"', check=False) == "other-team"


def containers() -> dict[str, str]:
    out = on_host("docker ps -a --format '{{.Names}} {{.State}}'")
    return dict(line.split(" ", 1) for line in out.splitlines() if line)


def pid_of(pattern: str) -> int | None:
    # pgrep run directly (not through sh, whose command line would hold the pattern too)
    out = sh("docker", "exec", HOST, "pgrep", "-f", pattern, check=False).stdout
    pids = [int(p) for p in out.split()]
    return pids[0] if pids else None


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    if sh("docker", "image", "inspect", "ascend-sim/host:latest", IMAGE, check=False).returncode:
        pytest.fail("needs Docker with ascend-sim/host and the emulator images (make images)")
    tmp = tmp_path_factory.mktemp("undeploy")
    state = load_preset("a2-910b3-8x64g")
    state["preset"] = "own-undeploy-3card"
    state["card"]["count"] = 3
    state["card"]["npu_ids"] = [0, 1, 2]
    state["health"] = {"2": "Warning"}
    (tmp / "state.json").write_text(json.dumps(state))
    inventory = tmp / "hosts.yml"
    model = subprocess.run(
        [str(BIN / "ansible-playbook"), str(REPO / "playbooks" / "sim_model.yml")],
        cwd=REPO,
        env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert model.returncode == 0, model.stdout[-2000:]
    fleet.down(PREFIX)  # a leftover of an interrupted run
    try:
        fleet.up(
            [f"{HOST}={tmp / 'state.json'}"],
            PREFIX,
            images=[IMAGE],
            ports="8000-8001",
            inventory=inventory,
        )
        script = tmp / "other-team-vllm"
        script.write_text(OTHER_TEAM)
        sh("docker", "exec", HOST, "mkdir", "-p", "/opt/other-team")
        for dest in ("/usr/local/bin/vllm", "/opt/other-team/vllm"):
            sh("docker", "cp", str(script), f"{HOST}:{dest}")
            sh("docker", "exec", HOST, "chmod", "755", dest)
        # Foreign 1: a container named exactly like the default service, no bundle label.
        on_host(
            "docker run -d --name vllm --network host -v /opt/other-team:/opt/other-team:ro "
            "-v /usr/local/dcmi:/usr/local/dcmi -v /opt/ascend-sim/src:/opt/ascend-sim/src:ro "
            f"{IMAGE} python3 /opt/other-team/vllm serve /models/other-team --port 8010 --npu 2"
        )
        # Foreign 2: another team's `vllm serve` directly on the host.
        sh(
            "docker",
            "exec",
            "-d",
            HOST,
            "/usr/local/bin/vllm",
            "serve",
            "/models/other-team",
            "--port",
            "8005",
            "--npu",
            "2",
        )
        deadline = time.monotonic() + 60
        while not (answers(8010) and answers(8005)):
            assert time.monotonic() < deadline, "the foreign servers did not start"
            time.sleep(1)
        yield inventory, tmp
    finally:
        fleet.down(PREFIX, inventory)


def test_deploy_undeploy_leave_foreign_processes_alone(host):
    inventory, tmp = host
    team_pid = pid_of("/usr/local/bin/vllm serve /models/other-team")
    assert team_pid

    # 1. deploy (default service name vllm): NPUs 0 and 1; NPU 2 (Warning) is left out, said so
    rc, out = playbook(
        inventory,
        tmp,
        "deploy",
        str(REPO / "deploy.yml"),
        "-e",
        "ascend_canary=false",
        "-e",
        f"ascend_report_dir={tmp / 'reports'}",
    )
    assert rc == 0, out[-4000:]
    text = flat(out)
    assert "NPU 2 left out: health Warning is not in vllm_service_healthy_states" in text
    assert (
        "add Warning to vllm_service_healthy_states, or list the NPUs in vllm_service_npus" in text
    )
    (row,) = json.loads((tmp / "reports" / "deploy-summary.json").read_text())
    assert row["status"] == "deployed"
    assert any(w.startswith("NPU 2 left out: health Warning") for w in row["warnings"]), row
    on = containers()
    assert on["vllm-0"] == on["vllm-1"] == "running" and "vllm-2" not in on
    assert on["vllm"] == "running", "the foreign container named vllm was removed"
    assert pid_of("/usr/local/bin/vllm serve /models/other-team") == team_pid
    assert answers(8010) and answers(8005)

    # 2. the CLI on the host: our replicas are ours; never a hint to end them
    sh("docker", "cp", str(REPO / "src" / "ascend_deploy"), f"{HOST}:/tmp/own-src/")
    cli = "cd /tmp && PYTHONPATH=/tmp/own-src python3 -m ascend_deploy.cli"
    procs = json.loads(on_host(f"{cli} procs --service vllm --port 8000 --json", check=False))
    (listener,) = procs["listeners"]
    assert listener["managed"] and listener["container_name"] == "vllm-0"
    holders = {h["pid"]: h for h in procs["npu_holders"]}
    assert holders[team_pid]["managed"] is False
    assert {h["container_name"] for h in holders.values() if h["managed"]} == {"vllm-0", "vllm-1"}
    pre = json.loads(on_host(f"{cli} preflight --service vllm --port 8000 --json", check=False))
    port = next(c for c in pre["checks"] if c["id"] == "port.free")
    assert port["status"] == "ok" and "vllm-0" in port["evidence"]
    assert "--kill " not in port["fix"] and not port["fix"].endswith("--kill")

    # 3. a foreign process on our NPU 1 with vllm_service_kill_foreign: ended and reported
    sh(
        "docker",
        "exec",
        "-d",
        HOST,
        "/opt/other-team/vllm",
        "serve",
        "/models/batch",
        "--port",
        "9100",
        "--npu",
        "1",
    )
    deadline = time.monotonic() + 30
    while not answers(9100):
        assert time.monotonic() < deadline, "the batch job did not start"
        time.sleep(1)
    batch_pid = pid_of("/models/batch")
    rc, out = playbook(
        inventory,
        tmp,
        "kill-foreign",
        str(REPO / "deploy.yml"),
        "-e",
        "ascend_canary=false",
        "-e",
        f"ascend_report_dir={tmp / 'reports'}",
        "-e",
        "ascend_fast_path=false",
        "-e",
        "vllm_service_kill_foreign=true",
    )
    assert rc == 0, out[-4000:]
    text = flat(out)
    assert "vllm_service_kill_foreign ended 1 foreign process(es)" in text
    assert (
        f"ended foreign PID {batch_pid} (terminated SIGTERM): /usr/bin/python3 "
        "/opt/other-team/vllm serve /models/batch --port 9100 --npu 1; user root, container none, "
        "memory 2048 MB, held NPU 1 2048 MB"
    ) in text
    assert pid_of("/models/batch") is None
    (row,) = json.loads((tmp / "reports" / "deploy-summary.json").read_text())
    assert any(w.startswith(f"ended foreign PID {batch_pid} ") for w in row["warnings"]), row
    assert containers()["vllm"] == "running" and answers(8010) and answers(8005)

    # 4. undeploy: check mode changes nothing; then only our replicas and config go, and the
    # host leaves the fleet's Prometheus targets (another host's target stays)
    targets = tmp / "reports" / "prometheus" / "ascend-vllm.json"
    groups = json.loads(targets.read_text())
    assert {g["labels"]["host"] for g in groups} == {HOST}, groups
    other = {"targets": ["10.0.0.9:8000"], "labels": {**groups[0]["labels"], "host": "other-host"}}
    targets.write_text(json.dumps([*groups, other]))
    undeploy = str(REPO / "playbooks" / "undeploy.yml")
    reports = ("-e", f"ascend_report_dir={tmp / 'reports'}")
    rc, out = playbook(inventory, tmp, "undeploy-check", undeploy, "--check", *reports)
    assert rc == 0, out[-4000:]
    assert containers()["vllm-0"] == "running"
    assert len(json.loads(targets.read_text())) == len(groups) + 1
    rc, out = playbook(inventory, tmp, "undeploy", undeploy, *reports)
    assert rc == 0, out[-4000:]
    assert json.loads(targets.read_text()) == [other]
    on = containers()
    assert "vllm-0" not in on and "vllm-1" not in on
    assert on["vllm"] == "running"
    assert pid_of("/usr/local/bin/vllm serve /models/other-team") == team_pid
    assert answers(8010) and answers(8005)
    text = flat(out)
    assert "Left running (not ours): " in text
    assert f"{team_pid} /usr/bin/python3 /usr/local/bin/vllm serve /models/other-team" in text
    assert on_host("test -e /etc/ascend-deploy/vllm && echo present || echo gone") == "gone"
    assert on_host("ls /srv/ascend-deploy/models")  # weights are kept
