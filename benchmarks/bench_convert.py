#!/usr/bin/env python3
"""Benchmark the FP8 -> BF16 converter against the common baseline and an I/O floor.

One run generates a synthetic checkpoint with the exact Qwen3-4B-FP8 layout
(``ascend_sim.checkpoints.write_checkpoint``; ``--layers`` for fewer layers) and measures,
each in a fresh subprocess, wall time, peak RSS (``ru_maxrss``) and peak anonymous memory
(``RssAnon`` sampled from /proc every 20 ms) of:

* ``converter``: ``ascend_deploy.fp8.convert.convert_checkpoint`` (streaming; worker
  threads gather each chunk of rows from per-tile BF16 tables, hash the source between
  the tensors and start the writeback of every finished tensor at once);
* ``baseline``: the common approach - per shard ``safetensors.torch.load_file``,
  dequantize in torch (``w.float() * scale.repeat_interleave(...)`` -> bf16),
  ``save_file``;
* ``io-floor``: read every input shard and write output shards of the converter's sizes.

Every run ends with its output fsynced (the converter fsyncs itself; the others call
``os.fsync`` on each file, included in their time). The input stays in the page cache
(it is read once before each run), so the figures compare the work, not the cache. The baseline's
output is compared tensor by tensor with the converter's (must be bit-identical).

Usage: python benchmarks/bench_convert.py [--layers N] [--workdir DIR] [--keep] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "src"))

GENERATE = """
import json, sys
from ascend_sim.checkpoints import write_checkpoint
info = write_checkpoint(sys.argv[1], "qwen3-4b", layers=int(sys.argv[2]), fp8=True,
                        scale_dtype=sys.argv[3], shard_bytes=int(sys.argv[4]))
print(json.dumps({k: info[k] for k in ("shards", "tensor_count", "total_size")}))
"""

CONVERTER = """
import sys
from ascend_deploy.fp8.convert import convert_checkpoint
r = convert_checkpoint(sys.argv[1], sys.argv[2], workers=int(sys.argv[3]) or None)
print(r["tensors_in"], r["tensors_out"], r["total_size"])
"""

BASELINE = """
import json, os, sys, torch
from safetensors.torch import load_file, save_file
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst)
index = json.load(open(os.path.join(src, "model.safetensors.index.json")))
config = json.load(open(os.path.join(src, "config.json")))
bm, bn = config["quantization_config"]["weight_block_size"]
weight_map = {}
for shard in sorted(set(index["weight_map"].values())):
    state = load_file(os.path.join(src, shard))
    out = {}
    for name, t in state.items():
        if name.endswith("_scale_inv"):
            continue
        if t.dtype == torch.float8_e4m3fn:
            s = state[name + "_scale_inv"].float()
            s = s.repeat_interleave(bm, 0).repeat_interleave(bn, 1)[: t.shape[0], : t.shape[1]]
            t = (t.float() * s).to(torch.bfloat16)
        out[name] = t
        weight_map[name] = shard
    path = os.path.join(dst, shard)
    save_file(out, path, metadata={"format": "pt"})
    del state, out
    fd = os.open(path, os.O_RDONLY); os.fsync(fd); os.close(fd)
with open(os.path.join(dst, "model.safetensors.index.json"), "w") as fh:
    json.dump({"metadata": {}, "weight_map": weight_map}, fh)
print(len(index["weight_map"]), len(weight_map))
"""

IO_FLOOR = """
import json, os, sys
src, dst = sys.argv[1], sys.argv[2]
sizes = json.loads(sys.argv[3])
os.makedirs(dst)
buf = bytearray(16 << 20)
view = memoryview(buf)
for shard, out_size in sizes.items():
    with open(os.path.join(src, shard), "rb", buffering=0) as fin, \\
            open(os.path.join(dst, shard), "wb", buffering=0) as fout:
        written = 0
        while True:
            n = fin.readinto(buf)
            if not n:
                break
            written += fout.write(view[:n])
        while written < out_size:
            written += fout.write(view[: min(len(buf), out_size - written)])
        os.fsync(fout.fileno())
