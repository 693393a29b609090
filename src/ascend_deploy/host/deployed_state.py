"""The record of the last verified deployment on a host, and the check of a host against it.

deploy.yml's converged fast path: after a deployment passed verification, the host keeps
``<state_dir>/deployed.json`` with

* ``desired``: a digest the controller computed from every input of the roles (their
  variables, the bundle's own files, the model's manifest), and
* ``observed``: what was in place then: the managed files (sha256, mode, owner), the
  service's containers (name, running, spec label, image id) and the model directories
  (name, size and mtime of every file; hashing gigabytes on every run is the manifest
  check's job when something changed).

A later run whose desired digest is the same, on a host whose observation is the same and
whose replicas answer ``/health``, has nothing to do: runtime, weights and service are
skipped and only the quick verification runs. Anything else (another variable, an edited
env file, a stopped or replaced container, a touched weight file, a new bundle) sends the run
through every task, which puts the host back in the desired state.

Standard library only (runs on the target through Ansible).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence

from ..errors import CheckFailed, InputError
from ..model.checksums import sha256_file

RECORD = "deployed.json"
# Written by vllm_service before it replaces replicas, removed when the transition ended in a
# verified state (the new definition promoted, or the last good one restored and healthy).
TRANSITION = "transition.json"
FORMAT = 1  # bump when the record's layout changes: an old record then means "not converged"


def tree_digest(root: str, parts: Sequence[str]) -> str:
    """sha256 over the relative path and content of every file under ``root/<part>``."""
    digest = hashlib.sha256()
    for part in parts:
        top = os.path.join(root, part)
        if os.path.isfile(top):
            files = [top]
        elif os.path.isdir(top):
            files = []
            for dirpath, dirnames, filenames in os.walk(top):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                files.extend(
                    os.path.join(dirpath, f) for f in sorted(filenames) if not f.endswith(".pyc")
                )
        else:
            raise InputError(f"bundle path {top} does not exist; run from a complete checkout")
        for path in files:
            digest.update(os.path.relpath(path, root).encode() + b"\0")
            digest.update(bytes.fromhex(sha256_file(path)))
    return digest.hexdigest()


def _file_state(path: str) -> dict | None:
    try:
        st = os.stat(path)
        sha = sha256_file(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CheckFailed(f"cannot read {path}: {exc.strerror}") from None
    return {"sha256": sha, "mode": oct(st.st_mode & 0o7777), "uid": st.st_uid}


def _dir_state(path: str) -> list[list] | None:
    """[relative name, size, mtime_ns] of every file under ``path`` (None when missing)."""
    if not os.path.isdir(path):
        return None
    out: list[list] = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            try:
                st = os.stat(full)
            except FileNotFoundError:
                continue
            out.append([os.path.relpath(full, path), st.st_size, st.st_mtime_ns])
    return out


def _containers(service: str, docker: str) -> list[dict]:
    """The service's containers as [{name, running, spec, image}], sorted by name."""
    exe = shutil.which(docker)
    if not exe:
        raise CheckFailed(f"{docker} not found on the host; container mode needs the Docker CLI")

    def run(*args: str) -> str:
        proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60, check=False)
        if proc.returncode != 0:
            raise CheckFailed(f"docker {args[0]} failed: {proc.stderr.strip()[:300]}")
        return proc.stdout

    ids = run(
        "ps", "-aq", "--no-trunc", "--filter", f"label=ascend-deploy.service={service}"
    ).split()
    if not ids:
        return []
    out = []
    for info in json.loads(run("inspect", *ids)):
        labels = (info.get("Config") or {}).get("Labels") or {}
        state = info.get("State") or {}
        out.append(
            {
                "name": info.get("Name", "").lstrip("/"),
                "running": bool(state.get("Running")) and not state.get("Restarting"),
                "spec": labels.get("ascend-deploy.spec", ""),
                "image": info.get("Image", ""),
                # Restarts by the restart policy (a crash loop keeps the container "running").
                "restarts": int(info.get("RestartCount") or 0),
            }
        )
    return sorted(out, key=lambda c: c["name"])


