"""Measure deploy.yml wall time on 1 and on N simulated hosts, first run and no-change run.

    .venv/bin/python benchmarks/bench_deploy.py --hosts 1 8 [--npus 1] [--json reports/bench.json]

For each fleet size: start the simulated hosts (``ascend_sim.fleet up``, not timed), run
``deploy.yml`` twice against them and time both runs, then remove the hosts. Reports the ratios
the README quotes: N hosts against 1 host (target <= 2x) and the no-change run against the first
(target < 1/3). Each host serves ``--npus`` replicas (1 by default) so that the run measures
the orchestration, not the emulator's CPU time on a small machine.

Besides wall time each run reports the CPU seconds it used: on the controller (ansible-playbook
and its workers) and inside the simulated hosts (their cgroups: inner dockerd, modules,
emulators). On a machine where the hosts share the controller's cores, N hosts cannot finish
faster than (controller + N x host CPU) / cores; the script prints that floor beside the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / ".venv" / "bin"
PRESET = "a2-910b3-8x64g"
IMAGE = "quay.io/ascend/vllm-ascend:v0.23.0"


def sh(cmd: list[str], env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=check)


def fleet(action: str, prefix: str, hosts: int, inventory: Path) -> None:
    cmd = [str(BIN / "python"), "-m", "ascend_sim.fleet", action, "--name-prefix", prefix]
    if action == "up":
        cmd += ["--group", "ascend_llm", "--inventory", str(inventory), "--image", IMAGE]
        cmd += [f"--preset={PRESET}"] * hosts
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = sh(cmd, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench: fleet {action} failed: {done.stderr.strip()[-500:]}")


def host_ids(prefix: str) -> list[str]:
    done = sh(["docker", "ps", "-q", "--no-trunc", "--filter", f"name=^{prefix}-"], check=False)
    return done.stdout.split()


def host_cpu_s(ids: list[str]) -> float:
    """CPU seconds used so far by these containers (cgroup v1 cpuacct or v2 cpu.stat)."""
    total = 0.0
    for cid in ids:
        v1 = Path(f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage")
        v2 = Path(f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/cpu.stat")
        if v1.exists():
            total += int(v1.read_text()) / 1e9
        elif v2.exists():
            usage = next(ln for ln in v2.read_text().splitlines() if ln.startswith("usage_usec"))
            total += int(usage.split()[1]) / 1e6
    return total


def children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def slowest_tasks(stdout: str, count: int = 8) -> list[str]:
    """The first lines of the profile_tasks recap (slowest tasks first)."""
    lines = stdout.splitlines()
    try:
        start = next(i for i, ln in enumerate(lines) if ln.startswith("=====")) + 1
    except StopIteration:
        return []
    return [ln.strip() for ln in lines[start : start + count] if ln.strip()]


def deploy(inventory: Path, prefix: str, npus: int, log: Path) -> tuple[float, int, str]:
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0"}
    cmd = [
        str(BIN / "ansible-playbook"),
        "-i",
        str(REPO / "inventory" / "sim"),
        "-i",
        str(inventory),
        str(REPO / "deploy.yml"),
        "-e",
        json.dumps({"vllm_service_npus": list(range(npus)), "ascend_rollout_batch": "100%"}),
        # Only this run's hosts (a `make demo` host may be in inventory/sim too) and the summary.
        "--limit",
        f"{prefix}-*,localhost",
    ]
    start = time.monotonic()
    done = sh(cmd, env=env, check=False)
    seconds = time.monotonic() - start
    log.write_text(done.stdout + done.stderr)
    changed = sum(
        int(part.split("=")[1])
        for line in done.stdout.splitlines()
        if "changed=" in line and ":" in line and "ok=" in line
        for part in line.split()
        if part.startswith("changed=")
    )
    if done.returncode != 0:
        raise SystemExit(f"bench: deploy.yml failed (rc {done.returncode}); see {log}")
    return seconds, changed, done.stdout


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, nargs="+", default=[1, 8])
    p.add_argument("--npus", type=int, default=1, help="replicas per host (default 1)")
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument("--keep", action="store_true", help="keep the hosts afterwards")
    p.add_argument("--logs", type=Path, help="keep each run's ansible output in this directory")
    args = p.parse_args(argv)
    if any(n < 1 for n in args.hosts) or args.npus < 1:
        p.error("--hosts and --npus must be positive")
    # The tiny model of the simulated fleet (not timed).
    playbook = str(REPO / "playbooks" / "sim_model.yml")
    model = sh([str(BIN / "ansible-playbook"), playbook], check=False)
    if model.returncode != 0:
        raise SystemExit(f"bench: playbooks/sim_model.yml failed: {model.stdout[-500:]}")
    results = []
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="bench-deploy-") as tmp:
        logdir = args.logs or Path(tmp)
        logdir.mkdir(parents=True, exist_ok=True)
        for n in args.hosts:
            prefix = f"bench{n}"
            inventory = Path(tmp) / f"{prefix}.yml"
            print(f"bench: starting {n} simulated host(s)", file=sys.stderr, flush=True)
            fleet("up", prefix, n, inventory)
            try:
                logs = [logdir / f"{prefix}-{i}.log" for i in (1, 2)]
                ids = host_ids(prefix)
                cpu = []
                outs = []
                for log in logs:
                    ctl0, hosts0 = children_cpu_s(), host_cpu_s(ids)
                    seconds, changed, out = deploy(inventory, prefix, args.npus, log)
                    cpu.append((children_cpu_s() - ctl0, host_cpu_s(ids) - hosts0))
                    outs.append((seconds, changed, out))
                (first, changed1, out1), (second, changed2, out2) = outs
            finally:
                if not args.keep:
                    fleet("down", prefix, n, inventory)
            row = {
                "hosts": n,
                "replicas_per_host": args.npus,
                "first_s": round(first, 1),
                "second_s": round(second, 1),
                "second_changed": changed2,
                "first_changed": changed1,
                "first_cpu_controller_s": round(cpu[0][0], 1),
                "first_cpu_hosts_s": round(cpu[0][1], 1),
                "second_cpu_controller_s": round(cpu[1][0], 1),
                "second_cpu_hosts_s": round(cpu[1][1], 1),
                # The run cannot be faster than its CPU work spread over every core.
                "first_cpu_floor_s": round((cpu[0][0] + cpu[0][1]) / cores, 1),
                "slowest_tasks_first": slowest_tasks(out1),
                "slowest_tasks_second": slowest_tasks(out2),
            }
            results.append(row)
            print(json.dumps(row), flush=True)
    base = next((r for r in results if r["hosts"] == min(args.hosts)), None)
    summary = {"cores": cores, "runs": results}
    if base:
        for r in results:
            r["vs_smallest_first"] = round(r["first_s"] / base["first_s"], 2)
            r["second_over_first"] = round(r["second_s"] / r["first_s"], 2)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
