"""Shared test paths, fixtures and runners (one copy for tests/unit and tests/integration).

Test modules import the constants and helpers with ``from conftest import ...``: pytest's default
(prepend) import mode puts ``tests/`` on ``sys.path``. Test files have no ``__init__.py``, so every
test module basename must be unique across ``tests/`` (tests/unit/test_layout.py checks it).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
SAMPLES = DATA / "samples"  # verbatim real outputs; the first line of each names its source


@pytest.fixture
def samples_dir() -> Path:
    return SAMPLES


def sample(name: str) -> str:
    """The text of one verbatim sample file."""
    return (SAMPLES / name).read_text(encoding="utf-8")


# ----------------------------------------------------------------------------- the tiny model

TINY_FP8 = DATA / "tiny-qwen3-fp8"  # the committed trained tiny Qwen3 model (block FP8)


@pytest.fixture(scope="session")
def tiny_bf16(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tiny FP8 model converted to BF16 as the bundle serves it (read-only: copy to change)."""
    from ascend_deploy.fp8.convert import convert_checkpoint

    dst = tmp_path_factory.mktemp("tiny") / "qwen3-tiny"
    convert_checkpoint(str(TINY_FP8), str(dst))
    return str(dst)


_LINEAR_RE = re.compile(r"\.(q|k|v|o|gate|up|down)_proj\.weight$")


def _to_f32(raw, dtype: str):
    import numpy as np

    if dtype == "BF16":
        return (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
    if dtype == "F16":
        return np.frombuffer(raw, dtype=np.float16).astype(np.float32)
    return np.frombuffer(raw, dtype=np.float32).copy()


def _from_f32(values, dtype: str) -> bytes:
    import numpy as np

    if dtype == "BF16":
        # Integers in [-128, 127] are exact in BF16, so dropping the low half is exact.
        return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    if dtype == "F16":
        return values.astype(np.float16).tobytes()
    return values.astype(np.float32).tobytes()


def int8_truncated_copy(src: str, dst: str) -> int:
    """Copy ``src`` to ``dst`` with the linear weights truncated to int8 values (what copying
    float weights into int8 parameters does); its answers are garbage. Returns the count."""
    import numpy as np

    from ascend_deploy.model.files import read_weight_layout

    layout = read_weight_layout(src)
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        p = os.path.join(src, name)
        if os.path.isfile(p):
            shutil.copyfile(p, os.path.join(dst, name))
    changed = 0
    for shard in layout.shards:
        header = layout.headers[shard]
        with open(os.path.join(dst, shard), "r+b") as fh:
            for info in header.tensors.values():
                if not _LINEAR_RE.search(info.name) or info.dtype not in ("BF16", "F16", "F32"):
                    continue
                fh.seek(header.data_offset + info.begin)
                raw = fh.read(info.nbytes)
                vals = np.clip(np.trunc(_to_f32(raw, info.dtype)), -128, 127)
                fh.seek(header.data_offset + info.begin)
                fh.write(_from_f32(vals, info.dtype))
                changed += 1
    return changed


def _load_json(path: str) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _dump_json(path: str, doc: dict) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)


def scales_ignored_copy(src: str, dst: str) -> None:
    """The classic wrong conversion: cast FP8 to BF16 and drop the scales (docs/sources.md);
    its answers are garbage (pitfall 7's signature). Needs numpy, ml_dtypes and safetensors."""
    import ml_dtypes
    import numpy as np
    from safetensors.numpy import save_file

    from ascend_deploy.model.safetensors_header import read_header

    os.makedirs(dst)
    for name in os.listdir(src):
        if not name.endswith(".safetensors"):
            shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))
    cfg_path = os.path.join(dst, "config.json")
    cfg = _load_json(cfg_path)
    cfg.pop("quantization_config", None)
    _dump_json(cfg_path, cfg)
    idx_path = os.path.join(dst, "model.safetensors.index.json")
    index = _load_json(idx_path)
    index["weight_map"] = {
        k: v for k, v in index["weight_map"].items() if not k.endswith("_scale_inv")
    }
    _dump_json(idx_path, index)
    kinds = {
        "F8_E4M3": ml_dtypes.float8_e4m3fn,
        "BF16": ml_dtypes.bfloat16,
        "F32": np.float32,
        "F16": np.float16,
    }
    for shard in sorted(set(index["weight_map"].values())):
        path = os.path.join(src, shard)
        header = read_header(path)
        raw = np.memmap(path, dtype=np.uint8, mode="r")
        out = {}
        for info in header.tensors.values():
            if info.name.endswith("_scale_inv"):
                continue
            data = raw[header.data_offset + info.begin : header.data_offset + info.end]
            arr = data.view(kinds[info.dtype]).reshape(info.shape)
            if info.dtype == "F8_E4M3":
                arr = arr.astype(np.float32).astype(ml_dtypes.bfloat16)
            out[info.name] = np.ascontiguousarray(arr)
        save_file(out, os.path.join(dst, shard))


