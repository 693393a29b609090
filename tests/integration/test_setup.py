"""The README's two commands set the machine up, or stop at once naming the cause and the fix.

`make demo` and `make test` run docker/ci-setup.sh first. These tests run them for real in the
situations a fresh machine has: no Docker engine answering (DOCKER_HOST at a dead socket), no
docker binary at all (a PATH without it, as a non-root user), an engine that refuses the user;
and, as root, the set-up starting a Docker engine itself (a second dockerd of its own, in its own
network namespace, on its own socket and data root, stopped afterwards; the machine's engine and
interfaces are never touched).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from conftest import REPO

SETUP = REPO / "docker" / "ci-setup.sh"
NOBODY = 65534
IS_ROOT = os.geteuid() == 0
# A python3 with venv and ensurepip that a non-root user can run.
SYSTEM_PYTHON = "/usr/bin/python3"
SETPRIV = shutil.which("setpriv")
# `make test` runs these tests inside make: its MAKELEVEL/MAKEFLAGS would make the child print
# "make[1]: Entering directory" lines and inherit the parent's flags.
OUTER_MAKE = ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without the enclosing make's variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in OUTER_MAKE}
    return {**env, **extra}


def can_unshare(*flags: str) -> bool:
    return bool(shutil.which("unshare")) and (
        subprocess.run(["unshare", *flags, "true"], capture_output=True, check=False).returncode
        == 0
    )


def run(cmd: list[str], env: dict[str, str], timeout: float = 60, user: int | None = None):
    if user is not None:
        cmd = [SETPRIV or "setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    t0 = time.monotonic()
    done = subprocess.run(
        cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - t0


def dead_socket(tmp_path: Path) -> str:
    return f"unix://{tmp_path}/no-engine.sock"


def test_readme_commands_start_with_the_setup_and_ci_runs_make_test():
    readme = (REPO / "README.md").read_text()
    demo = readme.split("## Try it without an NPU", 1)[1].split("\n## ", 1)[0]
    tests = readme.split("## Tests", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"^\s+make demo\b", demo, re.M) and re.search(r"^\s+make test\b", tests, re.M)
    assert "`bash .ci/run`" in tests
    ci = [line.strip() for line in (REPO / ".ci/run").read_text().splitlines()]
    assert [line for line in ci if line.startswith("make ")][-1] == "make test"
    for target in ("demo", "test"):
        dry = subprocess.run(
            ["make", "-n", target],
            cwd=REPO,
            env=clean_env(),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        assert dry[0] == "sh docker/ci-setup.sh --no-images", (target, dry[:3])


@pytest.mark.parametrize("target", ["demo", "test"])
def test_make_stops_at_once_when_no_engine_answers(tmp_path, target):
    env = clean_env(DOCKER_HOST=dead_socket(tmp_path))
    rc, out, seconds = run(["make", target], env)
    assert rc != 0 and seconds < 15, out[-2000:]
    assert f"no Docker engine answers at DOCKER_HOST={dead_socket(tmp_path)}" in out
    assert "Cannot connect to the Docker daemon" in out
    assert "unset DOCKER_HOST" in out
    assert "debootstrap" not in out and "ruff" not in out  # stopped before anything else


def test_image_build_names_the_engine_not_debootstrap(tmp_path):
    env = clean_env(DOCKER_HOST=dead_socket(tmp_path))
    rc, out, seconds = run([str(REPO / "docker/build-images.sh")], env)
    assert rc == 1 and seconds < 15, out
    assert f"images: error: no Docker engine answers at {dead_socket(tmp_path)}" in out
    assert "ci-setup.sh --no-images" in out and "debootstrap" not in out


@pytest.fixture
def open_tmp():
    """A directory any user can read (pytest's tmp_path is under a 0700 directory)."""
    path = Path(tempfile.mkdtemp(prefix="setup-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def tool_dir(tmp_path: Path, tools: list[str]) -> Path:
    """A PATH with just these tools (and no docker)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        found = SYSTEM_PYTHON if tool == "python3" else shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    return bin_dir


needs_nobody = pytest.mark.skipif(
    not IS_ROOT or not SETPRIV or not os.access(SYSTEM_PYTHON, os.X_OK),
    reason="needs root (to run as nobody), setpriv and /usr/bin/python3",
)


@needs_nobody
def test_non_root_without_docker_is_told_the_command(open_tmp):
    bin_dir = tool_dir(open_tmp, ["make", "sh", "python3", "id", "dirname", "grep", "tail"])
    env = {"PATH": str(bin_dir), "HOME": str(open_tmp), "LANG": "C"}
    rc, out, seconds = run(["make", "demo"], env, user=NOBODY)
    assert rc != 0 and seconds < 15, out
    assert "setup: error: missing: docker.io. Run as root: " in out
    assert f"'sh {REPO}/docker/ci-setup.sh --no-images'" in out
    assert "apt-get install docker.io debootstrap debian-archive-keyring" in out


@needs_nobody
def test_non_root_refused_by_the_engine_is_told_the_docker_group(tmp_path):
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        pytest.skip("the machine's Docker engine does not answer")
    env = clean_env(HOME=str(tmp_path))
    env.pop("DOCKER_HOST", None)
    rc, out, _ = run(["sh", str(SETUP), "--no-images"], env, user=NOBODY)
    if rc == 0:
        pytest.skip("the Docker socket is open to every user here")
    assert "setup: error: the Docker engine refuses this user (permission denied" in out
    assert "usermod -aG docker nobody" in out


@pytest.mark.skipif(
    not IS_ROOT or not shutil.which("dockerd") or not can_unshare("--net"),
    reason="needs root, dockerd and unshare --net",
)
def test_setup_starts_an_engine_when_none_answers():
    # The engine it starts runs in a network namespace of its own (unshare --net): dockerd with
    # --bridge none deletes the docker0 interface of its namespace, which must never be the
    # machine's. Own data root, exec root, pid file and config; short paths, since dockerd's and
    # containerd's unix sockets live under them.
    base = Path(tempfile.mkdtemp(prefix="ds-", dir="/tmp"))
    (base / "daemon.json").write_text("{}")
    bridges_before = bridges()
    sock = f"unix://{base}/d.sock"
    env = {
        **clean_env(),
        "DOCKER_HOST": sock,
        "DOCKERD_LOG": str(base / "dockerd.log"),
        "DOCKERD_WAIT_S": "60",
        "DOCKERD_ARGS": f"--config-file {base}/daemon.json --data-root {base}/data"
        f" --exec-root {base}/x --pidfile {base}/d.pid --bridge none --iptables=false"
        " --ip6tables=false",
    }
    try:
        cmd = ["unshare", "--net", "sh", str(SETUP), "--no-images"]
        rc, out, seconds = run(cmd, env, timeout=120)
        assert rc == 0 and seconds < 60, out
        assert "no Docker engine answers (Cannot connect to the Docker daemon" in out
        assert re.search(r"the Docker engine answers after \d+ s", out), out
        info = subprocess.run(
            ["docker", "info", "--format", "{{json .DockerRootDir}}"],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert json.loads(info.stdout) == f"{base}/data"
        # Run again: the engine answers, nothing is started.
        rc, again, _ = run(["sh", str(SETUP), "--no-images"], env)
        assert rc == 0 and "starting dockerd" not in again, again
    finally:
        pid_file = base / "dockerd.log.pid"
        if pid_file.exists():
            stop(int(pid_file.read_text()))
        shutil.rmtree(base, ignore_errors=True)
    # The machine's bridges (docker0 among them) are all still there.
    assert bridges_before <= bridges()


def bridges() -> set[str]:
    return {n for n in os.listdir("/sys/class/net") if os.path.isdir(f"/sys/class/net/{n}/bridge")}


FRESH_MACHINE = """
set -u
# This machine as a fresh one sees it: no engine on the default socket, empty /var/lib/docker.
mount -t tmpfs tmpfs /run && mount -t tmpfs tmpfs /var/lib/docker && mount -t tmpfs tmpfs /var/log
unset DOCKER_HOST DOCKERD_ARGS
echo "before: $(docker info --format '{{.ServerVersion}}' 2>&1 | tail -n 1)"
make -C "$1" setup; echo "setup rc=$?"
echo "after: $(docker info --format '{{.DockerRootDir}}' 2>&1 | tail -n 1)"
make -C "$1" setup; echo "again rc=$?"
pid=$(cat /var/log/dockerd-ci.log.pid) && kill "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
kill -9 "$pid" 2>/dev/null; true
"""


@pytest.mark.skipif(
    not IS_ROOT or not shutil.which("dockerd") or not can_unshare("--mount", "--net"),
    reason="needs root, dockerd and unshare --mount --net",
)
def test_make_setup_starts_dockerd_on_a_machine_without_an_engine(tmp_path):
    # A private mount and network namespace: its /run (docker.sock, pid files), /var/lib/docker
    # and /var/log are empty, its interfaces its own; the machine's engine is not seen or touched.
    script = tmp_path / "fresh.sh"
    script.write_text(FRESH_MACHINE)
    before = bridges()
    cmd = ["unshare", "--mount", "--net", "--propagation", "private", "sh", str(script), str(REPO)]
    rc, out, seconds = run(cmd, clean_env(), timeout=180)
    assert rc == 0, out
    assert "before: Cannot connect to the Docker daemon at unix:///var/run/docker.sock" in out
    assert "starting dockerd (log: /var/log/dockerd-ci.log)" in out
    assert "setup rc=0" in out and "after: /var/lib/docker" in out, out
    assert "again rc=0" in out and out.count("starting dockerd") == 1, out
    assert seconds < 90, out
    assert before <= bridges()


def stop(pid: int) -> None:
    """End the dockerd this test started (SIGTERM, then SIGKILL after 20 s)."""
    for sig, wait_s in ((15, 20.0), (9, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)
