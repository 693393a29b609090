#!/usr/bin/env python3
"""Peak memory and speed of ``ascend-deploy diagnose`` on a large generated log.

Writes a ~200 MB vLLM-style log (stats lines, access lines, worker-prefixed INFO lines with
ANSI colours and CRLF endings, one HCCL bind failure near the end), runs the real CLI in a
child process and reports its peak RSS (``ru_maxrss`` of the child) and throughput::

    .venv/bin/python benchmarks/bench_diagnose.py [--mb 200] [--keep FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200, help="log size in MiB")
    ap.add_argument("--keep", help="write the log here and keep it")
    args = ap.parse_args()
    tmpdir = None
    path = args.keep
    if not path:
        tmpdir = tempfile.mkdtemp(prefix="bench-diagnose-")
        path = os.path.join(tmpdir, "vllm.log")
    try:
        size = write_log(path, args.mb)
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "ascend_deploy.cli", "diagnose", "--json", path],
            capture_output=True,
            text=True,
            check=False,
        )
        seconds = time.monotonic() - t0
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak_kib = usage.ru_maxrss
        cpu = usage.ru_utime + usage.ru_stime
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return 1
        doc = json.loads(proc.stdout)
        first = doc["findings"][0]["rule"] if doc["findings"] else None
        report = {
            "log_mb": round(size / 1048576, 1),
            "lines": doc["lines"],
            "seconds": round(seconds, 1),
            "mb_per_s": round(size / 1048576 / seconds, 1),
            "cpu_seconds": round(cpu, 1),
            "mb_per_cpu_s": round(size / 1048576 / cpu, 1),
            "peak_rss_mb": round(peak_kib / 1024, 1),
            "root_cause": first,
        }
        print(json.dumps(report, indent=2))
        return 0 if first == "hccl_port_in_use" else 1
    finally:
        if tmpdir:
            for name in os.listdir(tmpdir):
                os.unlink(os.path.join(tmpdir, name))
            os.rmdir(tmpdir)


if __name__ == "__main__":
    sys.exit(main())