@pytest.fixture(scope="session")
def tiny_int8_truncated(tiny_bf16: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tiny BF16 model with its projections truncated to int8 values: answers garbage."""
    pytest.importorskip("numpy")
    dst = tmp_path_factory.mktemp("tiny-int8") / "qwen3-tiny-int8-truncated"
    int8_truncated_copy(tiny_bf16, str(dst))
    return str(dst)


@pytest.fixture(scope="session")
def tok() -> Any:
    """The emulator's tokenizer on the tiny model's tokenizer files (session-wide)."""
    from ascend_sim.tokenizer import load_tokenizer

    return load_tokenizer(str(TINY_FP8))


@pytest.fixture(scope="session")
def tiny_random_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny random-weight Qwen3 checkpoint the emulator serves (read-only: copy to change)."""
    from ascend_sim.vllm_emulator.sandbox import write_tiny_random_model

    return write_tiny_random_model(str(tmp_path_factory.mktemp("tiny-random") / "tiny"))


@pytest.fixture(scope="session")
def qwen3_4b(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Qwen3-4B (BF16) with its real shapes and sparse data, plus a tokenizer (read-only)."""
    from ascend_sim.checkpoints import write_checkpoint
    from ascend_sim.tokenizer import tokenizer_json

    d = str(tmp_path_factory.mktemp("qwen3-4b") / "Qwen3-4B")
    write_checkpoint(d, arch="qwen3-4b", fp8=False, data="sparse")
    (Path(d) / "tokenizer.json").write_text(json.dumps(tokenizer_json()), encoding="utf-8")
    return d


@pytest.fixture(scope="session")
def qwen3_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Qwen3 checkpoints with real shapes and sparse data: 4b-fp8, 4b-bf16, 14b-fp8, 32b-bf16."""
    from ascend_sim.checkpoints import write_checkpoint

    root = tmp_path_factory.mktemp("models")
    out = {}
    for key, arch, fp8 in [
        ("4b-fp8", "qwen3-4b", True),
        ("4b-bf16", "qwen3-4b", False),
        ("14b-fp8", "qwen3-14b", True),
        ("32b-bf16", "qwen3-32b", False),
    ]:
        out[key] = str(root / key)
        write_checkpoint(out[key], arch, fp8=fp8, data="sparse")
    return out


# ----------------------------------------------------------------------------- processes


def spawn_sleeper() -> subprocess.Popen[bytes]:
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
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A real ``sleep 30`` process (a foreign process to find, own or stop); killed afterwards."""
    proc = spawn_sleeper()
    yield proc
    proc.kill()
    proc.wait(timeout=10)


HTTP_SERVER = [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1"]


def start_http_server(argv: Sequence[str] | None = None, **kwargs: Any) -> tuple[Any, int]:
    """A real HTTP server on 127.0.0.1 with a port chosen by the kernel; (proc, port)."""
    proc = subprocess.Popen(argv or HTTP_SERVER, stdout=subprocess.PIPE, text=True, **kwargs)
    line = proc.stdout.readline()
    m = re.search(r"port (\d+)", line)
    assert m, line
    return proc, int(m.group(1))


@pytest.fixture
def http_listener() -> Iterator[tuple[Any, int]]:
    """``python -m http.server`` listening on 127.0.0.1:<free port>; (proc, port); killed after."""
    proc, port = start_http_server()
    yield proc, port
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


# ----------------------------------------------------------------------------- emulated vLLM


@pytest.fixture(scope="module")
def openai_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Any]]:
    """Start the emulated vLLM OpenAI server: ``openai_server(row, *serve_args)`` -> Emulator.

    It serves a tiny random Qwen3 model on 127.0.0.1 (kernel-chosen port) as the vllm-ascend
    release ``row`` would; one server per (row, args) and test module, stopped after the module.
    """
    from ascend_sim.vllm_emulator.sandbox import (
        Emulator,
        emulator_env,
        make_root,
        write_row,
        write_tiny_random_model,
    )

    started: dict[tuple[str, ...], Any] = {}

    def start(row: str, *args: str) -> Any:
        key = (row, *args)
        if key not in started:
            tmp = tmp_path_factory.mktemp("openai-server")
            model = write_tiny_random_model(str(tmp / "tiny"))
            env = emulator_env(make_root(str(tmp / "root")), write_row(str(tmp / "row.json"), row))
            emu = Emulator([model, "--host", "127.0.0.1", "--port", "0", *args], env).start()
            started[key] = emu
            assert emu.ready, emu.output()
        return started[key]

    yield start
    for emu in started.values():
        emu.stop()


# ----------------------------------------------------------------------------- images


@pytest.fixture(scope="session")
def engine_image() -> str:
    """The real-engine image (docker/vllm-engine), built when absent; never a skip.

    The first test that asks builds it (minutes; ``python -m ascend_sim.images build --only
    engine``); molecule/engine builds it the same way when absent. No Docker engine or a failed
    build fails the test that asked for it.
    """
    from ascend_sim import images

    image = images.engine_specs(["v0.23.0"])[0].primary
    probe = subprocess.run(["docker", "info"], capture_output=True, text=True, check=False)
    if probe.returncode:
        pytest.fail(f"no Docker engine answers ({probe.stderr.strip()[-300:]}): run make setup")
    inspect = subprocess.run(["docker", "image", "inspect", image], capture_output=True)
    if inspect.returncode:
        build = subprocess.run(
            [sys.executable, "-m", "ascend_sim.images", "build", "--only", "engine"],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO / "src")},
            capture_output=True,
            text=True,
            check=False,
        )
        assert build.returncode == 0, f"building {image} failed:\n{build.stderr[-3000:]}"
    return image


# ----------------------------------------------------------------------------- ansible-playbook

ANSIBLE_PLAYBOOK = REPO / ".venv" / "bin" / "ansible-playbook"
BARE_PYTHON = "/usr/bin/python3"  # a target interpreter without ascend_deploy installed


def run_local_play(
    play: list[dict],
    tmp_path: Path,
    env: dict[str, str] | None = None,
    args: Sequence[str] = (),
    timeout: float = 300,
    python: str = sys.executable,
) -> subprocess.CompletedProcess[str]:
    """Run ``play`` on localhost (connection local) with the repository's ansible.cfg.

    The play is written to ``tmp_path/play.yml``; ``env`` adds to the environment (facts are
    cached in memory, temporary files stay under ``tmp_path``); ``args`` go to ansible-playbook;
    ``python`` is the target interpreter (this Python unless a test needs a bare one).
    """
    (tmp_path / "play.yml").write_text(json.dumps(play))
    full_env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_FACT_CACHING": "memory",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-local"),
        "ANSIBLE_REMOTE_TEMP": str(tmp_path / "ansible-remote"),
        **(env or {}),
    }
    cmd = [str(ANSIBLE_PLAYBOOK), "-i", "localhost,", "-c", "local", "-e"]
    cmd += [f"ansible_python_interpreter={python}", str(tmp_path / "play.yml"), *args]
    return subprocess.run(
        cmd, cwd=REPO, env=full_env, capture_output=True, text=True, timeout=timeout, check=False
    )


def import_statements(
    tree: ast.AST, module: str, is_package: bool
) -> Iterator[tuple[ast.AST, str, list[str]]]:
    """Every import of a parsed module: ``(node, base, names)``, relative bases made absolute.

    ``import a.b`` gives ``("", ["a.b"])``; ``from .x import y`` in ``pkg.m`` gives
    ``("pkg.x", ["y"])``. Function-level imports are included (``ast.walk``).
    """
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield node, "", [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                prefix = package[: len(package) - node.level + 1]
                base = ".".join(prefix + ([node.module] if node.module else []))
            yield node, base, [alias.name for alias in node.names]


def ask_chat(port: int, question: dict) -> dict:
    """One chat completion for a verification question (messages, max_tokens, enable_thinking)
    from the server on 127.0.0.1:``port`` serving model ``tiny``; the answer's message."""
    import http.client

    body = {
        "model": "tiny",
        "messages": question["messages"],
        "max_tokens": question["max_tokens"],
        "temperature": 0,
        "chat_template_kwargs": {"enable_thinking": question["enable_thinking"]},
    }
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request(
            "POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"}
        )
        resp = conn.getresponse()
        doc = json.loads(resp.read())
    finally:
        conn.close()
    assert resp.status == 200, doc
    return doc["choices"][0]["message"]


# ``make test`` runs two pytest-xdist workers (``-n 2``). The tests that use Docker are split into
# two groups, one per worker, each group run one test after another: a group's tests may share
# simulated-host names or an image, the two groups share nothing (distinct host names and tmp
# report directories; every molecule scenario writes its reports into its own ephemeral
# directory, molecule/_shared/base.yml). ``docker-b`` holds the real-engine tests (the image's
# build, the vLLM CPU reference, argv conformance, the engine scenario) and the slow
# single-host files, ``docker`` the rest; the sizes are balanced from CI's durations
# (docs/reference/ci.md). Every other test is spread over both workers around them. xdist's own
# ``loadgroup`` does not group under pytest 9 (it renames node ids, which pytest 9 no longer
# reads back), so the scheduler below groups by node id, from the marks written in the files.
_DOCKER_MARKS = {"docker", "molecule"}
DOCKER_B_FILES = frozenset(
    {
        "tests/integration/test_engine_image.py",
        "tests/integration/test_vllm_cpu_reference.py",
        "tests/integration/test_vllm_argv_conformance.py",
        "tests/integration/test_interrupted_transitions.py",
        "tests/integration/test_collection.py",
        "tests/integration/test_undeploy.py",
    }
)
DOCKER_B_SCENARIOS = frozenset({"engine", "capacity", "rollback"})
DOCKER_GROUPS = ("docker", "docker-b")


def _marks(node: ast.AST) -> set[str]:
    """``pytest.mark.<name>`` names in a decorator list or a ``pytestmark`` value."""
    names = set()
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.value, ast.Attribute)
            and sub.value.attr == "mark"
        ):
            names.add(sub.attr)
    return names


