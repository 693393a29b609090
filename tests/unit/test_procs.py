"""procs: real listeners and processes, npu-smi process tables, ownership, stopping."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
from conftest import SAMPLES, sample

from ascend_deploy import npu_smi, procs
from ascend_deploy.cli import main
from ascend_deploy.errors import InputError

SERVER = [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1"]


def start_server(argv=None, **kwargs):
    """A real HTTP server on 127.0.0.1 with a port chosen by the kernel; (proc, port)."""
    proc = subprocess.Popen(argv or SERVER, stdout=subprocess.PIPE, text=True, **kwargs)
    line = proc.stdout.readline()
    m = re.search(r"port (\d+)", line)
    assert m, line
    return proc, int(m.group(1))


def spawn_sleeper():
    """``sleep 30``, returned once the child has exec'd (its cmdline says sleep)."""
    proc = subprocess.Popen(["sleep", "30"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/{proc.pid}/cmdline", "rb") as fh:
            if fh.read().startswith(b"sleep\0"):
                return proc
        time.sleep(0.01)
    raise AssertionError("sleep did not start")


@pytest.fixture
def server():
    proc, port = start_server()
    yield proc, port
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def alive(proc) -> bool:
    return proc.poll() is None


# ----------------------------------------------------------------------------- listeners


def test_listener_found_through_proc_net_tcp(server):
    proc, port = server
    result = procs.find_holders(port, "http.server", None)
    (entry,) = result["listeners"]
    assert entry["pid"] == proc.pid
    assert (entry["address"], entry["port"], entry["proto"]) == ("127.0.0.1", port, "tcp")
    assert "-m http.server 0 --bind 127.0.0.1" in entry["cmdline"]
    assert entry["managed"] is True
    assert entry["managed_by"] == "command line word 'http.server'"
    assert result["managed_pids"] == [proc.pid] and result["foreign_pids"] == []


def test_without_a_matching_service_the_listener_is_foreign(server):
    proc, port = server
    for service in ("vllm-qwen3", None):
        result = procs.find_holders(port, service, None)
        assert result["foreign_pids"] == [proc.pid]
        assert result["listeners"][0]["managed"] is False


def test_free_port_has_no_listener():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound but not listening
        assert procs.find_holders(port, None, None)["listeners"] == []


def test_ipv6_listener():
    if not socket.has_ipv6:
        pytest.skip("no IPv6 in this kernel")
    code = (
        "import socket,sys,time\n"
        "s=socket.socket(socket.AF_INET6)\n"
        "s.bind(('::1',0)); s.listen()\n"
        "print(s.getsockname()[1], flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, stderr=subprocess.DEVNULL
    )
    try:
        line = proc.stdout.readline()
        if not line.strip():
            pytest.skip("cannot bind ::1 here")
        port = int(line)
        (entry,) = procs.find_holders(port, None, None)["listeners"]
        assert (entry["proto"], entry["address"], entry["pid"]) == ("tcp6", "::1", proc.pid)
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_child_of_a_managed_launcher_is_managed(tmp_path):
    launcher = tmp_path / "my-vllm-svc"
    launcher.write_text(f"#!/bin/sh\n{' '.join(SERVER)}\necho done\n")
    launcher.chmod(0o755)
    proc, port = start_server([str(launcher)])
    (entry,) = procs.find_holders(port, "my-vllm-svc", None)["listeners"]
    try:
        assert entry["pid"] != proc.pid  # the python child of the shell script
        assert entry["ppid"] == proc.pid
        assert entry["managed"] is True
        assert entry["managed_by"].endswith(f"of ancestor {proc.pid}")
    finally:
        results = procs.stop([entry["pid"]], grace_s=5)
        proc.wait(timeout=10)
    assert results[0]["result"] == "terminated"


# ----------------------------------------------------------------------------- NPU holders


def test_npu_holders_from_a_real_process_table():
    info = npu_smi.parse(sample("npu-smi-info_with_processes_910B1_elided_3.txt"))
    result = procs.find_holders(None, "vllm", info)
    pids = [h["pid"] for h in result["npu_holders"]]
    assert sorted(pids) == [2441447, 2441448, 2441454]
    by_pid = {h["pid"]: h for h in result["npu_holders"]}
    assert by_pid[2441447]["memory_mb"] == 59618
    assert by_pid[2441454]["npus"] == [{"npu": 7, "chip": 0, "memory_mb": 59802}]
    assert by_pid[2441447]["npu_smi_name"] == "python"
    # those PIDs do not run here: reported as gone, never as killable
    assert all(h["alive"] is False and "not running" in h["note"] for h in by_pid.values())
    assert result["foreign_pids"] == [] and result["managed_pids"] == []


def test_npu_holder_with_a_live_pid_is_grouped_and_classified():
    info = npu_smi.parse(sample("npu-smi-info_A3_26.0.rc1_wide_trimmed_2.txt"))
    assert len(info["processes"]) == 2
    sleeper = spawn_sleeper()
    try:
        for proc in info["processes"]:
            proc["pid"] = sleeper.pid  # one process on two NPUs, like a TP worker
        result = procs.find_holders(None, "sleep", info)
        (holder,) = result["npu_holders"]
        assert holder["pid"] == sleeper.pid and holder["alive"] is True
        assert len(holder["npus"]) == 2
        assert holder["memory_mb"] == sum(p["memory_mb"] for p in info["processes"])
        assert holder["managed"] is True
        assert procs.find_holders(None, "vllm", info)["foreign_pids"] == [sleeper.pid]
    finally:
        sleeper.kill()
        sleeper.wait(timeout=10)


# ----------------------------------------------------------------------------- owners


def test_cgroup_owner_formats():
    cid = "3f4e" * 16
    assert procs.cgroup_owner(f"0::/system.slice/docker-{cid}.scope\n") == (
        cid,
        f"docker-{cid}.scope",
    )
    assert procs.cgroup_owner(f"12:memory:/docker/{cid}\n1:name=systemd:/docker/{cid}\n")[0] == cid
    assert (
        procs.cgroup_owner(
            f"0::/kubepods.slice/kubepods-burstable.slice/pod1/cri-containerd-{cid}.scope\n"
        )[0]
        == cid
    )
    assert procs.cgroup_owner("0::/system.slice/vllm-qwen3.service\n") == (
        None,
        "vllm-qwen3.service",
    )
    assert procs.cgroup_owner("0::/user.slice/user-0.slice/session-3.scope\n") == (
        None,
        "session-3.scope",
    )
    with open("/proc/self/cgroup", encoding="utf-8") as fh:
        container, _unit = procs.cgroup_owner(fh.read())
    assert container is None or len(container) == 64


def _fake_proc(root, pid, ppid, comm, argv, cgroup, sockets=()):
    d = root / str(pid)
    (d / "fd").mkdir(parents=True)
    # /proc/<pid>/stat: pid (comm) state ppid ... starttime is field 22
    fields = ["S", str(ppid)] + ["0"] * 17 + [str(1000 + pid)] + ["0"] * 10
    (d / "stat").write_text(f"{pid} ({comm}) {' '.join(fields)}\n")
    (d / "status").write_text(
        f"Name:\t{comm}\nState:\tS (sleeping)\nPPid:\t{ppid}\nUid:\t0\t0\t0\t0\n"
    )
    (d / "comm").write_text(comm + "\n")
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (d / "cgroup").write_text(cgroup)
    for i, inode in enumerate(sockets, 3):
        os.symlink(f"socket:[{inode}]", d / "fd" / str(i))


def test_container_and_unit_ownership_on_a_proc_tree(tmp_path):
    """Full pipeline on a /proc tree in the kernel's formats: net/tcp, fd links, cgroups."""
    cid = "a1b2" * 16
    (tmp_path / "net").mkdir()
    header = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt"
        "   uid  timeout inode\n"
    )
    (tmp_path / "net" / "tcp").write_text(
        header + "   0: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000"
        "     0        0 5001 1 0000000000000000 100 0 0 10 0\n"
        + "   1: 0100007F:1F41 00000000:0000 0A 00000000:00000000 00:00000000 00000000"
        "     0        0 5002 1 0000000000000000 100 0 0 10 0\n"
        + "   2: 0100007F:1F40 0100007F:9C40 01 00000000:00000000 00:00000000 00000000"
        "     0        0 5003 1 0000000000000000 100 0 0 10 0\n"
    )
    (tmp_path / "net" / "tcp6").write_text(header)
    _fake_proc(
        tmp_path,
        300,
        1,
        "containerd-shim",
        ["containerd-shim-runc-v2", "-id", cid],
        "0::/system.slice/containerd.service\n",
    )
    _fake_proc(
        tmp_path,
        400,
        300,
        "vllm",
        ["/usr/bin/python3", "/usr/local/bin/vllm", "serve"],
        f"0::/system.slice/docker-{cid}.scope\n",
        sockets=[5001],
    )
    _fake_proc(
        tmp_path,
        410,
        400,
        "VLLMWorker_TP",
        ["VLLM::Worker_TP0"],
        f"0::/system.slice/docker-{cid}.scope\n",
    )
    _fake_proc(
        tmp_path,
        500,
        1,
        "python3",
        ["python3", "train.py"],
        "0::/system.slice/vllm-qwen3.service\n",
        sockets=[5002],
    )
    npu_info = {
        "processes": [
            {"npu": 0, "chip": 0, "pid": 410, "name": "VLLMWorker_TP", "memory_mb": 50000},
            {"npu": 1, "chip": 0, "pid": 500, "name": "python3", "memory_mb": 3000},
        ]
    }
    names = {cid: "vllm-qwen3-4b"}
    by_name = procs.find_holders(8000, "vllm-qwen3-4b", npu_info, str(tmp_path), names)
    (listener,) = by_name["listeners"]
    assert (listener["pid"], listener["address"], listener["port"]) == (400, "0.0.0.0", 8000)
    assert listener["container_id"] == cid and listener["container_name"] == "vllm-qwen3-4b"
    assert listener["managed_by"] == "container vllm-qwen3-4b"
    holders = {h["pid"]: h for h in by_name["npu_holders"]}
    assert holders[410]["managed"] is True  # worker inside the container
    assert holders[500]["managed"] is False
    assert [h["pid"] for h in by_name["npu_holders"]] == [500, 410]  # foreign listed first
    by_id = procs.find_holders(8000, cid[:12], npu_info, str(tmp_path), names)
    assert by_id["listeners"][0]["managed_by"] == f"container {cid[:12]}"
    by_unit = procs.find_holders(8001, "vllm-qwen3", npu_info, str(tmp_path), names)
    assert by_unit["listeners"][0]["pid"] == 500
    assert by_unit["listeners"][0]["managed_by"] == "systemd unit vllm-qwen3.service"
    assert by_unit["managed_pids"] == [500] and by_unit["foreign_pids"] == [410]
    # "vllm" matches the command word /usr/local/bin/vllm of pid 400 (and its worker)
    assert procs.find_holders(8000, "vllm", None, str(tmp_path), names)["managed_pids"] == [400]


# ----------------------------------------------------------------------------- stop


def test_stop_terminates_gracefully(server):
    proc, _port = server
    (result,) = procs.stop([proc.pid], grace_s=5)
    assert result == {"pid": proc.pid, "result": "terminated", "detail": "SIGTERM"}
    assert proc.wait(timeout=5) == -signal.SIGTERM


def test_stop_kills_what_ignores_sigterm():
    proc = subprocess.Popen(
        ["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "ready"  # the trap is in place
    started = time.monotonic()
    (result,) = procs.stop([proc.pid], grace_s=0.5)
    assert result["result"] == "killed"
    assert proc.wait(timeout=5) == -signal.SIGKILL
    assert time.monotonic() - started < 5


def test_stop_refuses_init_and_itself():
    results = {r["pid"]: r["result"] for r in procs.stop([1, os.getpid(), os.getppid()])}
    assert results == {1: "refused", os.getpid(): "refused", os.getppid(): "refused"}


def test_stop_not_running_and_bad_pids():
    dead = subprocess.Popen(["true"])
    dead.wait()
    assert procs.stop([dead.pid]) == [{"pid": dead.pid, "result": "not-running", "detail": ""}]
    with pytest.raises(InputError):
        procs.stop(["123"])


def test_reused_pid_counts_as_gone(server):
    proc, _port = server
    start = procs.process_info(proc.pid)["start_time"]
    assert procs._gone(proc.pid, start) is False
    assert procs._gone(proc.pid, start + 1) is True  # another process got this PID


# ----------------------------------------------------------------------------- CLI


def test_cli_kill_leaves_foreign_processes_alone(server, capsys):
    proc, port = server
    rc = main(
        [
            "procs",
            "--port",
            str(port),
            "--service",
            "vllm-qwen3",
            "--kill",
            "--json",
            "--npu-smi-file",
            str(SAMPLES / "npu-smi-info_910B4_anon_busid_10.txt"),
        ]
    )
    assert rc == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["stopped"] == [] and doc["left_alone"] == [proc.pid]
    time.sleep(0.2)
    assert alive(proc)
    rc = main(
        [
            "procs",
            "--port",
            str(port),
            "--service",
            "vllm-qwen3",
            "--kill-foreign",
            "--grace",
            "5",
            "--npu-smi-file",
            str(SAMPLES / "npu-smi-info_910B4_anon_busid_10.txt"),
        ]
    )
    assert rc == 0
    assert f"pid {proc.pid}: terminated" in capsys.readouterr().out
    assert proc.wait(timeout=5) == -signal.SIGTERM


def test_cli_kill_ends_the_managed_service(server, capsys):
    proc, port = server
    rc = main(
        [
            "procs",
            "--port",
            str(port),
            "--service",
            "http.server",
            "--kill",
            "--npu-smi-file",
            str(SAMPLES / "npu-smi-info_910B4_anon_busid_10.txt"),
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "managed" in out and f"pid {proc.pid}: terminated" in out
    assert proc.wait(timeout=5) == -signal.SIGTERM


def test_cli_report_exit_codes(server, capsys):
    proc, port = server
    npu = str(SAMPLES / "npu-smi-info_with_processes_910B1_elided_3.txt")
    assert main(["procs", "--port", str(port), "--npu-smi-file", npu]) == 1  # foreign holder
    out = capsys.readouterr().out
    assert "FOREIGN" in out and "2441447" in out and "gone" in out
    assert (
        main(["procs", "--port", str(port), "--service", "http.server", "--npu-smi-file", npu]) == 0
    )
    assert alive(proc)


def run_cli(argv):
    try:
        return main(argv)
    except SystemExit as exc:  # argparse usage errors
        return exc.code


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--port", "http"], "not a port number"),
        (["--port", "70000"], "outside 1-65535"),
        (["--kill"], "needs --service"),
        (["--npu-smi-file", "/nonexistent/npu.txt"], "no such file"),
    ],
)
def test_cli_bad_arguments_exit_2(argv, message, capsys):
    assert run_cli(["procs", *argv]) == 2
    assert message in capsys.readouterr().err


def test_cli_garbage_npu_smi_file(tmp_path, capsys):
    for content in (b"", b"\x00\x01\xff\xfe binary", b"hello\nworld\n"):
        path = tmp_path / "npu.txt"
        path.write_bytes(content)
        assert main(["procs", "--npu-smi-file", str(path)]) == 2
        err = capsys.readouterr().err
        assert str(path) in err and err.count("\n") == 1 and "Traceback" not in err


def test_find_holders_bad_arguments():
    for port in ("8000", 0, 65536, True):
        with pytest.raises(InputError):
            procs.find_holders(port, None, None)
    with pytest.raises(InputError):
        procs.find_holders(None, None, ["not", "a", "dict"])
