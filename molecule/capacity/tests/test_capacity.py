"""Verify molecule/capacity: pitfalls 5 and 6 on a simulated 8 x 910B4 32 GB host.

Reads the outputs converge.yml kept (one deploy.yml run per case, npu-smi's view before the
cases, the chosen utilization), recomputes the planner's numbers with
``ascend_deploy.planning.plan``
from the same inputs, and sends real bursts to the served replicas through the ports the
simulated host publishes on 127.0.0.1 (never container addresses).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ascend_deploy.planning.plan import make_plan
from ascend_sim.checkpoints import write_checkpoint
from ascend_sim.scenario_outputs import auth_headers, outputs_dir, read_case, row_of

OUT = outputs_dir("capacity")
REPO = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).parents[3]))
TINY = REPO / ".cache" / "models" / "qwen3-tiny-fp8"
YARN_DIR = "/srv/models/qwen3-8b-yarn"
MODEL = "qwen3-tiny"
MAX_MODEL_LEN = 4096  # molecule.yml group_vars
PLANNED_PORT, TWIN_PORT = 8000, 8001
# The burst: prompts of exactly PROMPT_TOKENS tokens (16 KV blocks of 128 with the first
# generated token), twice as many requests as the planned max_num_seqs.
PROMPT_TOKENS = 2047
# kv_sizing.py gives the engine exactly 96 blocks (3 x 4096 tokens): 6 prompts of 16 blocks
# take every block, so the twin's decode steps must preempt; the planned replica runs at most
# 3 (3 x 17 blocks).
BURST = 6
FILLER = "This sentence is filler text that makes the prompt longer. "
QUESTIONS = [
    ("What is the capital of France?", "Paris"),
    ("What is 12 + 7?", "19"),
    ("What is 6 * 7?", "42"),
    ("What is 30 - 12?", "18"),
]
START_TASK = "TASK [ascend_vllm.serving.vllm_service : Start the replicas"
# The planner rounds weights and activation up and usable memory down to whole MiB.
ROUNDING_SLACK = 3 * 2**20


def case(name: str) -> tuple[dict, list[dict]]:
    found = read_case("capacity", name)
    assert found is not None, f"case {name}: no run.json under {OUT} (converge did not keep it)"
    return found


def npu0_before() -> dict:
    """NPU 0 as npu-smi showed it before any case ran (what every case planned from)."""
    path = OUT / "npu-before.json"
    assert path.exists(), f"{path} missing: converge did not write it"
    chips = json.loads(path.read_text())["chips"]
    return next(c for c in chips if c["npu"] == 0)


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def inspect(host, name: str) -> dict:
    return json.loads(host.check_output(f"docker inspect {name}"))[0]


def kv_tokens_logged(host, container: str) -> int:
    """The "GPU KV cache size: N tokens" line of the replica's start-up log."""
    logs = host.check_output(f"docker logs {container} 2>&1")
    found = re.findall(r"GPU KV cache size: ([\d,]+) tokens", logs)
    assert found, f"{container} logged no KV cache size"
    return int(found[-1].replace(",", ""))


# ---- pitfall 5 ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def yarn_plans(host, tmp_path_factory) -> dict:
    """The planner's plans for the host's checkpoint: its config.json, the same sparse shards
    (``write_checkpoint`` is deterministic) and NPU 0's HBM as npu-smi showed it."""
    cfg = host.file(f"{YARN_DIR}/config.json").content_string
    local = tmp_path_factory.mktemp("yarn") / "qwen3-8b-yarn"
    write_checkpoint(str(local), "qwen3-8b", fp8=False, data="sparse")
    (local / "config.json").write_text(cfg)
    npu = npu0_before()
    common = {
        "hbm_total_mb": npu["hbm_total_mb"],
        "hbm_used_mb": npu["hbm_used_mb"],
        "npus": 1,
        "hardware": "a2",
        "vllm_ascend": "v0.23.0",
    }
    return {
        "pinned": make_plan(str(local), max_model_len=131072, **common),
        "unpinned": make_plan(str(local), **common),
    }


def test_p5_model_is_qwen3_8b_with_yarn(yarn_plans):
    facts = yarn_plans["unpinned"]["model"]
    assert facts["num_hidden_layers"] == 36 and facts["hidden_size"] == 4096
    assert facts["max_position_embeddings"] == 40960
    assert facts["rope_scaling"]["rope_type"] == "yarn"
    assert facts["max_model_len_limit"] == 131072