def observe(
    state_dir: str,
    service: str,
    files: Iterable[str],
    dirs: Iterable[str],
    docker: str = "docker",
) -> dict:
    """What is in place now: managed files, the service's containers, the model directories."""
    return {
        "files": {name: _file_state(os.path.join(state_dir, name)) for name in sorted(set(files))},
        "containers": _containers(service, docker),
        "dirs": {path: _dir_state(path) for path in sorted(set(dirs))},
    }


def unhealthy(ports: Iterable[int], address: str = "127.0.0.1", timeout: float = 5.0) -> list[str]:
    """``port: reason`` for every replica whose /health does not answer 200."""
    bad = []
    for port in ports:
        url = f"http://{address}:{int(port)}/health"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                if resp.status != 200:
                    bad.append(f"{port}: /health answered {resp.status}")
        except urllib.error.HTTPError as exc:
            bad.append(f"{port}: /health answered {exc.code}")
        except (OSError, urllib.error.URLError) as exc:
            bad.append(f"{port}: {getattr(exc, 'reason', exc)}")
    return bad


def _without_restarts(container: dict) -> dict:
    return {k: v for k, v in container.items() if k != "restarts"}


def restarts_since(recorded: dict, now: dict) -> dict[str, int]:
    """Restarts of each recorded container since the record (the verification) was written.

    A container replaced since then counts all its restarts; a count below the recorded one
    (the engine restarted, the container was recreated) counts from zero.
    """
    rec = {c["name"]: int(c.get("restarts") or 0) for c in recorded.get("containers", [])}
    out = {}
    for c in now.get("containers", []):
        count = int(c.get("restarts") or 0)
        base = rec.get(c["name"], 0)
        out[c["name"]] = count - base if count >= base else count
    return out


def _differences(recorded: dict, now: dict) -> list[str]:
    out = []
    for name in sorted(set(recorded.get("files", {})) | set(now["files"])):
        if recorded.get("files", {}).get(name) != now["files"].get(name):
            out.append(f"file {name} changed")
    rec_c = {c["name"]: c for c in recorded.get("containers", [])}
    now_c = {c["name"]: c for c in now["containers"]}
    for name in sorted(set(rec_c) | set(now_c)):
        a, b = rec_c.get(name), now_c.get(name)
        if a is None:
            out.append(f"container {name} is new")
        elif b is None:
            out.append(f"container {name} is gone")
        elif not b["running"]:
            out.append(f"container {name} is not running")
        elif _without_restarts(a) != _without_restarts(b):
            out.append(f"container {name} was replaced or changed")
    for path in sorted(set(recorded.get("dirs", {})) | set(now["dirs"])):
        if recorded.get("dirs", {}).get(path) != now["dirs"].get(path):
            out.append(f"files under {path} changed")
    return out


