"""Two TP 2 services on disjoint NPUs of one simulated host (issue 22, "Two services on one host").

One simulated host with four 910B3 chips. Service ``alpha`` serves at TP 2 on NPUs 0-1 (port
8000), service ``beta`` at TP 2 on NPUs 2-3 (port 8100), each a real ``ansible-playbook`` run:

1. deploy alpha; 2. deploy beta: it starts (its HCCL host-NIC ports do not collide with alpha's),
   its preflight does not fail on alpha's NPU memory, alpha keeps serving and keeps its Prometheus
   targets, the summary row names the service;
3. undeploy alpha: beta keeps serving and keeps its targets; alpha's containers, config and
   targets are gone.

Beta runs a release the bundle does not ship (issue 23, "A site matrix"): the fixture's fictional
v0.30.0 row, given by ``ascend_compat_matrix_file`` and pinned, is resolved on the controller and
deployed from its own emulated image (built here from that row's versions).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_sim import fleet, images
from ascend_sim.state import load_preset

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PREFIX = "two-services"
HOST = f"{PREFIX}-0"
IMAGE = "quay.io/ascend/vllm-ascend:v0.23.0"
SITE_MATRIX = REPO / "tests" / "data" / "site-matrix" / "site-v0.30.0.json"
SITE_RELEASE = "v0.30.0"
SITE_IMAGE = f"quay.io/ascend/vllm-ascend:{SITE_RELEASE}"
SERVICES = {"alpha": ([0, 1], 8000), "beta": ([2, 3], 8100)}
KEY = "two-services-key"  # simulated host only
ENV = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0"}


def sh(*argv: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, timeout=timeout)


def on_host(script: str, check: bool = True) -> str:
    return sh("docker", "exec", HOST, "sh", "-c", script, check=check).stdout.strip()


def playbook(inventory: Path, tmp: Path, name: str, play: str, service: str) -> tuple[int, str]:
    npus, port = SERVICES[service]
    extra = {
        "vllm_service_name": service,
        "vllm_service_npus": npus,
        "vllm_service_tp": 2,
        "vllm_service_port": port,
        "vllm_service_api_key": KEY,
        "ascend_canary": False,
        "ascend_report_dir": str(tmp / "reports"),
    }
    if service == "beta":
        extra |= {
            "ascend_compat_matrix_file": str(SITE_MATRIX),
            "ascend_runtime_vllm_ascend": SITE_RELEASE,
        }
    cmd = [str(BIN / "ansible-playbook"), "-i", str(REPO / "inventory" / "sim")]
    cmd += ["-i", str(inventory), play, "--limit", f"{HOST},localhost", "-e", json.dumps(extra)]
    done = subprocess.run(
        cmd, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=900, check=False
    )
    out = done.stdout + done.stderr
    (tmp / f"{name}.log").write_text(out)
    return done.returncode, re.sub(r"\s+", " ", out)


def answer(port: int) -> str:
    """One chat completion from inside the host; the reply's text, or the error."""
    headers = json.dumps({"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
    body = json.dumps(
        {"model": "qwen3-tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    )
    code = (
        "import json, urllib.request as u\n"
        f"r = u.Request('http://127.0.0.1:{port}/v1/chat/completions', data={body!r}.encode(),"
        f" headers={headers})\n"
        "try:\n"
        "    doc = json.load(u.urlopen(r, timeout=30))\n"
        "    print('ok', doc['choices'][0]['message']['content'] is not None)\n"
        "except Exception as e:\n"
        "    print('error', e)\n"
    )
    return sh("docker", "exec", HOST, "python3", "-c", code, check=False).stdout.strip()


def containers() -> dict[str, str]:
    out = on_host("docker ps -a --format '{{.Names}} {{.State}}'")
    return dict(line.split(" ", 1) for line in out.splitlines() if line)


def image_of(container: str) -> str:
    return on_host(f"docker inspect -f '{{{{.Config.Image}}}}' {container}")


def site_image() -> str:
    """The site row's emulated image (its versions as build arguments, as build-images.sh)."""
    (row,) = json.loads(SITE_MATRIX.read_text())["rows"]
    args = {
        "VLLM_ASCEND_VERSION": row["vllm_ascend"].lstrip("v"),
        "VLLM_VERSION": row["vllm"].lstrip("v"),
        "TORCH_VERSION": row["torch"],
        "TORCH_NPU_VERSION": row["torch_npu"],
        "CANN_VERSION": row["cann"],
        "HARDWARE": "a2",
    }
    spec = images.ImageSpec(
        f"vllm-{SITE_RELEASE}", "docker/vllm-ascend/Dockerfile", (SITE_IMAGE,), args
    )
    images.build(spec, images.ensure_base(None))
    return SITE_IMAGE


def env_of(container: str) -> dict[str, str]:
    raw = json.loads(on_host(f"docker inspect -f '{{{{json .Config.Env}}}}' {container}"))
    return dict(item.split("=", 1) for item in raw)


def targets(tmp: Path) -> dict[str, set[str]]:
    groups = json.loads((tmp / "reports" / "prometheus" / "ascend-vllm.json").read_text())
    out: dict[str, set[str]] = {}
    for group in groups:
        out.setdefault(group["labels"]["service"], set()).update(group["targets"])
    return out


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    if sh("docker", "image", "inspect", "ascend-sim/host:latest", IMAGE, check=False).returncode:
        pytest.fail("needs Docker with ascend-sim/host and the emulator images (make images)")
    tmp = tmp_path_factory.mktemp("two-services")
    state = load_preset("a2-910b3-8x64g")
    state["preset"] = "own-two-services-4card"
    state["card"]["count"] = 4
    state["card"]["npu_ids"] = [0, 1, 2, 3]
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
            images=[IMAGE, site_image()],
            ports="8000-8001",
            inventory=inventory,
        )
        yield inventory, tmp
    finally:
        fleet.down(PREFIX, inventory)


def test_two_tp2_services_serve_side_by_side_and_keep_their_targets(host):
    inventory, tmp = host
    deploy, undeploy = str(REPO / "deploy.yml"), str(REPO / "playbooks" / "undeploy.yml")

    # 1. alpha on NPUs 0-1
    rc, out = playbook(inventory, tmp, "deploy-alpha", deploy, "alpha")
    assert rc == 0, out[-4000:]
    assert answer(8000).startswith("ok"), answer(8000)
    assert set(targets(tmp)) == {"alpha"}

    # 2. beta on NPUs 2-3: starts beside alpha; alpha serves on and keeps its targets
    before = targets(tmp)["alpha"]
    rc, out = playbook(inventory, tmp, "deploy-beta", deploy, "beta")
    assert rc == 0, out[-4000:]
    on = containers()
    assert on["alpha-0"] == on["beta-0"] == "running", on
    assert (image_of("alpha-0"), image_of("beta-0")) == (IMAGE, SITE_IMAGE)
    assert f"beta deployed 1 x TP2 8100 {SITE_IMAGE}" in out, out[-4000:]  # the summary row
    ports = {name: int(env_of(f"{name}-0")["HCCL_IF_BASE_PORT"]) for name in SERVICES}
    assert abs(ports["alpha"] - ports["beta"]) >= 512, ports  # TP 2 listens on two 256-port ranges
    assert answer(8000).startswith("ok") and answer(8100).startswith("ok")
    now = targets(tmp)
    assert now["alpha"] == before and now["beta"] and not now["beta"] & before, now
    rows = json.loads((tmp / "reports" / "deploy-summary.json").read_text())
    assert [(r["host"], r["service"], r["status"]) for r in rows] == [(HOST, "beta", "deployed")]

    # 3. undeploy alpha: beta serves on and keeps its targets; alpha's containers and config go
    kept = now["beta"]
    rc, out = playbook(inventory, tmp, "undeploy-alpha", undeploy, "alpha")
    assert rc == 0, out[-4000:]
    on = containers()
    assert "alpha-0" not in on and on["beta-0"] == "running", on
    assert answer(8100).startswith("ok"), answer(8100)
    assert targets(tmp) == {"beta": kept}
    assert on_host("test -e /etc/ascend-deploy/alpha && echo present || echo gone") == "gone"
    assert on_host("test -e /etc/ascend-deploy/beta/last-good && echo present || echo gone") == (
        "present"
    )