def test_p5_pinned_context_is_refused_before_any_container_with_numbers(yarn_plans):
    run, _ = case("p5-pinned")
    out = run["stdout"]
    assert run["rc"] != 0, out[-3000:]
    plan = yarn_plans["pinned"]
    cap = plan["kv_capacity_tokens"]
    assert 40960 < cap < 131072
    assert not plan["feasible"]
    fit, more_npus = plan["reasons"]
    # The planner's own sentences, with the capacity, the requested length and the fixes.
    assert fit.startswith(f"--max-model-len 131072 does not fit: the KV cache holds {cap} tokens")
    assert f"lower --max-model-len to {cap} or less, or use more NPUs" in fit
    assert "(TP 2 on 2 NPUs fits: its KV cache holds" in more_npus
    assert "the deployment cannot work as requested" in out
    assert fit in out and more_npus in out
    # The weights were staged and verified (SHA256SUMS), then the plan stopped the host.
    assert (
        "TASK [ascend_vllm.serving.model_weights : Verify the model against its sha256 manifest]"
        in out
    )
    assert START_TASK not in out, "a container was started for a plan that cannot work"
    # deploy.yml's rescue names the failed step and the reason.
    assert "cap-32g not deployed: Assert the plan is feasible (pitfalls 5, 6, 7, 8 name " in out


def test_p5_unpinned_context_is_lowered_to_the_kv_capacity(yarn_plans, host):
    """vllm_service's plan tasks, run in check mode on the host (see converge.yml)."""
    path = OUT / "p5-unpinned" / "plan.json"
    assert path.exists(), f"{path} missing: converge did not write it"
    role_plan = json.loads(path.read_text())
    plan = yarn_plans["unpinned"]
    cap = plan["kv_capacity_tokens"]
    assert plan["feasible"] and plan["max_model_len"] == cap
    assert yarn_plans["pinned"]["kv_capacity_tokens"] == cap
    assert role_plan["feasible"]
    assert role_plan["kv_capacity_tokens"] == role_plan["max_model_len"] == cap
    assert role_plan["max_num_seqs"] == plan["max_num_seqs"]
    assert flag(role_plan["argv"], "--max-model-len") == str(cap)
    note = f"max_model_len lowered from the model's 131072 to {cap} tokens"
    assert note in plan["notes"][0] and note in role_plan["notes"][0]
    # Check mode: nothing started with the 8B model.
    commands = host.check_output("docker ps -a --no-trunc --format '{{.Command}}'")
    assert YARN_DIR not in commands


# ---- pitfall 6 ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sizing() -> dict:
    path = OUT / "kv-sizing.json"
    assert path.exists(), f"{path} missing: converge did not write it"
    return json.loads(path.read_text())


def published(host, port: int) -> str:
    name = host.backend.get_hostname()
    addr = subprocess.run(
        ["docker", "port", name, f"{port}/tcp"], capture_output=True, text=True, check=True
    ).stdout.split()[0]
    assert addr.startswith("127.0.0.1:")
    return f"http://{addr}"


def chat(base: str, content: str, max_tokens: int) -> tuple[int, dict]:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    req = urllib.request.Request(
        f"{base}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers=auth_headers(),
    )
    try:
        with urllib.request.urlopen(req, timeout=300) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, {"error": err.read().decode(errors="replace")}


def preemptions(base: str) -> float:
    with urllib.request.urlopen(f"{base}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    found = re.findall(r"^vllm:num_preemptions_total\{[^}]*\} ([\d.e+]+)$", text, re.M)
    assert found, "no vllm:num_preemptions_total in /metrics"
    return float(found[0])


@pytest.fixture(scope="module")
def prompts(host) -> list[tuple[str, str]]:
    """One long prompt per question, each exactly PROMPT_TOKENS tokens as the server counts.

    Filler sentences, then the start of one more, then the question: the server's own
    prompt_tokens for a probe says how much filler to add.
    """
    base = published(host, PLANNED_PORT)
    out = []
    for question, answer in QUESTIONS:
        probe = FILLER * 30 + "\n\n" + question
        status, body = chat(base, probe, 1)
        assert status == 200, body
        missing = PROMPT_TOKENS - body["usage"]["prompt_tokens"]
        assert missing > 0
        repeat, rest = divmod(missing, len(FILLER))  # byte-level tokenizer: 1 token per byte
        out.append((FILLER * (30 + repeat) + FILLER[:rest] + "\n\n" + question, answer))
    return out


def burst(base: str, prompts: list[tuple[str, str]]) -> list[tuple[int, dict, str]]:
    work = [prompts[i % len(prompts)] for i in range(BURST)]
    with ThreadPoolExecutor(BURST) as pool:
        results = list(pool.map(lambda p: chat(base, p[0], 64), work))
    return [
        (status, body, answer) for (status, body), (_, answer) in zip(results, work, strict=True)
    ]


@pytest.fixture(scope="module")
def planned_burst(host, prompts) -> dict:
    base = published(host, PLANNED_PORT)
    before = preemptions(base)
    results = burst(base, prompts)
    return {"before": before, "after": preemptions(base), "results": results}


@pytest.fixture(scope="module")
def twin_burst(host, prompts, planned_burst) -> dict:
    del planned_burst  # one burst at a time: the two replicas share the 2 CPU cores
    base = published(host, TWIN_PORT)
    before = preemptions(base)
    results = burst(base, prompts)
    return {"before": before, "after": preemptions(base), "results": results}


RELEASE = "v0.23.0"  # molecule.yml: quay.io/ascend/vllm-ascend:v0.23.0 (kv_sizing.py's default)


