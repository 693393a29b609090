"""Verify molecule/default: one replica per NPU of a simulated 8 x 910B3 host, served in BF16.

Runs as molecule's testinfra verifier, or by hand:
``pytest --hosts=ansible://ascend_llm --ansible-inventory=$MOLECULE_INVENTORY_FILE \
molecule/default/tests``.
The answer is fetched from the controller through the port the simulated host publishes on
127.0.0.1 (never the container's address).
"""

from __future__ import annotations

import json
import subprocess
import urllib.request

from ascend_sim.scenario_outputs import auth_headers

SERVICE = "qwen3"
NPUS = 8
CONTROL_DEVICES = {"/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"}
DRIVER_MOUNTS = {
    "/usr/local/dcmi": "/usr/local/dcmi",
    "/usr/local/bin/npu-smi": "/usr/local/bin/npu-smi",
    "/usr/local/Ascend/driver/lib64": "/usr/local/Ascend/driver/lib64",
    "/usr/local/Ascend/driver/version.info": "/usr/local/Ascend/driver/version.info",
    "/etc/ascend_install.info": "/etc/ascend_install.info",
}


def inspect(host, name: str) -> dict:
    return json.loads(host.check_output(f"docker inspect {name}"))[0]


def env_of(container: dict) -> dict:
    return dict(e.split("=", 1) for e in container["Config"]["Env"])


def test_one_replica_per_npu_with_exactly_its_device(host):
    for i in range(NPUS):
        c = inspect(host, f"{SERVICE}-{i}")
        assert c["State"]["Running"], c["State"]
        devices = {d["PathOnHost"] for d in c["HostConfig"]["Devices"]}
        assert devices == {f"/dev/davinci{i}"} | CONTROL_DEVICES
        assert c["HostConfig"]["Privileged"] is False
        # one chip mounted: the runtime numbers it 0 inside the container (docs/device-numbering.md)
        assert env_of(c)["ASCEND_RT_VISIBLE_DEVICES"] == "0"
        assert c["Config"]["Labels"]["ascend-deploy.npus"] == str(i)  # the host's id
        argv = c["Config"]["Cmd"]
        assert argv[argv.index("--port") + 1] == str(8000 + i)


def test_documented_mounts_and_bf16_model_read_only(host):
    c = inspect(host, f"{SERVICE}-0")
    mounts = {m["Source"].rstrip("/"): m for m in c["Mounts"]}
    for src, dst in DRIVER_MOUNTS.items():
        assert mounts[src]["Destination"].rstrip("/") == dst
    assert mounts["/usr/local/dcmi"]["RW"] is True
    assert mounts["/usr/local/Ascend/driver/lib64"]["RW"] is False
    model = [m for m in mounts.values() if m["Source"].endswith("-bf16")]
    assert len(model) == 1 and model[0]["RW"] is False
    argv = c["Config"]["Cmd"]
    assert argv[2] == model[0]["Source"], "vLLM must serve the converted BF16 copy"
    assert "--quantization" not in argv


def test_environment_and_allocator(host):
    c = inspect(host, f"{SERVICE}-0")
    env = env_of(c)
    # vllm-ascend docs/source/tutorials/Qwen3-Dense.md env; AIV only matters with TP > 1.
    assert env["TASK_QUEUE_ENABLE"] == "1"
    assert "HCCL_OP_EXPANSION_MODE" not in env or env["HCCL_OP_EXPANSION_MODE"] == "AIV"
    # vllm-ascend >= v0.14.0rc1 sets expandable_segments itself (platform.py); it logs it.
    logs = host.check_output(f"docker logs {SERVICE}-0 2>&1")
    assert "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True" in logs
    assert "VLLM_API_KEY" not in " ".join(c["Config"]["Cmd"])


def test_env_file_and_definitions_are_private(host):
    for name in ("service.env", "containers.json"):
        f = host.file(f"/etc/ascend-deploy/{SERVICE}/{name}")
        assert f.exists and f.mode == 0o600 and f.user == "root"
    assert host.file(f"/etc/ascend-deploy/{SERVICE}").mode == 0o700
    assert host.file(f"/etc/ascend-deploy/{SERVICE}/last-good/containers.json").exists


def test_converted_model_is_bf16(host):
    path = "/srv/ascend-deploy/models/qwen3-tiny-fp8-bf16/config.json"
    cfg = json.loads(host.file(path).content_string)
    assert "quantization_config" not in cfg


def test_served_answer_through_the_published_port(host):
    name = host.backend.get_hostname()
    port = subprocess.run(
        ["docker", "port", name, "8000/tcp"], capture_output=True, text=True, check=True
    ).stdout.split()[0]
    assert port.startswith("127.0.0.1:")
    body = json.dumps(
        {
            "model": "qwen3-tiny",
            "messages": [{"role": "user", "content": "Hello"}],
            "max_tokens": 16,
            "temperature": 0,
        }
    ).encode()
    req = urllib.request.Request(
        f"http://{port}/v1/chat/completions",
        data=body,
        headers=auth_headers(),
    )
    with urllib.request.urlopen(req, timeout=120) as resp:
        answer = json.loads(resp.read())
    assert answer["model"] == "qwen3-tiny"
    assert answer["choices"][0]["message"]["content"]
    assert answer["usage"]["completion_tokens"] >= 1
