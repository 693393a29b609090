"""The ModelSlim W8A8 checkpoint on molecule-default-a2 (pitfall 2 option 2, pitfall 7).

test_fast_path.py deployed tests/data/tiny-qwen3-w8a8 with deploy.yml (model_weights_convert:
never, NPUs 0 and 1) and verification passed. Here, on the host: it is served as it is with
``--quantization ascend`` (no conversion); the v0.11.0 image (no auto-detection) refuses it
without the flag with the KeyError of the quant-only tensors; the same image given the flag for
the float BF16 model stops before serving with vLLM's "Cannot find the config file for ascend"
(vllm-ascend up to v0.14.0rc1 and v0.16.0rc1 list quant_model_description.json in
get_config_filenames(); https://github.com/vllm-project/vllm-ascend/issues/6790).
"""

from __future__ import annotations

import json
import shlex

SERVICE = "qwen3"
STAGED = "/srv/ascend-deploy/models/qwen3-tiny-w8a8"
FLOAT_MODEL = "/srv/ascend-deploy/models/qwen3-tiny-fp8-bf16"
OLD_IMAGE = "quay.io/ascend/vllm-ascend:v0.11.0"
PROBE = "w8a8-probe"


def inspect(host, name: str) -> dict:
    return json.loads(host.check_output(f"docker inspect {name}"))[0]


def run_argv(
    container: dict, image: str, argv: list[str], npu: int, detach: bool = False, model: str = ""
) -> str:
    """``docker run`` with the replica's devices and mounts, on NPU ``npu``."""
    devices = []
    for d in container["HostConfig"]["Devices"]:
        path = d["PathOnHost"]
        if path.startswith("/dev/davinci") and path[len("/dev/davinci") :].isdigit():
            path = f"/dev/davinci{npu}"
        devices += ["--device", f"{path}:{path}"]
    binds = container["HostConfig"]["Binds"] + ([f"{model}:{model}:ro"] if model else [])
    mounts = [a for b in binds for a in ("-v", b)]
    cmd = ["docker", "run", *(["-d"] if detach else []), "--name", PROBE, "--network", "host"]
    # one chip mounted: inside the container it is device 0 (docs/device-numbering.md)
    cmd += ["-e", "ASCEND_RT_VISIBLE_DEVICES=0", *devices, *mounts, image, *argv]
    return shlex.join(cmd)


def serve_argv(container: dict, model: str, port: int, quantization: bool) -> list[str]:
    argv = list(container["Config"]["Cmd"])
    if "--quantization" in argv:
        i = argv.index("--quantization")
        del argv[i : i + 2]
    argv[2] = model
    argv[argv.index("--port") + 1] = str(port)
    return argv + (["--quantization", "ascend"] if quantization else [])


def test_w8a8_is_served_as_it_is_with_the_ascend_method(host):
    names = host.check_output("docker ps -a --format '{{.Names}}'").split()
    assert sorted(n for n in names if n.startswith(f"{SERVICE}-")) == ["qwen3-0", "qwen3-1"]
    for name in ("qwen3-0", "qwen3-1"):
        argv = inspect(host, name)["Config"]["Cmd"]
        assert argv[2] == STAGED
        assert argv[argv.index("--quantization") + 1] == "ascend"
    assert not host.file(f"{STAGED}-bf16").exists
    assert host.file(f"{STAGED}/quant_model_weight_w8a8.safetensors").exists


def test_release_without_auto_detection_refuses_it_without_the_flag(host):
    replica = inspect(host, f"{SERVICE}-0")
    host.run(f"docker rm -f {PROBE}")
    argv = serve_argv(replica, STAGED, 8100, quantization=False)
    done = host.run(run_argv(replica, OLD_IMAGE, argv, npu=4))
    host.run(f"docker rm -f {PROBE}")
    assert done.rc == 1, done.stdout + done.stderr
    assert "KeyError: 'layers.0.mlp.gate_up_proj.deq_scale'" in done.stdout + done.stderr


def test_the_flag_on_a_float_model_is_refused_at_start(host):
    replica = inspect(host, f"{SERVICE}-0")
    host.run(f"docker rm -f {PROBE}")
    argv = serve_argv(replica, FLOAT_MODEL, 8100, quantization=True)
    done = host.run(run_argv(replica, OLD_IMAGE, argv, npu=5, model=FLOAT_MODEL))
    host.run(f"docker rm -f {PROBE}")
    out = done.stdout + done.stderr
    assert done.rc == 1, out
    assert "ascend quantization is not fully optimized yet" in out
    assert "ValueError: Cannot find the config file for ascend" in out
    assert "Starting vLLM API server" not in out
