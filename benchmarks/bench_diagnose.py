#!/usr/bin/env python3
"""Speed and peak memory of ``ascend-deploy diagnose`` on a large generated log, plain and gzip,
next to ``grep -c`` over the same file in the same run.

Writes a vLLM-style log (stats lines, access lines, worker-prefixed INFO/DEBUG lines with ANSI
colours and CRLF endings, one HCCL bind failure near the end) and its gzip copy, runs the real CLI
on each in a child process and reports wall and CPU throughput, peak RSS (``ru_maxrss`` of the
child) and the root cause it found; then ``grep -c`` (``gzip -dc | grep -c`` for the gzip copy)
for the failure's marker over the same file::

    .venv/bin/python benchmarks/bench_diagnose.py [--mb 100] [--keep DIR]

Exit 1 when the root cause is not ``hccl_port_in_use``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time

NOISE = [
    "\x1b[32mINFO\x1b[0m 08-06 09:37:{s:02d} [loggers.py:118] Engine 000: Avg prompt throughput: "
    "{a:.1f} tokens/s, Avg generation throughput: {b:.1f} tokens/s, Running: {r} reqs, Waiting: 0 "
    "reqs, GPU KV cache usage: {u:.1f}%, Prefix cache hit rate: 0.0%",
    '(APIServer pid=1) INFO:     10.0.0.{r}:5{s:04d} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "(VllmWorker rank={r} pid=1{s:03d}) INFO 08-06 09:37:{s:02d} [worker.py:210] step {a:.0f} done",
    "(EngineCore_DP0 pid=29) DEBUG 08-06 09:37:{s:02d} [core.py:500] scheduled {r} requests",
]
FAILURE = [
    "[rank0]: RuntimeError: createHCCLComm:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:1479 "
    "HCCL function error: HcclGetRootInfo(&hcclID), error code is 11",
    "[rank0]: EJ0003: [PID: 159] 2025-03-26-17:01:02.816.428 Failed to bind the IP port. Reason: "
    "The IP address and port have been bound already.",
]
GREP_FOR = "Failed to bind the IP port"


def write_log(path: str, size_mb: int) -> int:
    rng = random.Random(1)
    target = size_mb * 1024 * 1024
    written = 0
    with open(path, "w", encoding="utf-8", newline="") as fh:
        while written < target:
            block = []
            for _ in range(1000):
                line = rng.choice(NOISE).format(
                    s=rng.randrange(60),
                    a=rng.random() * 900,
                    b=rng.random() * 400,
                    r=rng.randrange(8),
                    u=rng.random() * 60,
                )
                block.append(line + "\r\n")
            text = "".join(block)
            fh.write(text)
            written += len(text)
        fh.write("\r\n".join(FAILURE) + "\r\n")
    return os.path.getsize(path)


def _child_usage() -> tuple[float, int]:
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime, u.ru_maxrss


def run_diagnose(path: str, size: int) -> dict:
    cpu0, _ = _child_usage()
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "ascend_deploy.cli", "diagnose", "--json", path],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.monotonic() - t0
    cpu1, peak_kib = _child_usage()
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()}
    doc = json.loads(proc.stdout)
    mb = size / 1048576
    cpu = cpu1 - cpu0
    return {
        "seconds": round(seconds, 2),
        "mb_per_s": round(mb / seconds, 1),
        "cpu_seconds": round(cpu, 2),
        "mb_per_cpu_s": round(mb / cpu, 1) if cpu else None,
        "peak_rss_mb": round(peak_kib / 1024, 1),  # largest child so far (plain runs first)
        "lines": doc["lines"],
        "root_cause": doc["findings"][0]["rule"] if doc["findings"] else None,
    }


def run_grep(path: str, size: int, gz: bool) -> dict:
    cmd = f"gzip -dc {path} | grep -c '{GREP_FOR}'" if gz else f"grep -c '{GREP_FOR}' {path}"
    cpu0, _ = _child_usage()
    t0 = time.monotonic()
    out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, check=False)
    seconds = time.monotonic() - t0
    cpu = _child_usage()[0] - cpu0
    mb = size / 1048576
    return {
        "command": cmd.replace(path, "FILE"),
        "count": int(out.stdout.strip() or 0),
        "seconds": round(seconds, 3),
        "mb_per_s": round(mb / seconds, 1),
        "mb_per_cpu_s": round(mb / cpu, 1) if cpu else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100, help="log size in MiB (decompressed)")
    ap.add_argument("--keep", help="write the logs into this directory and keep them")
    args = ap.parse_args()
    tmpdir = args.keep or tempfile.mkdtemp(prefix="bench-diagnose-")
    os.makedirs(tmpdir, exist_ok=True)
    plain = os.path.join(tmpdir, "vllm.log")
    packed = plain + ".gz"
    try:
        size = write_log(plain, args.mb)
        with open(plain, "rb") as src, gzip.open(packed, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        report = {
            "log_mb": round(size / 1048576, 1),
            "gzip_mb": round(os.path.getsize(packed) / 1048576, 1),
            "cpus": os.cpu_count(),
            "load_1min": round(os.getloadavg()[0], 1),
            "plain": {"diagnose": run_diagnose(plain, size), "grep": run_grep(plain, size, False)},
            "gzip": {"diagnose": run_diagnose(packed, size), "grep": run_grep(packed, size, True)},
        }
        print(json.dumps(report, indent=2))
        causes = {report[k]["diagnose"].get("root_cause") for k in ("plain", "gzip")}
        return 0 if causes == {"hccl_port_in_use"} else 1
    finally:
        if not args.keep:
            shutil.rmtree(tmpdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
