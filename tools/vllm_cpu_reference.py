"""Real vLLM (CPU backend) serving the converted tiny model: the precision check and TP 2.

Runs in a vLLM CPU interpreter, by default inside a container of the engine image
(docker/vllm-engine; ``kv_vs_vllm.container_argv``):

1. converts ``tests/data/tiny-qwen3-fp8`` to BF16 with the bundle's converter (on the calling
   side: it needs the ``convert`` extra, numpy and ml_dtypes), then in vLLM's interpreter makes
   a copy with one weight tensor halved;
2. serves the converted copy at ``--tensor-parallel-size 2`` with the engine image's own
   ``vllm serve`` (emulated Ascend start-up on two emulated NPUs of a sandbox root, then
   ``launch.translate``: one OpenMP CPU group per rank, torch.compile off; then vLLM's OpenAI
   server; outside the image ``translate`` and the server only), checks it with
   ``verification.precision.compare_logprobs`` against the CPU reference, and reads the KV
   tokens it reports beside the planner's per-NPU figure;
3. serves the perturbed copy at TP 1 and checks it against the same reference.

    .venv/bin/python tools/vllm_cpu_reference.py [--image IMAGE | --python PY] [--tp 2]

While the two servers load, the KV comparison of tools/kv_vs_vllm.py runs in the same vLLM.
Prints the verdicts and the KV table; exit 1 unless the served copy passes, the perturbed copy
fails and every shape vLLM serves agrees with the planner within 2 %.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tools"))

import kv_vs_vllm  # noqa: E402

# The trained tiny model with head_dim 64 (tools/make_tiny_hd64.py): vLLM 0.23.0 has no CPU
# attention for the original head_dim 48.
TINY_FP8 = REPO / "tests" / "data" / "tiny-qwen3-fp8-hd64"
PERTURBED = "model.layers.1.mlp.down_proj.weight"
SERVED_NAME = "qwen3-tiny"
RESULT_PREFIX = "VLLM_CPU_REFERENCE_JSON "
KV_GIB = 1
IMAGE_ROW = "/opt/ascend-sim/row.json"  # the engine image's emulated Ascend layer
ASCEND_PASSED = "ascend-sim engine: emulated Ascend start-up passed"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """vLLM's OpenAI server on one model directory (BF16, eager), started at once.

    With ``sandbox`` (an emulator sandbox root; only in the engine image) the image's own
    ``vllm serve`` runs: the emulated Ascend start-up on ``tp`` emulated NPUs, then
    ``launch.translate`` and the real engine. Without, ``translate`` and the engine only.
    """

    def __init__(self, model_dir: str, log: Path, tp: int = 1, sandbox: str | None = None) -> None:
        from ascend_sim.vllm_engine.launch import SHIM_SITE, engine_command, translate

        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.tp = tp
        self.started = time.monotonic()
        serve = [model_dir, "--served-model-name", SERVED_NAME, "--dtype", "bfloat16",
                 "--enforce-eager", "--max-model-len", "2048", "--host", "127.0.0.1",
                 "--port", str(self.port), "--tensor-parallel-size", str(tp)]  # fmt: skip
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": str(KV_GIB)}
        if sandbox:
            self.via = "vllm serve"
            env.update(
                ASCEND_SIM_ROOT=sandbox,
                ASCEND_RT_VISIBLE_DEVICES=",".join(map(str, range(tp))),
                PYTHONPATH=os.pathsep.join([SHIM_SITE, env.get("PYTHONPATH", "")]),
            )
            argv = ["vllm", "serve", *serve]
        else:
            self.via = "launch.translate"
            engine_argv, env = translate(serve, env)
            argv = engine_command(sys.executable, engine_argv)
        with open(log, "w", encoding="utf-8") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        self.healthy_after: float | None = None
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        while self.proc.poll() is None and self.healthy_after is None:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=5):
                    self.healthy_after = time.monotonic() - self.started
            except OSError:
                time.sleep(1)

    def wait_healthy(self, timeout: float = 900) -> float:
        """Seconds from start until ``/health`` answered; RuntimeError with the log's end."""
        while self.healthy_after is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM exited ({self.proc.returncode}):\n{self.tail()}")
            if time.monotonic() - self.started > timeout:
                raise RuntimeError(f"vLLM not healthy in {timeout:.0f} s:\n{self.tail()}")
            time.sleep(0.5)
        return self.healthy_after

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def kv_tokens(self) -> int | None:
        found = kv_vs_vllm.KV_LINE.findall(self.log.read_text(errors="replace"))
        return int(found[-1].replace(",", "")) if found else None

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def convert(dst: Path) -> str:
    """The tiny FP8 model converted to BF16 in ``dst`` by the bundle's converter."""
    from ascend_deploy.fp8.convert import convert_checkpoint

    convert_checkpoint(str(TINY_FP8), str(dst))
    return str(dst)


