"""A container's view of a simulated host in a directory, for running the emulator locally.

``make_root`` lays out what a vLLM-Ascend container sees through its documented devices
and mounts (vllm-ascend installation.md) under one directory; point ``ASCEND_SIM_ROOT`` at it.
Device nodes are plain files here (the emulator checks presence; inside the simulated host
they are real character devices made by ``ascend_sim.host_setup``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading

from .device import DRIVER_VERSION_REL, MANAGEMENT_NODES, REGISTRY_REL, STATE_REL

# Rows of the compatibility matrix the images are built from (the newest A2 final and an older one).
ROWS = {
    "v0.23.0": {
        "vllm_ascend": "v0.23.0",
        "vllm": "v0.23.0",
        "torch": "2.10.0",
        "torch_npu": "2.10.0.post4",
        "cann": "9.1.0",
        "hardware": "a2",
    },
    "v0.13.0": {
        "vllm_ascend": "v0.13.0",
        "vllm": "v0.13.0",
        "torch": "2.8.0",
        "torch_npu": "2.8.0.post2",
        "cann": "8.5.0",
        "hardware": "a2",
    },
    "v0.11.0": {
        "vllm_ascend": "v0.11.0",
        "vllm": "v0.11.0",
        "torch": "2.7.1",
        "torch_npu": "2.7.1.post1",
        "cann": "8.3.RC2",
        "hardware": "a2",
    },
}


def default_state(
    hbm_total_mb: int = 65536,
    idle_hbm_used_mb: int = 3300,
    count: int = 8,
    driver: str = "25.5.1",
    graph_capture_broken: bool = False,
) -> dict:
    """A healthy 8 x 910B3 64 GB host in the shared state schema."""
    return {
        "preset": "sandbox",
        "hostname": None,
        "card": {
            "model": "910B3",
            "hardware": "a2",
            "count": count,
            "chips_per_card": 1,
            "hbm_total_mb": hbm_total_mb,
            "idle_hbm_used_mb": idle_hbm_used_mb,
            "memory_kind": "hbm",
        },
        "health": {},
        "versions": {"npu_smi": driver, "driver": driver, "firmware": "7.7.0.6.236"},
        "faults": {"graph_capture_broken": graph_capture_broken, "driver_not_loaded": False},
        "chips": [],
    }


def matrix_row(release: str) -> dict:
    """The image row of ``release`` in the shipped compat matrix, on A2 (KeyError if absent)."""
    from ascend_deploy.resources import data_path

    with open(data_path("compat_matrix.json"), encoding="utf-8") as fh:
        rows = json.load(fh)["rows"]
    for row in rows:
        if row["vllm_ascend"] == release:
            keys = ("vllm_ascend", "vllm", "torch", "torch_npu", "cann")
            return {**{k: row[k] for k in keys}, "hardware": "a2"}
    raise KeyError(release)


def write_row(path: str, row: dict | str) -> str:
    """Write a row.json (a ROWS key, another shipped matrix release's A2 row, or a row dict);
    returns the path."""
    doc = (ROWS.get(row) or matrix_row(row)) if isinstance(row, str) else row
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    return path


def preset_state(name: str) -> dict:
    """A simulated host preset (``ascend_sim.state``) as the emulator sees it."""
    from ascend_sim.state import load_preset

    return load_preset(name)


def make_root(
    root: str,
    state: dict | None = None,
    driver_version: str | None = None,
    devices: int | None = None,
    management_nodes: bool = True,
) -> str:
    """Create the container view under ``root``; returns ``root``."""
    state = state if state is not None else default_state()
    driver_version = driver_version or state.get("versions", {}).get("driver", "25.5.1")
    n = devices if devices is not None else int(state.get("card", {}).get("count", 8))
    dev = os.path.join(root, "dev")
    os.makedirs(dev, exist_ok=True)
    for i in range(n):
        open(os.path.join(dev, f"davinci{i}"), "w").close()
    if management_nodes:
        for name in MANAGEMENT_NODES:
            open(os.path.join(dev, name), "w").close()
    vpath = os.path.join(root, DRIVER_VERSION_REL)
    os.makedirs(os.path.dirname(vpath), exist_ok=True)
    compatible = state.get("versions", {}).get("driver_compatible")
    inner = state.get("versions", {}).get("driver_inner")
    with open(vpath, "w", encoding="utf-8") as fh:
        fh.write(f"Version={driver_version}\n")
        if inner:
            fh.write(f"Innerversion={inner}\n")
        if compatible:
            fh.write(f"compatible_version={compatible}\n")
        fh.write(f"package_version={driver_version}\n")
    spath = os.path.join(root, STATE_REL)
    os.makedirs(os.path.dirname(spath), exist_ok=True)
    with open(spath, "w", encoding="utf-8") as fh:
        json.dump(state, fh)
    os.makedirs(os.path.join(root, REGISTRY_REL), exist_ok=True)
    return root


class Emulator:
    """``vllm serve`` of the emulator as a child process, for tests and demos.

    ``start()`` waits until "Application startup complete." (or the process exits) and
    reads the port from "Starting vLLM API server 0 on http://HOST:PORT", so ``--port 0``
    lets the OS pick a free port.
    """

    def __init__(self, serve_args: list[str], env: dict[str, str], python: str | None = None):
        self.serve_args = list(serve_args)
        self.env = env
        self.python = python or sys.executable
        self.proc: subprocess.Popen | None = None
        self.lines: list[str] = []
        self.err_lines: list[str] = []
        self.port: int | None = None
        self._ready = threading.Event()
        self._threads: list[threading.Thread] = []

    def _pump(self, stream, sink: list[str]) -> None:
        for raw in stream:
            line = raw.rstrip("\n")
            sink.append(line)
            m = re.search(r"Starting vLLM API server \d+ on http://[^ ]*:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if line.endswith("Application startup complete."):
                self._ready.set()
        self._ready.set()

    def start(self, timeout: float = 60.0) -> Emulator:
        cmd = [self.python, "-m", "ascend_sim.vllm_emulator", "serve", *self.serve_args]
        self.proc = subprocess.Popen(
            cmd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
        for stream, sink in ((self.proc.stdout, self.lines), (self.proc.stderr, self.err_lines)):
            t = threading.Thread(target=self._pump, args=(stream, sink), daemon=True)
            t.start()
            self._threads.append(t)
        self._ready.wait(timeout)
        return self

    @property
    def ready(self) -> bool:
        return any(line.endswith("Application startup complete.") for line in self.lines)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return "\n".join(self.lines + self.err_lines)

    def wait(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        rc = self.proc.wait(timeout)
        for t in self._threads:
            t.join(5)
        return rc

    def stop(self, timeout: float = 10.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        for t in self._threads:
            t.join(5)
        return self.proc.returncode

    def __enter__(self) -> Emulator:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def emulator_env(root: str, row_path: str, **extra: str) -> dict[str, str]:
    """Environment for a local emulator process: the sandbox root and row, ``src`` importable."""
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_", "HCCL_"))}
    env.pop("PYTORCH_NPU_ALLOC_CONF", None)
    env.update(
        ASCEND_SIM_ROOT=root,
        ASCEND_SIM_ROW=row_path,
        PYTHONPATH=src + os.pathsep + env.get("PYTHONPATH", ""),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def write_tiny_random_model(path: str, heads: int = 4, kv_heads: int = 2) -> str:
    """A tiny Qwen3 checkpoint with random BF16 weights and the byte-level tokenizer.

    For protocol tests: it runs through the real numpy forward pass; its answers are noise.
    """
    from ascend_sim.checkpoints import resolve_arch, write_checkpoint
    from ascend_sim.tokenizer import tokenizer_json

    arch = resolve_arch("qwen3-0.6b")
    arch.update(
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=16,
        vocab_size=261,
        max_position_embeddings=1024,
        eos_token_id=258,
        bos_token_id=256,
    )
    write_checkpoint(path, arch=arch, fp8=False, data="random")
    with open(os.path.join(path, "tokenizer.json"), "w", encoding="utf-8") as fh:
        json.dump(tokenizer_json(), fh)
    with open(os.path.join(path, "generation_config.json"), "w", encoding="utf-8") as fh:
        json.dump({"eos_token_id": [258, 256], "temperature": 0.6, "top_p": 0.95}, fh)
    return path
