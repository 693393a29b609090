"""Verify a simulated Ascend host made by molecule/_shared/create.yml (preset a2-910b3-8x64g).

Runs as molecule's testinfra verifier, or by hand:
``pytest --hosts=ansible://all --ansible-inventory=$MOLECULE_INVENTORY_FILE molecule/sim/tests``.
npu-smi output and version files are parsed with the project's own parsers
(``ascend_deploy.host.npu_smi``, ``ascend_deploy.host.version_files``) on the controller.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(REPO / "src"))

from ascend_deploy.host import npu_smi, version_files  # noqa: E402
from ascend_sim.scenario_outputs import auth_headers  # noqa: E402

PRESET_NPUS = 8
PRESET_HBM_MB = 65536
SERVED_MODEL = "tiny-qwen3"


def test_state_file_is_the_preset(host):
    state = json.loads(host.file("/etc/ascend-sim/state.json").content_string)
    assert state["preset"] == "a2-910b3-8x64g"
    assert state["card"]["model"] == "910B3"


def test_npu_smi_info_parses(host):
    out = host.check_output("npu-smi info")
    parsed = npu_smi.parse(out, source=f"{host.backend.get_hostname()}: npu-smi info")
    assert parsed["kind"] == "info"
    chips = parsed["chips"]
    assert sorted(c["npu"] for c in chips) == list(range(PRESET_NPUS))
    for chip in chips:
        assert chip["name"] == "910B3"
        assert chip["health"] == "OK"
        assert chip["hbm_total_mb"] == PRESET_HBM_MB
        assert 0 < chip["hbm_used_mb"] < PRESET_HBM_MB
    assert parsed["version"]


@pytest.mark.parametrize(
    "node",
    [f"/dev/davinci{i}" for i in range(PRESET_NPUS)]
    + ["/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"],
)
def test_device_node_is_a_character_device(host, node):
    kind = host.check_output(f"stat -c %F {node}")
    assert kind == "character special file", f"{node} is a {kind}"


def test_driver_and_firmware_version_files_parse(host):
    for path, key in (
        ("/usr/local/Ascend/driver/version.info", "Version"),
        ("/usr/local/Ascend/firmware/version.info", "Version"),
        ("/etc/ascend_install.info", "Driver_Install_Status"),
    ):
        f = host.file(path)
        assert f.is_file, f"{path} is missing"
        pairs = version_files.parse_pairs(f.content_string, path, path)
        assert version_files.get(pairs, key), f"{path} has no {key}"


def test_cann_install_info_parses(host):
    candidates = [
        "/usr/local/Ascend/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info",
        "/usr/local/Ascend/ascend-toolkit/latest/x86_64-linux/ascend_toolkit_install.info",
        "/usr/local/Ascend/cann/aarch64-linux/ascend_toolkit_install.info",
        "/usr/local/Ascend/cann/x86_64-linux/ascend_toolkit_install.info",
    ]
    found = [p for p in candidates if host.file(p).is_file]
    assert found, "no ascend_toolkit_install.info in the toolkit or cann layout"
    pairs = version_files.parse_pairs(host.file(found[0]).content_string, found[0], "CANN info")
    assert version_files.get(pairs, "version")


def test_user_hwhiaiuser_exists(host):
    assert host.user("HwHiAiUser").exists
    assert host.group("HwHiAiUser").exists


def test_inner_docker_has_the_emulator_image(host):
    out = host.check_output("docker images --format '{{.Repository}}:{{.Tag}}'")
    assert "quay.io/ascend/vllm-ascend:v0.23.0" in out.split()


def test_serving_process_shows_in_npu_smi(host):
    parsed = npu_smi.parse(host.check_output("npu-smi info"), source="npu-smi info")
    on_npu0 = [p for p in parsed["processes"] if p["npu"] == 0]
    assert on_npu0, "vllm serve on /dev/davinci0 holds no NPU memory in npu-smi"
    assert all(p["memory_mb"] > 0 for p in on_npu0)
    hbm = {c["npu"]: c["hbm_used_mb"] for c in parsed["chips"]}
    assert hbm[0] > max(v for k, v in hbm.items() if k != 0)


def _published_port(container: str, port: int) -> int:
    out = subprocess.run(
        ["docker", "port", container, f"{port}/tcp"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in out.splitlines():
        addr, _, hport = line.strip().rpartition(":")
        if addr == "127.0.0.1":
            return int(hport)
    raise AssertionError(f"{container}: port {port} is not published on 127.0.0.1 ({out!r})")


def test_vllm_serve_refuses_a_request_without_the_api_key(host):
    port = _published_port(host.backend.get_hostname(), 8000)
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=30)
    assert refused.value.code == 401
    argv = host.check_output("docker inspect -f '{{json .Config.Cmd}}' vllm-tiny")
    assert "--api-key" not in argv  # the key reaches vLLM through its environment only


def test_vllm_serve_answers_a_chat_request(host):
    port = _published_port(host.backend.get_hostname(), 8000)
    body = json.dumps(
        {
            "model": SERVED_MODEL,
            "messages": [{"role": "user", "content": "Hello"}],
            "max_tokens": 8,
            "temperature": 0,
        }
    ).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        data=body,
        headers=auth_headers(),
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                answer = json.loads(resp.read())
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(2)
    assert answer["model"] == SERVED_MODEL
    assert answer["choices"][0]["message"]["role"] == "assistant"
    assert answer["choices"][0]["message"]["content"]
    assert answer["usage"]["completion_tokens"] >= 1