def perturbed_copy(ref: str, root: Path, perturbed: str = PERTURBED) -> str:
    """A copy of ``ref`` in ``root`` with the tensor ``perturbed`` halved."""
    import torch
    from safetensors.torch import load_file, save_file

    bad = str(root / "qwen3-tiny-perturbed")
    shutil.copytree(ref, bad)
    found = False
    for name in os.listdir(bad):
        if name.endswith(".safetensors"):
            tensors = load_file(os.path.join(bad, name))
            if perturbed in tensors:
                tensors[perturbed] = (tensors[perturbed].float() * 0.5).to(torch.bfloat16)
                save_file(tensors, os.path.join(bad, name), metadata={"format": "pt"})
                found = True
    if not found:
        raise RuntimeError(f"no tensor {perturbed} in {ref}")
    return bad


def planner_tokens(model_dir: str, tp: int) -> dict:
    """The planner's per-NPU KV bytes per token at ``tp`` and the tokens of KV_GIB."""
    from ascend_deploy.model.info import read_architecture
    from ascend_deploy.planning.memory import DEFAULT_MODEL, tokens_in

    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as fh:
        arch = read_architecture(json.load(fh))
    bpt = DEFAULT_MODEL.kv_bytes_per_token_per_npu(arch, tp)
    return {
        "planner_bytes_per_token": bpt,
        "planner_tokens": tokens_in(KV_GIB * kv_vs_vllm.GIB, bpt, DEFAULT_MODEL.block_size),
    }


def check(ref: str, root: Path, tp: int = 2, kv_shapes: list[str] | None = None) -> dict:
    """Steps 1-3 of the module docstring on the converted ``ref``, in this (vLLM) interpreter.

    Both servers start at once; while they load, ``kv_vs_vllm.measure`` builds the engines of
    ``kv_shapes`` in this process (the KV comparison of the same vLLM, ``kv`` in the result).
    """
    from ascend_deploy.verification.http_client import Client
    from ascend_deploy.verification.precision import compare_logprobs

    bad = perturbed_copy(ref, root)
    runs = {"served": (ref, tp), "perturbed_copy": (bad, 1)}
    sandbox = None
    if os.path.exists(IMAGE_ROW) and shutil.which("vllm"):  # the engine image
        from ascend_sim.vllm_emulator.sandbox import make_root

        sandbox = make_root(str(root / "ascend-sandbox"))
    servers = {
        "served": Server(ref, root / "served.log", tp, sandbox),
        "perturbed_copy": Server(bad, root / "perturbed_copy.log", 1),
    }
    try:
        kv_started = time.monotonic()
        kv = kv_vs_vllm.measure(kv_shapes, KV_GIB) if kv_shapes else {}
        import vllm

        out: dict = {"vllm_version": vllm.__version__, "perturbed": PERTURBED, "kv": kv}
        out["kv_seconds"] = round(time.monotonic() - kv_started, 1)
        for key, server in servers.items():
            healthy = server.wait_healthy()
            verdict = compare_logprobs(Client(server.url, timeout=120), SERVED_NAME, ref)
            server.stop()
            out[key] = {
                "tp": server.tp,
                "via": server.via,
                "ascend_startup": ASCEND_PASSED in server.log.read_text(errors="replace"),
                "healthy_seconds": round(healthy, 1),
                "vllm_kv_tokens": server.kv_tokens(),
                **planner_tokens(runs[key][0], server.tp),
                "verdict": verdict,
            }
    finally:
        for server in servers.values():
            server.stop()
    out["cpu_seconds"] = cpu_seconds()
    return out


def cpu_seconds() -> float:
    """CPU time used so far: the container's (cgroup), else this process and its reaped children.

    The check's cost independent of the machine's other load.
    """
    if os.path.exists("/.dockerenv"):
        try:  # cgroup v1
            return round(int(Path("/sys/fs/cgroup/cpuacct/cpuacct.usage").read_text()) / 1e9, 1)
        except (OSError, ValueError):
            pass
        try:  # cgroup v2
            stat = Path("/sys/fs/cgroup/cpu.stat").read_text().split()
            return round(int(stat[stat.index("usage_usec") + 1]) / 1e6, 1)
        except (OSError, ValueError, IndexError):
            pass
    used = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return round(sum(u.ru_utime + u.ru_stime for u in used), 1)


