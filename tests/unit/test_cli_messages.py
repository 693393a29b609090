"""What the CLI says when it cannot answer: no silent wait, no false all-clear, errors that a
script can read (issue 24).

Real samples, real subprocesses (a pseudo-terminal for stdin), the installed console script.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time

import pytest
from conftest import SAMPLES

from ascend_deploy.cli import main

PARTIAL = SAMPLES / "npu-smi-info_910B4_32GB_24.1.1_partial_7.txt"  # cut before the processes
NO_PROCS = SAMPLES / "npu-smi-info_310P3_no_processes_3.txt"  # "No running processes found"
CLI = [sys.executable, "-m", "ascend_deploy.cli"]


def test_parse_says_the_process_table_is_not_in_the_input(capsys):
    assert main(["npu-smi", "parse", str(PARTIAL)]) == 0
    out = capsys.readouterr().out
    assert "Processes: not in the input" in out and "NPU memory holders unknown" in out
    assert "No processes hold NPU memory" not in out
    assert main(["npu-smi", "parse", str(NO_PROCS)]) == 0
    assert "No processes hold NPU memory." in capsys.readouterr().out


def test_procs_says_not_checked_instead_of_nothing(capsys):
    rc = main(["procs", "--port", "1", "--npu-smi-file", str(PARTIAL)])
    out = capsys.readouterr().out
    assert rc == 1
    assert out.splitlines()[0] == "nothing holds port 1"
    assert "NPU holders: not checked (" in out and "ends before npu-smi's process table" in out
    assert "NPU memory" not in out.splitlines()[0]
    rc = main(["procs", "--port", "1", "--npu-smi-file", str(NO_PROCS)])
    assert rc == 0 and capsys.readouterr().out.strip() == "nothing holds port 1 or NPU memory"


def test_procs_without_npu_smi_is_not_an_all_clear(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # no npu-smi on PATH (nor on this machine)
    if os.path.exists("/usr/local/bin/npu-smi") or os.path.exists("/usr/local/sbin/npu-smi"):
        pytest.skip("this machine has an npu-smi")
    done = subprocess.run([*CLI, "procs"], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert done.stdout.startswith("NPU holders: not checked (npu-smi: not found"), done.stdout
    assert "nothing holds" not in done.stdout


@pytest.mark.parametrize(
    "argv, what",
    [
        (["npu-smi", "parse"], "reading npu-smi output from standard input"),
        (["procs", "--npu-smi-file", "-"], "reading `npu-smi info` output from standard input"),
    ],
)
def test_reading_stdin_on_a_terminal_says_so(argv, what):
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [*CLI, *argv], stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    os.close(follower)
    try:
        seen = b""
        deadline = time.monotonic() + 20
        while what.encode() not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], 0.5)
            if ready:
                seen += os.read(proc.stderr.fileno(), 4096)
        assert what.encode() in seen, seen
        assert b"Ctrl-D" in seen
        os.write(leader, b"\x04")  # Ctrl-D on the terminal: end of input
        proc.wait(timeout=20)
    finally:
        proc.kill()
        os.close(leader)
    assert proc.returncode == 2  # empty input is refused, with its own message


def test_json_failures_print_an_error_object(tmp_path, capsys):
    assert main(["plan", "--model-dir", str(tmp_path / "nope"), "--hbm-total-mb", "65536",
                 "--json"]) == 2  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert doc == {
        "error": f"{tmp_path / 'nope'}: model directory not found",
        "exit_code": 2,
        "command": "ascend-deploy plan",
    }


def test_usage_errors_are_one_line_naming_help():
    done = subprocess.run([*CLI, "plan", "--json"], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("ascend-deploy plan: error: the following arguments are required")
    assert line.endswith("(see ascend-deploy plan --help)")
    assert json.loads(done.stdout)["exit_code"] == 2


def test_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: 600.0)" in out and "(default: 4)" in out and "(default: 128)" in out


def test_verify_says_what_it_waits_for_with_the_bound():
    """A wrong port used to mean up to ten silent minutes."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends
    t0 = time.monotonic()
    done = subprocess.run(
        [*CLI, "verify", "--url", f"http://127.0.0.1:{port}", "--timeout", "7"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and time.monotonic() - t0 < 30
    waits = [line for line in done.stderr.splitlines() if "waiting for the service" in line]
    assert len(waits) >= 2, done.stderr
    assert "Connection refused (try 1, 0 s of 7 s)" in waits[0]
    assert "not ready after 7 s" in done.stdout


def test_a_wrong_kind_names_the_right_one(capsys):
    sample = SAMPLES / "npu-smi-info-m_910B_4.txt"  # `npu-smi info -m`
    assert main(["npu-smi", "parse", "--kind", "info", str(sample)]) == 2
    err = capsys.readouterr().err
    assert "this looks like `npu-smi info -m` output: use --kind map or drop --kind" in err


@pytest.mark.parametrize("value", ["-1", "0"])
def test_a_bad_timeout_is_bad_input_not_a_hung_driver(capsys, value):
    with pytest.raises(SystemExit) as done:
        main(["npu-smi", "show", "--timeout", value])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "expected a number of seconds above 0" in err
    assert "hung" not in err


def test_power_has_one_decimal_in_every_row(capsys):
    assert main(["npu-smi", "parse", str(PARTIAL)]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if "910B4" in line]
    assert [r[5] for r in rows] == ["88.2", "87.0"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["diagnose", "--max-mb", "-1", "README.md"], "--max-mb: expected a number >= 1, got -1"),
        (["diagnose", "--max-mb", "0", "README.md"], "--max-mb: expected a number >= 1, got 0"),
        (
            ["diagnose", "--max-seconds", "0", "README.md"],
            "--max-seconds: expected a number above 0",
        ),
    ],
    ids=["max-mb-negative", "max-mb-zero", "max-seconds-zero"],
)
def test_diagnose_limits_are_positive(capsys, argv, said):
    """--max-mb -1 was accepted, then reported a plain file as an over-expanding archive."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert said in capsys.readouterr().err