def check(
    state_dir: str,
    service: str,
    desired: str,
    docker: str = "docker",
    restart_threshold: int = 0,
) -> dict:
    """Compare the host with its record: ``{converged, reasons, facts, restarts}``.

    Observes the files and directories the record lists, the service's containers, and asks
    every recorded replica port for /health. ``restarts`` counts each replica's restarts since
    the verification; more than ``restart_threshold`` for any replica (a crash loop the restart
    policy hides) sends the run through every step.
    """
    path = os.path.join(state_dir, RECORD)
    try:
        with open(path, encoding="utf-8") as fh:
            record = json.load(fh)
    except FileNotFoundError:
        return {"converged": False, "reasons": ["no record of a verified deployment"], "facts": {}}
    except (OSError, ValueError) as exc:
        return {"converged": False, "reasons": [f"{path} is unreadable ({exc})"], "facts": {}}
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return {"converged": False, "reasons": [f"{path} has another format"], "facts": {}}
    recorded = record.get("observed") or {}
    reasons = []
    pending = pending_transition(state_dir)
    if pending is not None:
        reasons.append(
            f"an interrupted transition is pending ({pending.get('phase', '?')} since "
            f"{pending.get('since', '?')}, run {pending.get('run', '?')}): "
            "this run finishes or undoes it"
        )
    if record.get("desired") != desired:
        reasons.append("the desired state differs (variables, bundle or model manifest changed)")
    now = observe(state_dir, service, recorded.get("files", {}), recorded.get("dirs", {}), docker)
    reasons += _differences(recorded, now)
    restarts = restarts_since(recorded, now)
    reasons += [
        f"container {name} restarted {count} time(s) since the last verification "
        f"(more than {restart_threshold}; its restart policy hides a crash)"
        for name, count in sorted(restarts.items())
        if count > restart_threshold
    ]
    if not reasons:
        reasons += [f"replica on port {bad}" for bad in unhealthy(record.get("ports", []))]
    return {
        "converged": not reasons,
        "reasons": reasons,
        "facts": (record.get("facts") or {}) if not reasons else {},
        "restarts": {name: count for name, count in restarts.items() if count > 0},
    }


def pending_transition(state_dir: str) -> dict | None:
    """The intent record of a transition that did not end (its content, {} if unreadable)."""
    try:
        with open(os.path.join(state_dir, TRANSITION), encoding="utf-8") as fh:
            body = json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def definition_mismatches(state_dir: str, containers: Sequence[dict]) -> list[str]:
    """How the running containers differ from the definition in ``containers.json``.

    The record that enables the fast path may only describe containers that run the verified
    definition: another run (or an operator) that replaced them in between makes it false.
    """
    path = os.path.join(state_dir, "containers.json")
    try:
        with open(path, encoding="utf-8") as fh:
            definition = json.load(fh)
    except (OSError, ValueError) as exc:
        return [f"{path} is unreadable ({exc})"]
    replicas = definition.get("replicas", []) if isinstance(definition, dict) else []
    wanted = {
        str(r.get("name")): str((r.get("labels") or {}).get("ascend-deploy.spec", ""))
        for r in replicas
        if isinstance(r, dict)
    }
    running = {c["name"]: c for c in containers}
    problems = []
    for name, spec in sorted(wanted.items()):
        have = running.get(name)
        if have is None:
            problems.append(f"replica {name} of the definition has no container")
        elif not have.get("running"):
            problems.append(f"container {name} is not running")
        elif have.get("spec") != spec:
            problems.append(f"container {name} runs another definition (spec {have.get('spec')!r})")
    problems += [
        f"container {name} is not in the definition"
        for name in sorted(set(running) - set(wanted))
        # a replica of an older definition; the load balancer has no spec
        if running[name].get("running") and running[name].get("spec")
    ]
    return problems


def write_record(
    state_dir: str, desired: str, observed: dict, facts: dict, ports: Sequence[int]
) -> str:
    """Write the record atomically (0600) and return its path.

    Refused (CheckFailed) when the running containers are not the definition that verified.
    """
    if not desired:
        raise InputError("the desired-state digest is empty; compute it before recording")
    mismatches = definition_mismatches(state_dir, observed.get("containers", []))
    if mismatches:
        raise CheckFailed(
            "not recording the deployment for the fast path: the running containers are not the "
            f"definition this run verified ({'; '.join(mismatches)}); another run or an operator "
            "changed them. Fix: run deploy.yml again (it takes every step)"
        )
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    path = os.path.join(state_dir, RECORD)
    body = {
        "format": FORMAT,
        "desired": desired,
        "observed": observed,
        "facts": facts,
        "ports": [int(p) for p in ports],
    }
    tmp = f"{path}.tmp-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(body, fh, indent=1, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)
    return path


def forget(state_dir: str) -> bool:
    """Remove the record (a failed verification); True when there was one."""
    try:
        os.unlink(os.path.join(state_dir, RECORD))
    except FileNotFoundError:
        return False
    return True
