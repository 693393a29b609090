"""procs: real listeners and processes, npu-smi process tables, ownership, stopping."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from conftest import HTTP_SERVER, SAMPLES, sample, spawn_sleeper, start_http_server

from ascend_deploy.cli import main
from ascend_deploy.errors import InputError
from ascend_deploy.host import npu_smi, procs


def alive(proc) -> bool:
    return proc.poll() is None


# ----------------------------------------------------------------------------- listeners


def test_listener_found_through_proc_net_tcp(http_listener):
    proc, port = http_listener
    result = procs.find_holders(port, "http.server", None, containers={})
    (entry,) = result["listeners"]
    assert entry["pid"] == proc.pid
    assert (entry["address"], entry["port"], entry["proto"]) == ("127.0.0.1", port, "tcp")
    assert "-m http.server 0 --bind 127.0.0.1" in entry["cmdline"]
    # A command-line word equal to the service name never makes a process ours (issue 11 E).
    assert entry["managed"] is False
    assert result["managed_pids"] == [] and result["foreign_pids"] == [proc.pid]


def test_main_process_of_a_labelled_container_is_managed(http_listener):
    proc, port = http_listener
    ours = {"e" * 64: {"name": "qwen3-0", "service": "qwen3", "pid": proc.pid}}
    result = procs.find_holders(port, "qwen3", None, containers=ours)
    (entry,) = result["listeners"]
    assert entry["managed"] is True
    assert entry["managed_by"] == "container qwen3-0 (ascend-deploy.service=qwen3)"
    assert result["managed_pids"] == [proc.pid] and result["foreign_pids"] == []
    # The same container labelled for another service is foreign.
    other = {"e" * 64: {"name": "qwen3-0", "service": "other", "pid": proc.pid}}
    assert procs.find_holders(port, "qwen3", None, containers=other)["foreign_pids"] == [proc.pid]


def test_without_a_matching_service_the_listener_is_foreign(http_listener):
    proc, port = http_listener
    for service in ("vllm-qwen3", None):
        result = procs.find_holders(port, service, None, containers={})
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
    launcher.write_text(f"#!/bin/sh\n{' '.join(HTTP_SERVER)}\necho done\n")
    launcher.chmod(0o755)
    proc, port = start_http_server([str(launcher)])
    ours = {"f" * 64: {"name": "svc-0", "service": "svc", "pid": proc.pid}}
    (entry,) = procs.find_holders(port, "svc", None, containers=ours)["listeners"]
    try:
        assert entry["pid"] != proc.pid  # the python child of the shell script
        assert entry["ppid"] == proc.pid
        assert entry["managed"] is True
        assert entry["managed_by"].endswith(f"of ancestor {proc.pid}")
        # its launcher's name is no claim: without the labelled container it is foreign
        by_name = procs.find_holders(port, "my-vllm-svc", None, containers={})
        assert by_name["listeners"][0]["managed"] is False
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
        ours = {"a" * 64: {"name": "vllm-0", "service": "vllm", "pid": sleeper.pid}}
        result = procs.find_holders(None, "vllm", info, containers=ours)
        (holder,) = result["npu_holders"]
        assert holder["pid"] == sleeper.pid and holder["alive"] is True
        assert len(holder["npus"]) == 2
        assert holder["memory_mb"] == sum(p["memory_mb"] for p in info["processes"])
        assert holder["managed"] is True
        assert procs.find_holders(None, "sleep", info, containers={})["foreign_pids"] == [
            sleeper.pid
        ]
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
    labelled = {cid: {"name": "qwen3-0", "service": "qwen3", "pid": None}}
    ours = procs.find_holders(8000, "qwen3", npu_info, str(tmp_path), labelled)
    (listener,) = ours["listeners"]
    assert (listener["pid"], listener["address"], listener["port"]) == (400, "0.0.0.0", 8000)
    assert listener["container_id"] == cid and listener["container_name"] == "qwen3-0"
    assert listener["managed_by"] == "container qwen3-0 (ascend-deploy.service=qwen3)"
    holders = {h["pid"]: h for h in ours["npu_holders"]}
    assert holders[410]["managed"] is True  # worker inside the container (found by its cgroup)
    assert holders[500]["managed"] is False
    assert [h["pid"] for h in ours["npu_holders"]] == [500, 410]  # foreign listed first
    # Names decide nothing: the same container without our label (named like the service),
    # a systemd unit named like it, "vllm" as a command word: all foreign.
    named = {cid: "vllm-qwen3"}
    for service, port in (("vllm-qwen3", 8000), ("vllm-qwen3", 8001), ("vllm", 8000)):
        found = procs.find_holders(port, service, npu_info, str(tmp_path), named)
        assert found["managed_pids"] == [], (service, port)
        assert found["foreign_pids"] == ([400, 410, 500] if port == 8000 else [410, 500])
    assert procs.find_holders(8000, cid[:12], None, str(tmp_path), named)["managed_pids"] == []


# ----------------------------------------------------------------------------- stop


def test_stop_terminates_gracefully(http_listener):
    proc, _port = http_listener
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


def test_reused_pid_counts_as_gone(http_listener):
    proc, _port = http_listener
    start = procs.process_info(proc.pid)["start_time"]
    assert procs._gone(proc.pid, start) is False
    assert procs._gone(proc.pid, start + 1) is True  # another process got this PID


# ----------------------------------------------------------------------------- CLI


def test_cli_kill_leaves_foreign_processes_alone(http_listener, capsys):
    proc, port = http_listener
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


IMAGE = "quay.io/ascend/vllm-ascend:v0.23.0"  # any image with python3
LISTEN = (
    "import socket,sys,time; s=socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); "
    "s.listen(); time.sleep(300)"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _docker_run(name: str, port: int, labels: dict[str, str]) -> None:
    argv = ["docker", "run", "-d", "--rm", "--name", name, "--network", "host"]
    for key, value in labels.items():
        argv += ["--label", f"{key}={value}"]
    subprocess.run(
        [*argv, IMAGE, "python3", "-c", LISTEN, str(port)], check=True, capture_output=True
    )
    deadline = time.monotonic() + 30
    while not procs.listening_sockets(port=port):
        assert time.monotonic() < deadline, f"{name} does not listen on {port}"
        time.sleep(0.2)


def _docker_ready() -> bool:
    import shutil

    return (
        bool(shutil.which("docker"))
        and subprocess.run(
            ["docker", "image", "inspect", IMAGE], capture_output=True, check=False
        ).returncode
        == 0
    )


@pytest.mark.docker
def test_cli_real_containers_ours_by_label_foreign_by_name(capsys):
    """A labelled container is ours; one merely named like the service is foreign (issue 11 E)."""
    if not _docker_ready():
        pytest.fail(f"needs Docker and {IMAGE} (docker/build-images.sh)")
    service = f"own-procs-{os.getpid()}"
    ours, theirs = f"{service}-0", service  # the foreign one carries the service's very name
    port_ours, port_theirs = _free_port(), _free_port()
    try:
        _docker_run(ours, port_ours, {"ascend-deploy.service": service})
        _docker_run(theirs, port_theirs, {})
        # a complete npu-smi output with its process table ("No running processes found"):
        # an output that ends before it leaves the NPU unchecked, which is exit 1
        npu = str(SAMPLES / "npu-smi-info_310P3_no_processes_3.txt")
        base = ["procs", "--service", service, "--npu-smi-file", npu, "--json"]
        assert main([*base, "--port", str(port_ours)]) == 0
        (entry,) = json.loads(capsys.readouterr().out)["listeners"]
        assert entry["managed"] is True and entry["container_name"] == ours
        assert main([*base, "--port", str(port_theirs)]) == 1
        (entry,) = json.loads(capsys.readouterr().out)["listeners"]
        assert entry["managed"] is False and entry["container_name"] == theirs
        # --kill ends ours only; the foreign container is left alone and said so
        assert main([*base, "--port", str(port_theirs), "--kill", "--grace", "5"]) == 1
        doc = json.loads(capsys.readouterr().out)
        assert doc["stopped"] == [] and doc["left_alone"] == [entry["pid"]]
        assert main([*base, "--port", str(port_ours), "--kill", "--grace", "5"]) == 0
        # PID 1 of a container ignores SIGTERM without a handler: SIGKILL follows
        assert json.loads(capsys.readouterr().out)["stopped"][0]["result"] in (
            "terminated",
            "killed",
        )
        subprocess.run(["docker", "wait", ours], capture_output=True, timeout=30, check=False)
        running = subprocess.run(
            ["docker", "ps", "--format", "{{.Names}}"], capture_output=True, text=True, check=True
        ).stdout.split()
        assert theirs in running and ours not in running
    finally:
        subprocess.run(["docker", "rm", "-f", ours, theirs], capture_output=True, check=False)


def test_cli_report_exit_codes(http_listener, capsys):
    proc, port = http_listener
    npu = str(SAMPLES / "npu-smi-info_with_processes_910B1_elided_3.txt")
    assert main(["procs", "--port", str(port), "--npu-smi-file", npu]) == 1  # foreign holder
    out = capsys.readouterr().out
    assert "FOREIGN" in out and "2441447" in out and "gone" in out
    # the command word http.server does not make it ours
    assert (
        main(["procs", "--port", str(port), "--service", "http.server", "--npu-smi-file", npu]) == 1
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
