"""Image build script: Dockerfile inputs, input hashing, skip-when-unchanged, the host image.

The first group needs no Docker engine; tests marked ``docker`` build real images.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest

from ascend_sim import images
from ascend_sim.images import ImageError

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable


def _docker_ok() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0


needs_docker = pytest.mark.skipif(not _docker_ok(), reason="no Docker engine answers")


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "ascend_sim.images", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO / "src"), **(env or {})},
        check=False,
    )


def _write(root: Path, rel: str, text: str, mode: int = 0o644) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    p.chmod(mode)
    return p


# --------------------------------------------------------------------------- Dockerfile parsing


def test_copy_sources_handles_continuations_flags_json_stages_and_urls():
    text = """\
# comment COPY nothing
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE} AS build
COPY --chown=root:root docker/a.sh \\
     docker/b.sh /usr/local/bin/
COPY ["src/pkg", "/opt/pkg"]
COPY --from=build /out /out
ADD https://example.invalid/x.tar.gz /tmp/
ADD files/*.txt /etc/
RUN echo COPY not/this /x
"""
    assert images.copy_sources(text) == ["docker/a.sh", "docker/b.sh", "src/pkg", "files/*.txt"]


def test_context_files_of_the_host_image_name_what_it_copies():
    files = images.context_files("docker/sim-host/Dockerfile")
    assert "docker/sim-host/Dockerfile" in files
    assert "docker/sim-host/entrypoint.sh" in files
    assert "docker/sim-host/npu-smi" in files
    assert "src/ascend_sim/fleet.py" in files
    assert "src/ascend_deploy/errors.py" in files
    assert not [f for f in files if "__pycache__" in f or f.endswith(".pyc")]
    assert "tests/conftest.py" not in files


def test_inputs_hash_follows_files_args_and_base(tmp_path):
    _write(tmp_path, "Dockerfile", "FROM x\nCOPY app /app\n")
    _write(tmp_path, "app/run.sh", "echo 1\n", 0o755)
    files = images.context_files("Dockerfile", tmp_path)
    assert files == ["Dockerfile", "app/run.sh"]
    h0 = images.inputs_hash(files, {"A": "1"}, "sha256:base", tmp_path)
    assert h0 == images.inputs_hash(files, {"A": "1"}, "sha256:base", tmp_path)
    assert h0 != images.inputs_hash(files, {"A": "2"}, "sha256:base", tmp_path)
    assert h0 != images.inputs_hash(files, {"A": "1"}, "sha256:other", tmp_path)
    (tmp_path / "app/run.sh").chmod(0o644)
    assert h0 != images.inputs_hash(files, {"A": "1"}, "sha256:base", tmp_path)
    (tmp_path / "app/run.sh").chmod(0o755)
    _write(tmp_path, "app/run.sh", "echo 2\n", 0o755)
    assert h0 != images.inputs_hash(files, {"A": "1"}, "sha256:base", tmp_path)
    # a file outside the COPY lines changes nothing
    _write(tmp_path, "app/run.sh", "echo 1\n", 0o755)
    _write(tmp_path, "README", "unrelated\n")
    assert images.context_files("Dockerfile", tmp_path) == files
    assert h0 == images.inputs_hash(files, {"A": "1"}, "sha256:base", tmp_path)


def test_context_tar_is_deterministic_and_keeps_exec_bits(tmp_path):
    _write(tmp_path, "Dockerfile", "FROM x\nCOPY bin /bin\n")
    _write(tmp_path, "bin/tool", "#!/bin/sh\n", 0o755)
    _write(tmp_path, "bin/data.txt", "d\n")
    files = images.context_files("Dockerfile", tmp_path)
    blob = images.context_tar(files, tmp_path)
    assert blob == images.context_tar(files, tmp_path)
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert set(members) == {"Dockerfile", "bin", "bin/tool", "bin/data.txt"}
    assert members["bin/tool"].mode == 0o755
    assert members["bin/data.txt"].mode == 0o644
    assert members["bin/tool"].mtime == 0


def test_missing_dockerfile_and_copy_source_are_input_errors(tmp_path):
    with pytest.raises(ImageError, match="Dockerfile is missing") as exc:
        images.context_files("docker/none/Dockerfile", tmp_path)
    assert exc.value.exit_code == 2
    _write(tmp_path, "Dockerfile", "FROM x\nCOPY src/gone /opt/\n")
    with pytest.raises(ImageError, match="'src/gone' does not exist") as exc:
        images.context_files("Dockerfile", tmp_path)
    assert exc.value.exit_code == 2


def test_binary_dockerfile_is_an_input_error(tmp_path):
    (tmp_path / "Dockerfile").write_bytes(b"\xff\xfe\x00\x01garbage")
    with pytest.raises(ImageError, match="cannot read Dockerfile") as exc:
        images.context_files("Dockerfile", tmp_path)
    assert exc.value.exit_code == 2


def test_unknown_row_on_the_command_line_is_one_line_exit_2():
    proc = _cli("build", "--row", "v9.9.9")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "unknown vllm-ascend row(s) v9.9.9" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_image_name_is_one_line_exit_2():
    proc = _cli("build", "--only", "nosuch")
    assert proc.returncode == 2
    assert "unknown image(s) nosuch" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_rows_match_the_compat_matrix():
    text = (REPO / "tests" / "data" / "compat-matrix.yaml").read_text(encoding="utf-8")
    yaml = pytest.importorskip("yaml")
    rows = {r["vllm_ascend"]: r for r in yaml.safe_load(text)}
    for tag, args in images.VLLM_ROWS.items():
        row = rows[tag]
        assert args["VLLM_ASCEND_VERSION"] == tag.lstrip("v")
        assert args["VLLM_VERSION"] == str(row["vllm"]).lstrip("v")
        assert args["CANN_VERSION"] == str(row["cann"])
        assert args["TORCH_VERSION"] == str(row["torch"])
        assert args["TORCH_NPU_VERSION"] == str(row["torch_npu"])
        assert args["HARDWARE"] in row["hardware"]


def test_import_rootfs_refuses_a_directory_that_is_not_debian(tmp_path):
    (tmp_path / "bin").mkdir()
    with pytest.raises(ImageError, match="not a debootstrap Debian tree") as exc:
        images.import_rootfs(tmp_path, "ascend-sim/never:created")
    assert exc.value.exit_code == 2


# --------------------------------------------------------------------------- real builds


@pytest.fixture
def tiny_repo(tmp_path):
    _write(
        tmp_path,
        "docker/t/Dockerfile",
        "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nCOPY docker/t/msg /msg\n",
    )
    _write(tmp_path, "docker/t/msg", "one\n")
    repo_tag = f"ascend-sim/test-images-{uuid.uuid4().hex[:8]}"
    yield tmp_path, repo_tag
    out = subprocess.run(
        ["docker", "images", "--format", "{{.Repository}}:{{.Tag}}", repo_tag],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    if out:
        subprocess.run(["docker", "rmi", "-f", *out], capture_output=True, check=False)


@pytest.mark.docker
@needs_docker
def test_build_skips_unchanged_inputs_and_rebuilds_changed_ones(tiny_repo):
    root, repo_tag = tiny_repo
    base = images.ensure_base(None)
    spec = images.ImageSpec(
        "t", "docker/t/Dockerfile", (f"{repo_tag}:latest",), {"X": "1"}, repo_tag
    )
    first = images.build(spec, base, repo=root)
    assert first.built
    assert images.image_label(spec.primary, images.HASH_LABEL) == first.inputs_hash
    assert images.image_id(f"{repo_tag}:{first.inputs_hash[:12]}") == first.image_id
    again = images.build(spec, base, repo=root)
    assert not again.built
    assert again.image_id == first.image_id
    _write(root, "docker/t/msg", "two\n")
    changed = images.build(spec, base, repo=root)
    assert changed.built
    assert changed.inputs_hash != first.inputs_hash
    # the stale hash tag is pruned; the new one names the new image
    assert images.image_id(f"{repo_tag}:{first.inputs_hash[:12]}") is None
    assert images.image_id(f"{repo_tag}:{changed.inputs_hash[:12]}") == changed.image_id
    out = subprocess.run(
        ["docker", "run", "--rm", spec.primary, "cat", "/msg"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == "two\n"


@pytest.mark.docker
@needs_docker
def test_explicit_base_that_cannot_be_found_is_exit_2():
    proc = _cli("build", "--only", "host", "--base", "ascend-sim/no-such-base:never")
    assert proc.returncode == 2
    assert "base image ascend-sim/no-such-base:never is not present" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.fixture(scope="module")
def host_image():
    if not _docker_ok():
        pytest.skip("no Docker engine answers")
    proc = _cli("build", "--only", "host", "--json")
    assert proc.returncode == 0, proc.stderr
    first = json.loads(proc.stdout)[0]
    return first


@pytest.mark.docker
def test_host_image_build_is_skipped_when_nothing_changed(host_image):
    # Other work may edit src/ between two builds; then the hash differs and a rebuild is right.
    previous = host_image
    for _ in range(3):
        proc = _cli("build", "--only", "host", "--json")
        assert proc.returncode == 0, proc.stderr
        again = json.loads(proc.stdout)[0]
        if again["inputs_hash"] == previous["inputs_hash"]:
            break
        previous = again
    assert again["inputs_hash"] == previous["inputs_hash"], "inputs kept changing"
    assert again["built"] is False
    assert again["image_id"] == previous["image_id"]
    assert images.image_id(f"{images.HOST_REPO}:{again['inputs_hash'][:12]}") == again["image_id"]


def _in_host(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", cmd[0], f"{images.HOST_REPO}:latest", *cmd[1:]],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.docker
def test_host_image_has_what_ansible_and_the_emulators_need(host_image):
    probe = (
        "import docker, requests, ascend_sim.fleet, ascend_deploy.errors, shutil, pwd, json;"
        "print(json.dumps({'docker_sdk': docker.__version__,"
        " 'pkg': ascend_sim.fleet.__file__,"
        " 'tools': [bool(shutil.which(t)) for t in"
        "   ('dockerd', 'docker', 'ip', 'ps', 'tini', 'npu-smi', 'iptables')],"
        " 'user': pwd.getpwnam('HwHiAiUser').pw_dir}))"
    )
    proc = _in_host("python3", "-c", probe)
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout)
    assert facts["pkg"].startswith("/opt/ascend-sim/src/ascend_sim/")
    assert all(facts["tools"]), facts
    assert facts["user"] == "/home/HwHiAiUser"
    wrapper = _in_host("cat", "/usr/local/bin/npu-smi").stdout
    assert "ascend_sim.npu_smi_emulator" in wrapper


@pytest.mark.docker
def test_host_entrypoint_fails_loudly_on_an_unknown_preset(host_image):
    proc = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "-e",
            "ASCEND_SIM_PRESET=no-such-preset",
            f"{images.HOST_REPO}:latest",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert "unknown preset 'no-such-preset'" in proc.stderr


@pytest.mark.docker
def test_host_entrypoint_needs_a_preset_or_a_state_file(host_image):
    proc = subprocess.run(
        ["docker", "run", "--rm", f"{images.HOST_REPO}:latest"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert "ASCEND_SIM_PRESET is not set" in proc.stderr


@pytest.mark.docker
@pytest.mark.slow
@needs_docker
@pytest.mark.skipif(shutil.which("debootstrap") is None, reason="debootstrap is not installed")
@pytest.mark.skipif(os.geteuid() != 0, reason="debootstrap needs root")
def test_debootstrap_base_builds_a_usable_image():
    tag = f"ascend-sim/test-base-{uuid.uuid4().hex[:8]}:bookworm"
    try:
        iid = images.debootstrap_base(tag)
        assert iid.startswith("sha256:")
        out = subprocess.run(
            ["docker", "run", "--rm", tag, "cat", "/etc/debian_version"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert out.startswith("12.")
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)
