#!/usr/bin/env python3
"""Read-only probe of a target for the host_bootstrap role; prints one JSON object.

Docker engine and client binaries, whether the engine answers (``docker info``: version,
runtimes, default runtime, running containers), the Docker SDK and requests as this interpreter
imports them (community.docker's modules run with it), daemon.json, the Ascend Docker Runtime's
install directory and the dpkg state of the named packages. Standard library only; changes
nothing.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import stat
import subprocess
import sys

SBIN = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def which(name: str) -> str | None:
    path = os.pathsep.join([os.environ.get("PATH", ""), *SBIN])
    return shutil.which(name, path=path)


def run(argv: list[str], timeout: float) -> tuple[int, str, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, "", str(exc)
    return proc.returncode, proc.stdout, proc.stderr


def engine(docker: str | None, timeout: float) -> dict:
    out: dict = {"answers": False, "version": None, "runtimes": [], "default_runtime": None}
    out.update({"containers_running": 0, "logging_driver": None, "error": None})
    if docker is None:
        out["error"] = "no docker client"
        return out
    rc, stdout, stderr = run([docker, "info", "--format", "{{json .}}"], timeout)
    try:
        info = json.loads(stdout) if stdout.strip() else {}
    except ValueError:
        info = {}
    if rc != 0 or not info.get("ServerVersion"):
        errors = [line for line in stderr.strip().splitlines() if line.strip()]
        out["error"] = errors[-1] if errors else f"docker info exit code {rc}"
        return out
    out.update(
        answers=True,
        version=info.get("ServerVersion"),
        runtimes=sorted(info.get("Runtimes") or {}),
        default_runtime=info.get("DefaultRuntime"),
        containers_running=int(info.get("ContainersRunning") or 0),
        logging_driver=info.get("LoggingDriver"),
    )
    return out


def sdk() -> dict:
    out: dict = {"docker": None, "requests": None, "errors": {}}
    for name in ("requests", "docker"):
        try:
            mod = importlib.import_module(name)
        except Exception as exc:  # any import failure means "missing"
            out["errors"][name] = f"{type(exc).__name__}: {exc}"
            continue
        out[name] = str(getattr(mod, "__version__", "unknown"))
    return out


def daemon_json(path: str) -> dict:
    out: dict = {"path": path, "exists": False, "content": None, "mode": None, "error": None}
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return out
    except OSError as exc:
        out["error"] = str(exc)
        return out
    out["exists"] = True
    out["mode"] = f"{stat.S_IMODE(st.st_mode):04o}"
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        content = json.loads(text) if text.strip() else {}
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    if not isinstance(content, dict):
        out["error"] = "the file holds a JSON " + type(content).__name__ + ", not an object"
        return out
    out["content"] = content
    return out


def dpkg(packages: list[str], timeout: float) -> dict:
    """Installed version of each package, None when not installed or without dpkg."""
    found: dict = dict.fromkeys(packages)
    query = which("dpkg-query")
    if query is None or not packages:
        return found
    fmt = "${Package}\t${db:Status-Abbrev}\t${Version}\n"
    _rc, stdout, _err = run([query, "-W", "-f", fmt, *packages], timeout)
    for line in stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0] in found and parts[1].startswith("ii"):
            found[parts[0]] = parts[2]
    return found


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--daemon-json", default="/etc/docker/daemon.json")
    p.add_argument("--ascend-runtime-dir", default="/usr/local/Ascend/Ascend-Docker-Runtime")
    p.add_argument("--packages", default="")
    p.add_argument("--timeout", type=float, default=20.0)
    args = p.parse_args()
    docker = which("docker")
    result = {
        "python": sys.executable,
        "docker": docker,
        "dockerd": which("dockerd"),
        "engine": engine(docker, args.timeout),
        "sdk": sdk(),
        "daemon_json": daemon_json(args.daemon_json),
        "ascend_runtime_dir": {
            "path": args.ascend_runtime_dir,
            "exists": os.path.isdir(args.ascend_runtime_dir),
        },
        "dpkg": dpkg([n for n in args.packages.split(",") if n], args.timeout),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