print("ok")
"""


def warm(paths: list[str]) -> None:
    """Read the input once so every run starts with it in the page cache."""
    buf = bytearray(16 << 20)
    for path in paths:
        with open(path, "rb", buffering=0) as fh:
            while fh.readinto(buf):
                pass


def measure(label: str, code: str, args: list[str]) -> dict:
    """Run ``code`` in a fresh interpreter; wall time, peak RSS, peak anonymous RSS."""
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "src"))
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE, text=True
    )
    peak_anon = [0]
    peak_hwm = [0]
    done = threading.Event()

    def sample() -> None:
        path = f"/proc/{proc.pid}/status"
        while not done.is_set():
            try:
                with open(path) as fh:
                    for line in fh:
                        if line.startswith("RssAnon:"):
                            peak_anon[0] = max(peak_anon[0], int(line.split()[1]) * 1024)
                        elif line.startswith("VmHWM:"):
                            peak_hwm[0] = max(peak_hwm[0], int(line.split()[1]) * 1024)
            except OSError:
                return
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    done.set()
    out = proc.stdout.read().strip() if proc.stdout else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{label} failed with exit code {proc.returncode}")
    print(
        f"{label}: {seconds:.2f}s (CPU {usage.ru_utime + usage.ru_stime:.1f}s, load "
        f"{load_before:.1f}->{os.getloadavg()[0]:.1f}), "
        f"peak RSS {usage.ru_maxrss / 2**10:.0f} MiB, "
        f"peak anon {peak_anon[0] / 2**20:.0f} MiB, major faults {usage.ru_majflt}, "
        f"blocks read {usage.ru_inblock}, switches {usage.ru_nvcsw}/{usage.ru_nivcsw}",
        file=sys.stderr,
    )
    return {
        "label": label,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
        "load_avg_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "major_faults": usage.ru_majflt,
        "blocks_read": usage.ru_inblock,
        "voluntary_switches": usage.ru_nvcsw,
        "involuntary_switches": usage.ru_nivcsw,
        "peak_rss_bytes": max(usage.ru_maxrss * 1024, peak_hwm[0]),
        "peak_anon_bytes": peak_anon[0],
        "output": out,
    }


def compare_outputs(a_dir: str, b_dir: str) -> int:
    """Compare every tensor of two BF16 checkpoints byte for byte; returns tensors compared."""
    from ascend_deploy.model.files import read_weight_layout

    a, b = read_weight_layout(a_dir), read_weight_layout(b_dir)
    if set(a.weight_map) != set(b.weight_map):
        raise SystemExit("baseline and converter outputs hold different tensor names")
    step = 64 << 20
    for name, shard in a.weight_map.items():
        ia, ib = a.tensor(name), b.tensor(name)
        if (ia.dtype, ia.shape) != (ib.dtype, ib.shape):
            raise SystemExit(f"{name}: {ia.dtype}{ia.shape} vs {ib.dtype}{ib.shape}")
        oa = a.headers[shard].data_offset + ia.begin
        ob = b.headers[b.weight_map[name]].data_offset + ib.begin
        with (
            open(os.path.join(a_dir, shard), "rb") as fa,
            open(os.path.join(b_dir, b.weight_map[name]), "rb") as fb,
        ):
            for pos in range(0, ia.nbytes, step):
                n = min(step, ia.nbytes - pos)
                if os.pread(fa.fileno(), n, oa + pos) != os.pread(fb.fileno(), n, ob + pos):
                    raise SystemExit(f"{name}: converter and baseline outputs differ")
    return len(a.weight_map)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=36, help="decoder layers (36 = full 4B)")
    parser.add_argument("--workdir", default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--workers", type=int, default=0, help="converter workers (0 = cores)")
    parser.add_argument("--scale-dtype", default="BF16", choices=["BF16", "F16", "F32"])
    parser.add_argument(
        "--shard-bytes",
        type=int,
        default=2_000_000_000,
        help="input shard size; the baseline holds a whole shard (FP8 + BF16 + bytes copy)",
    )
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the files afterwards")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    from ascend_deploy.fp8.plan import plan_conversion

    work = tempfile.mkdtemp(prefix="bench-convert-", dir=args.workdir)
    src = os.path.join(work, "fp8")
    try:
        # Generate in a child process: ru_maxrss survives fork+exec, so the parent must
        # stay small for the children's peak RSS figures to mean anything.
        t = time.perf_counter()
        info = json.loads(
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    GENERATE,
                    src,
                    str(args.layers),
                    args.scale_dtype,
                    str(args.shard_bytes),
                ],
                env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "src")),
                check=True,
                stdout=subprocess.PIPE,
                text=True,
            ).stdout
        )
        gen_s = time.perf_counter() - t
        plan = plan_conversion(src)
        sizes = {s.name: s.out_size for s in plan.shards}
        in_bytes = sum(os.path.getsize(os.path.join(src, s)) for s in info["shards"])
        print(
            f"checkpoint: {args.layers} layers, {info['tensor_count']} tensors, "
            f"{in_bytes / 1e9:.2f} GB in {len(info['shards'])} shards "
            f"(generated in {gen_s:.0f}s); output {sum(sizes.values()) / 1e9:.2f} GB",
            file=sys.stderr,
        )
        runs = []
        floor_dir = os.path.join(work, "floor")
        inputs = [os.path.join(src, s) for s in info["shards"]]
        warm(inputs)
        runs.append(measure("io-floor", IO_FLOOR, [src, floor_dir, json.dumps(sizes)]))
        shutil.rmtree(floor_dir)
        conv_dir = os.path.join(work, "bf16")
        warm(inputs)
        runs.append(measure("converter", CONVERTER, [src, conv_dir, str(args.workers)]))
        compared = None
        if not args.skip_baseline:
            base_dir = os.path.join(work, "baseline")
            warm(inputs)
            runs.append(measure("baseline", BASELINE, [src, base_dir]))
            compared = compare_outputs(conv_dir, base_dir)
            shutil.rmtree(base_dir)
        by = {r["label"]: r for r in runs}
        result = {
            "layers": args.layers,
            "shards": len(info["shards"]),
            "cpus": os.cpu_count(),
            "input_bytes": in_bytes,
            "output_bytes": sum(sizes.values()),
            "converter_output": by["converter"]["output"],
            "runs": runs,
            "converter_vs_floor": round(by["converter"]["seconds"] / by["io-floor"]["seconds"], 2),
            "converter_vs_floor_cpu": round(
                by["converter"]["cpu_seconds"] / by["io-floor"]["cpu_seconds"], 2
            ),
            "baseline_vs_converter": (
                round(by["baseline"]["seconds"] / by["converter"]["seconds"], 2)
                if "baseline" in by
                else None
            ),
            "baseline_vs_converter_cpu": (
                round(by["baseline"]["cpu_seconds"] / by["converter"]["cpu_seconds"], 2)
                if "baseline" in by
                else None
            ),
            "tensors_compared_with_baseline": compared,
        }
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{'run':<10} {'seconds':>8} {'CPU s':>7} {'peak RSS':>10} {'peak anon':>10}")
        for r in runs:
            print(
                f"{r['label']:<10} {r['seconds']:>8.2f} {r['cpu_seconds']:>7.1f} "
                f"{r['peak_rss_bytes'] / 2**20:>8.0f}Mi "
                f"{r['peak_anon_bytes'] / 2**20:>8.0f}Mi"
            )
        print(
            f"converter / io-floor: {result['converter_vs_floor']}x wall, "
            f"{result['converter_vs_floor_cpu']}x CPU"
        )
        if result["baseline_vs_converter"] is not None:
            print(
                f"baseline / converter: {result['baseline_vs_converter']}x wall, "
                f"{result['baseline_vs_converter_cpu']}x CPU"
            )
            print(f"outputs bit-identical over {compared} tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