def docker_tests(path: Path) -> bool | set[str]:
    """True when every test of ``path`` uses Docker (its ``pytestmark``), else the names of the
    test functions marked so."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in tree.body:
        is_pytestmark = isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        )
        if is_pytestmark and _marks(node.value) & _DOCKER_MARKS:
            return True
        if isinstance(node, ast.FunctionDef) and any(
            _marks(d) & _DOCKER_MARKS for d in node.decorator_list
        ):
            found.add(node.name)
    return found


def xdist_scope(root: Path, nodeid: str, cache: dict[str, bool | set[str]]) -> str:
    """The xdist work unit of a test: ``docker``, ``docker-b`` or the test's own node id."""
    path, _, rest = nodeid.partition("::")
    if path not in cache:
        file = root / path
        cache[path] = docker_tests(file) if file.suffix == ".py" else set()
    marked = cache[path]
    function, _, param = rest.partition("[")
    if marked is True or (isinstance(marked, set) and function in marked):
        if path in DOCKER_B_FILES:
            return "docker-b"
        if path.endswith("/test_molecule.py") and param.rstrip("]") in DOCKER_B_SCENARIOS:
            return "docker-b"
        return "docker"
    return nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    from xdist.scheduler import LoadScopeScheduling

    cache: dict[str, bool | set[str]] = {}

    class DockerGroupsFirst(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(Path(config.rootpath), nodeid, cache)

        def _assign_work_unit(self, node: Any) -> None:
            # The Docker groups are the longest units: hand them out first, one per worker.
            for group in reversed(DOCKER_GROUPS):
                if group in self.workqueue:
                    self.workqueue.move_to_end(group, last=False)
            super()._assign_work_unit(node)

    return DockerGroupsFirst(config, log)
