"""run_npu_smi and `ascend-deploy npu-smi show` against real executables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, SAMPLES

from ascend_deploy.errors import CheckFailed, InputError
from ascend_deploy.host import npu_smi

CLI = str(REPO / ".venv" / "bin" / "ascend-deploy")
INFO = SAMPLES / "npu-smi-info_910B4_32GB_24.1.1_partial_7.txt"
MAP = SAMPLES / "npu-smi-info-m_910B4_7.txt"


def fake_npu_smi(tmp_path: Path, body: str, name: str = "npu-smi") -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def printing(tmp_path: Path) -> Path:
    """An npu-smi that prints the saved samples for `info` and `info -m`."""
    return fake_npu_smi(
        tmp_path,
        f'if [ "$1 $2" = "info -m" ]; then /bin/cat "{MAP}"; exit 0; fi\n'
        f'if [ "$1" = "info" ]; then /bin/cat "{INFO}"; exit 0; fi\n'
        'echo "unknown command $*" >&2; exit 1\n',
    )


def test_runs_and_returns_stdout(tmp_path):
    binary = printing(tmp_path)
    text = npu_smi.run_npu_smi(["info"], binary=str(binary))
    assert text == INFO.read_text()
    assert npu_smi.parse(text)["chips"][1]["hbm_used_mb"] == 29356


def test_found_on_path_and_in_fallback_dirs(tmp_path, monkeypatch):
    printing(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "npu-smi 24.1.1" in npu_smi.run_npu_smi(["info"])
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(npu_smi, "FALLBACK_DIRS", (str(tmp_path / "none"), str(tmp_path)))
    assert "npu-smi 24.1.1" in npu_smi.run_npu_smi(["info"])


def test_missing_from_path_says_driver_or_mount(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(npu_smi, "FALLBACK_DIRS", (str(tmp_path),))
    with pytest.raises(CheckFailed, match=r"driver is not installed.*not mounted"):
        npu_smi.run_npu_smi(["info"])


def test_explicit_path_missing_or_not_executable(tmp_path):
    with pytest.raises(InputError, match=f"{tmp_path}/nope: npu-smi not found at this path"):
        npu_smi.run_npu_smi(["info"], binary=str(tmp_path / "nope"))
    plain = tmp_path / "npu-smi"
    plain.write_text("not a program")
    with pytest.raises(InputError, match="is not an executable file"):
        npu_smi.run_npu_smi(["info"], binary=str(plain))
    with pytest.raises(InputError, match="is a directory, not the npu-smi binary") as info:
        npu_smi.run_npu_smi(["info"], binary=str(tmp_path))
    assert "chmod" not in str(info.value)  # no mode to fix on a directory


def test_nonzero_exit_carries_stderr(tmp_path):
    binary = fake_npu_smi(
        tmp_path, 'echo "dcmi module initialize failed. ret is -8005" >&2\nexit 255\n'
    )
    with pytest.raises(CheckFailed) as exc:
        npu_smi.run_npu_smi(["info"], binary=str(binary))
    msg = str(exc.value)
    assert "`npu-smi info` exited with status 255" in msg
    assert "dcmi module initialize failed. ret is -8005" in msg
    assert "\n" not in msg


def test_timeout(tmp_path):
    binary = fake_npu_smi(tmp_path, "exec sleep 5\n")
    with pytest.raises(CheckFailed, match=r"did not finish within 0\.3 s"):
        npu_smi.run_npu_smi(["info"], binary=str(binary), timeout=0.3)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CLI, "npu-smi", *args], capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_cli_show_info_map_and_json(tmp_path):
    binary = str(printing(tmp_path))
    done = run_cli("show", "--npu-smi", binary)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("npu-smi info: driver 24.1.1, 2 NPU(s), 2 chip(s)")
    assert "26838 / 32768" in done.stdout
    done = run_cli("show", "--npu-smi", binary, "--json")
    assert json.loads(done.stdout) == npu_smi.parse(INFO.read_text())
    done = run_cli("show", "--kind", "map", "--npu-smi", binary, "--json")
    assert json.loads(done.stdout)["rows"][2] == {
        "npu": 1, "chip": 0, "logic_id": 1, "chip_name": "Ascend 910B4"
    }  # fmt: skip


def test_cli_show_failures(tmp_path):
    done = run_cli("show", "--npu-smi", str(tmp_path / "absent"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "absent: npu-smi not found at this path" in done.stderr
    broken = fake_npu_smi(
        tmp_path, 'echo "dcmi module initialize failed. ret is -8005" >&2\nexit 1\n'
    )
    done = run_cli("show", "--npu-smi", str(broken))
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "ret is -8005" in done.stderr and "Traceback" not in done.stderr
    empty = fake_npu_smi(tmp_path, "exit 0\n", name="silent")
    done = run_cli("show", "--npu-smi", str(empty))
    assert done.returncode == 2
    assert "`npu-smi info` output: is empty" in done.stderr


# -- bounded reads: a flooding or lingering npu-smi cannot exhaust memory or time --------------
def peak_rss_mb(argv: list[str]) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run ``argv`` from a wrapper that reports its children's peak RSS; (result, MB, s)."""
    wrapper = (
        "import resource, subprocess, sys, time, json\n"
        "t = time.monotonic()\n"
        "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "print(json.dumps([r.returncode, r.stderr, time.monotonic() - t,\n"
        "  resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", wrapper, *argv], capture_output=True, text=True, timeout=120
    )
    rc, stderr, seconds, mb = json.loads(done.stdout)
    return subprocess.CompletedProcess(argv, rc, "", stderr), mb, seconds


def test_flooding_npu_smi_is_stopped_at_8_mib(tmp_path):
    """Reported: a flooding npu-smi reached 5.7 GB in 5 s and died with MemoryError."""
    flood = fake_npu_smi(tmp_path, "exec yes '| 0     910B4     | OK  | 93.4  47  0 / 0 |'\n")
    t0 = time.monotonic()
    with pytest.raises(CheckFailed, match=r"wrote more than 8 MiB of output.*not a working"):
        npu_smi.run_npu_smi(["info"], binary=str(flood), timeout=60)
    assert time.monotonic() - t0 < 10
    done, mb, seconds = peak_rss_mb([CLI, "npu-smi", "show", "--npu-smi", str(flood)])
    assert done.returncode == 1 and "8 MiB" in done.stderr and done.stderr.count("\n") == 1
    assert mb < 150, mb
    assert seconds < 15, seconds


def test_stderr_flood_is_drained_and_capped(tmp_path):
    noisy = fake_npu_smi(
        tmp_path, f'head -c 200000000 /dev/zero | tr "\\0" x >&2\n/bin/cat "{INFO}"\n'
    )
    text = npu_smi.run_npu_smi(["info"], binary=str(noisy), timeout=60)
    assert text == INFO.read_text()
    failing = fake_npu_smi(
        tmp_path, 'head -c 50000000 /dev/zero | tr "\\0" x >&2\nexit 3\n', name="failing"
    )
    with pytest.raises(CheckFailed, match="exited with status 3") as exc:
        npu_smi.run_npu_smi(["info"], binary=str(failing), timeout=60)
    assert len(str(exc.value)) < 800


def test_timeout_kills_what_npu_smi_left_behind(tmp_path):
    """A child holding stdout open after npu-smi exits: the deadline still holds, and the
    child is killed with it."""
    marker = tmp_path / "child.pid"
    lingering = fake_npu_smi(tmp_path, f'sleep 60 & echo $! > "{marker}"\n/bin/cat "{INFO}"\n')
    t0 = time.monotonic()
    with pytest.raises(CheckFailed, match=r"within 1 s"):
        npu_smi.run_npu_smi(["info"], binary=str(lingering), timeout=1)
    assert time.monotonic() - t0 < 3
    pid = int(marker.read_text())
    time.sleep(0.2)
    with open(f"/proc/{pid}/stat") if os.path.exists(f"/proc/{pid}") else open(os.devnull) as fh:
        state = fh.read().split(") ")[-1][:1]
    assert state in ("", "Z"), f"child {pid} still running ({state})"