def run(
    image: str | None = None,
    python: str | None = None,
    tp: int = 2,
    kv: bool = True,
    timeout: float = 1200,
) -> tuple[dict, str]:
    """Convert here, then ``check`` in a container of the engine image (or in ``python``).

    With ``kv`` the result's ``kv_rows`` hold ``kv_vs_vllm``'s rows for every tiny config.
    """
    with tempfile.TemporaryDirectory(prefix="vllm-cpu-reference-") as work:
        ref = convert(Path(work) / "qwen3-tiny")
        tail = ["--tp", str(tp)] + ([] if kv else ["--no-kv"])
        if python:
            cmd = [python, str(REPO / "tools" / "vllm_cpu_reference.py"), "--inside", ref, *tail]
        else:
            mounts = {work: "/work:ro"}
            cmd = kv_vs_vllm.container_argv(image or kv_vs_vllm.ENGINE_IMAGE, mounts=mounts)
            cmd += ["/repo/tools/vllm_cpu_reference.py", "--inside", "/work/qwen3-tiny", *tail]
        started = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        took = round(time.monotonic() - started, 1)
    output = proc.stdout + proc.stderr
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX) :])
            result["seconds"] = took
            configs = kv_vs_vllm.tiny_configs()
            result["kv_rows"] = [
                kv_vs_vllm.rows_for(name, configs[name], measured, KV_GIB)
                for name, measured in result["kv"].items()
            ]
            return result, output
    raise RuntimeError(f"the vLLM reference check failed (rc {proc.returncode}):\n{output[-4000:]}")


def summary(result: dict) -> str:
    lines = [
        f"vLLM {result['vllm_version']} (CPU), perturbed tensor {result['perturbed']}, "
        f"{result['seconds']} s in all (KV engines {result['kv_seconds']} s), "
        f"{result['cpu_seconds']} CPU seconds"
    ]
    for key in ("served", "perturbed_copy"):
        r = result[key]
        v = r["verdict"]
        lines.append(
            f"{key:<15} TP {r['tp']} ({r['via']}): top-5 logprob diff {v['max_abs_diff']:.4f} "
            f"(tolerance {v['lp_tolerance']:.4f}), KL {v['max_kl']:.1e} "
            f"(tolerance {v['kl_tolerance']:.1e}), top-1 {v['top1_agree']}/{v['prompts']}: "
            f"{'pass' if v['ok'] else 'FAIL'}; KV tokens vLLM {r['vllm_kv_tokens']:,} "
            f"planner {r['planner_tokens']:,}; healthy after {r['healthy_seconds']} s"
        )
    if result.get("kv_rows"):
        lines += ["", kv_vs_vllm.table(result["kv_rows"])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--image", default=None, help=f"engine image (default {kv_vs_vllm.ENGINE_IMAGE})"
    )
    ap.add_argument("--python", default=None, help="or: an interpreter with vllm-cpu installed")
    ap.add_argument("--tp", type=int, default=2, help="tensor parallel size of the served copy")
    ap.add_argument("--no-kv", action="store_true", help="skip the KV comparison")
    ap.add_argument("--json", help="also write the result to this file")
    ap.add_argument("--inside", metavar="MODEL", help=argparse.SUPPRESS)  # vLLM side
    a = ap.parse_args(argv)
    if a.inside:
        shapes = None if a.no_kv else list(kv_vs_vllm.tiny_configs())
        with tempfile.TemporaryDirectory(prefix="vllm-cpu-reference-") as root:
            result = check(a.inside, Path(root), a.tp, shapes)
        print(RESULT_PREFIX + json.dumps(result), flush=True)
        return 0
    try:
        result, _ = run(a.image, a.python, a.tp, not a.no_kv)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"vllm_cpu_reference: {exc}", file=sys.stderr)
        return 2
    print(summary(result))
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=2) + "\n")
    ok = result["served"]["verdict"]["ok"] and not result["perturbed_copy"]["verdict"]["ok"]
    # A shape vLLM does not serve is reported in the table; a served one must agree.
    ok = ok and all(
        abs(r["diff"]) <= kv_vs_vllm.TOLERANCE for r in result["kv_rows"] if "diff" in r
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