def tiny_plan(sizing: dict, **pins: int) -> dict:
    """The planner's plan for the tiny model on NPU 0 as converge found it, with ``pins``."""
    npu = npu0_before()
    return make_plan(
        str(TINY),
        hbm_total_mb=npu["hbm_total_mb"],
        hbm_used_mb=npu["hbm_used_mb"],
        max_model_len=MAX_MODEL_LEN,
        gpu_memory_utilization=sizing["gpu_memory_utilization"],
        vllm_ascend=RELEASE,  # the scenario's image: its release's memory model
        **pins,
    )


def test_p6_planner_sized_max_num_seqs_from_the_kv_capacity(host, sizing):
    run, rows = case("p6-planned")
    assert run["rc"] == 0, run["stdout"][-3000:]
    row = row_of(rows, "cap-32g")
    assert row["status"] == "deployed" and row["max_model_len"] == MAX_MODEL_LEN
    # The planner, from the same inputs as the deploy: the tiny model, NPU 0, the utilization.
    plan = tiny_plan(sizing)
    seqs = plan["max_num_seqs"]
    assert seqs == sizing["max_num_seqs"] and 1 <= seqs <= 3
    argv = inspect(host, "qwen3-0")["Config"]["Cmd"]
    assert flag(argv, "--max-num-seqs") == str(seqs)
    assert flag(argv, "--max-model-len") == str(MAX_MODEL_LEN)
    assert flag(argv, "--gpu-memory-utilization") == str(sizing["gpu_memory_utilization"])
    # What the engine reports at start-up. The emulated engine sizes its cache with its own code
    # (vllm_emulator.memory: bytes, per-tensor shares, its profile run), never the planner's:
    # the planned concurrency at full length must fit in what it really has, and the planner
    # may be below it only by its whole-MB rounding (weights, activation, usable memory). A
    # planner that forgot a term of the budget would choose a utilization at which this engine
    # holds less than 3 x 4096 tokens, or none.
    logged = kv_tokens_logged(host, "qwen3-0")
    assert logged >= sizing["engine_kv_tokens"] == 3 * MAX_MODEL_LEN
    assert seqs * MAX_MODEL_LEN <= plan["kv_capacity_tokens"] <= logged
    per_token = plan["memory"]["kv_bytes_per_token_per_npu"]
    assert (logged - plan["kv_capacity_tokens"]) * per_token <= ROUNDING_SLACK + 128 * per_token


def test_p6_burst_of_long_requests_is_served_without_preemption(planned_burst):
    results = planned_burst["results"]
    assert len(results) == BURST and BURST > 3  # more requests than max_num_seqs
    for status, body, answer in results:
        assert status == 200, body
        assert body["usage"]["prompt_tokens"] == PROMPT_TOKENS
        text = body["choices"][0]["message"]["content"]
        assert answer in text, text
    assert planned_burst["before"] == planned_burst["after"] == 0


def test_p6_pinned_max_num_seqs_16_is_refused_with_numbers(host, sizing):
    run, _ = case("p6-pinned-16")
    out = run["stdout"]
    assert run["rc"] != 0, out[-3000:]
    plan = tiny_plan(sizing, max_num_seqs=16)
    assert not plan["feasible"]
    reason = plan["reasons"][0]
    cap = sizing["kv_capacity_tokens"]
    assert reason.startswith(
        f"--max-num-seqs 16 plans 16 x {MAX_MODEL_LEN} = {16 * MAX_MODEL_LEN} tokens of KV"
    )
    seqs = sizing["max_num_seqs"]
    assert f"the cache holds {cap};" in reason
    assert reason.endswith(f"Use --max-num-seqs {seqs} or less")
    assert reason in out
    assert START_TASK not in out
    assert "cap-32g not deployed: Assert the plan is feasible" in out
    # The replica the planned deploy started still runs, unchanged.
    c = inspect(host, "qwen3-0")
    assert c["State"]["Running"]
    assert flag(c["Config"]["Cmd"], "--max-num-seqs") == str(seqs)


def test_contrast_the_same_replica_with_16_seqs_preempts_under_the_same_burst(
    host, twin_burst, sizing
):
    """The hand-started twin differs from the planned replica only in --max-num-seqs 16 and its
    NPU: the same KV cache, and the same burst, now preempts (recomputes) requests."""
    planned = inspect(host, "qwen3-0")["Config"]["Cmd"]
    twin = inspect(host, "seqs16-bypass")["Config"]["Cmd"]
    differs = [(a, b) for a, b in zip(planned, twin, strict=True) if a != b]
    assert sorted(differs) == [(str(sizing["max_num_seqs"]), "16"), ("8000", "8001")]
    # The engine with 16 sequences holds exactly the 96 blocks kv_sizing.py chose for it.
    assert kv_tokens_logged(host, "seqs16-bypass") == sizing["engine_kv_tokens"] == 12288
    for status, body, answer in twin_burst["results"]:
        assert status == 200, body
        assert answer in body["choices"][0]["message"]["content"]
    assert twin_burst["after"] > twin_burst["before"]
    logs = host.check_output("docker logs seqs16-bypass 2>&1")
    assert "is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV" in logs
