"""Create, inspect and remove a fleet of simulated Ascend hosts (Docker-in-Docker containers).

``python -m ascend_sim.fleet up --preset a2-910b3-8x64g --preset a2-card3-alarm --name-prefix sim
--inventory inventory/sim/fleet.yml`` starts one host per ``--preset`` (``sim-0``, ``sim-1``, ...)
with the options Docker-in-Docker needs here (no ``--privileged``), waits until each host has
materialised its state and its inner dockerd answers, loads the vLLM-Ascend emulator images into
it (skipped when the inner image id already matches), publishes the serving ports on 127.0.0.1
only, and writes an Ansible inventory that reaches the hosts with the
``community.docker.docker`` connection. ``up`` is idempotent: matching running hosts are kept,
hosts with another preset or an older host image are recreated, surplus hosts are removed.
``down`` removes the hosts and their volumes; ``status`` lists them.

A ``--preset`` value that names a JSON file instead of a preset is used as the host's state file.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ascend_deploy.errors import AscendDeployError
from ascend_deploy.planning import compat

from . import state as sim_state
from .images import HOST_REPO, VLLM_REPO, VLLM_ROWS

REPO = Path(__file__).resolve().parents[2]
PRESETS_DIR = Path(__file__).resolve().parent / "data" / "presets"
# ASCEND_SIM_HOST_IMAGE pins another host image (e.g. ascend-sim/host:<hash>) for every caller.
HOST_IMAGE = os.environ.get("ASCEND_SIM_HOST_IMAGE") or f"{HOST_REPO}:latest"
FLEET_LABEL = "org.ascend-sim.fleet"
PRESET_LABEL = "org.ascend-sim.preset"
STATE_PATH = "/etc/ascend-sim/state.json"
READY_MARKER = "/run/ascend-sim/ready"
DEFAULT_PORTS = "8000-8003"
DEFAULT_GROUP = "ascend_hosts"
READY_TIMEOUT_S = 180.0
# Docker-in-Docker without --privileged (refused on this workplace's engine); see DEVELOPERS.md.
DIND_OPTIONS = (
    "--cap-add",
    "SYS_ADMIN",
    "--cap-add",
    "NET_ADMIN",
    "--cap-add",
    "MKNOD",
    "--security-opt",
    "seccomp=unconfined",
    "--security-opt",
    "apparmor=unconfined",
    "--cgroupns",
    "host",
    "-v",
    "/sys/fs/cgroup:/sys/fs/cgroup:rw",
)


class FleetError(Exception):
    """One-line operator message; exit code 2 for bad input, 1 for a failed step."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class HostSpec:
    name: str
    preset: str  # preset name, or the stem of a state file
    state_file: Path | None = None


@dataclass
class HostStatus:
    name: str
    preset: str
    state: str  # docker state: running, exited, ...
    ready: bool
    published_ports: dict[int, int] = field(default_factory=dict)
    images: dict[str, str] = field(default_factory=dict)  # ref -> inner image id
    action: str = ""  # what `up` did: created, kept, recreated, started


# --------------------------------------------------------------------------- docker


def docker(
    *args: str, stdin: bytes | None = None, timeout: float | None = 600, check: bool = True
) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(
            ["docker", *args],
            input=stdin.decode() if stdin is not None else None,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as exc:
        raise FleetError("docker: command not found; run docker/ci-setup.sh first") from exc
    except subprocess.TimeoutExpired as exc:
        raise FleetError(f"docker {' '.join(args[:3])}: no answer within {timeout} s") from exc
    if check and proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        raise FleetError(
            f"docker {' '.join(args[:3])} failed: {lines[-1] if lines else proc.returncode}"
        )
    return proc


def outer_image_id(ref: str) -> str | None:
    proc = docker("image", "inspect", "--format", "{{.Id}}", ref, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def inner_image_id(host: str, ref: str) -> str | None:
    proc = docker(
        "exec", host, "docker", "image", "inspect", "--format", "{{.Id}}", ref, check=False
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def inspect_container(name: str) -> dict | None:
    proc = docker("container", "inspect", name, check=False)
    if proc.returncode != 0:
        return None
    data = json.loads(proc.stdout)
    return data[0] if data else None


def fleet_containers(prefix: str | None) -> list[dict]:
    """Inspect data of every simulated host (of one fleet when ``prefix`` is given)."""
    label = f"{FLEET_LABEL}={prefix}" if prefix else FLEET_LABEL
    names = docker(
        "ps", "-a", "--filter", f"label={label}", "--format", "{{.Names}}"
    ).stdout.split()
    found = [inspect_container(n) for n in names]
    return sorted((c for c in found if c), key=lambda c: c["Name"])


def published_ports(container: dict) -> dict[int, int]:
    """Container TCP port -> host port, for bindings on 127.0.0.1."""
    out: dict[int, int] = {}
    ports = (container.get("NetworkSettings") or {}).get("Ports") or {}
    for key, bindings in ports.items():
        port, _, proto = key.partition("/")
        if proto != "tcp" or not bindings:
            continue
        for b in bindings:
            if b.get("HostIp") == "127.0.0.1" and b.get("HostPort"):
                out[int(port)] = int(b["HostPort"])
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------- inputs


def parse_port_range(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+))?\s*", text)
    if not m:
        raise FleetError(f"--ports {text!r}: expected PORT or FIRST-LAST, e.g. 8000-8003", 2)
    first, last = int(m.group(1)), int(m.group(2) or m.group(1))
    if not 1 <= first <= last <= 65535 or last - first > 63:
        raise FleetError(f"--ports {text!r}: need 1 <= FIRST <= LAST <= 65535, at most 64 ports", 2)
    return first, last


def known_presets() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.json")) if PRESETS_DIR.is_dir() else []


NAME_RE = r"[a-zA-Z0-9][a-zA-Z0-9_.-]+"


def host_specs(presets: Sequence[str], prefix: str) -> list[HostSpec]:
    """One host per value: ``PRESET``, ``STATE.json`` or ``NAME=PRESET`` / ``NAME=STATE.json``.

    Hosts without an explicit name are called ``PREFIX-<index>``.
    """
    if not presets:
        raise FleetError("no --preset given; name at least one", 2)
    if not re.fullmatch(NAME_RE, prefix):
        raise FleetError(f"--name-prefix {prefix!r}: use letters, digits, '.', '_' and '-'", 2)
    specs: list[HostSpec] = []
    known = known_presets()
    for i, raw in enumerate(presets):
        name, sep, value = raw.partition("=")
        if not sep:
            name, value = f"{prefix}-{i}", raw
        elif not re.fullmatch(NAME_RE, name):
            raise FleetError(
                f"--preset {raw!r}: host name {name!r} is not a valid container name", 2
            )
        path = Path(value)
        if value.endswith(".json") and path.is_file():
            try:
                state = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                raise FleetError(f"{path}: not a readable JSON state file ({exc})", 2) from exc
            if not isinstance(state, dict):
                raise FleetError(f"{path}: a state file must hold a JSON object", 2)
            specs.append(HostSpec(name, path.stem, path.resolve()))
        elif value in known:
            specs.append(HostSpec(name, value))
        else:
            raise FleetError(
                f"unknown preset {value!r}; known: {', '.join(known) or 'none'} "
                f"(in {PRESETS_DIR}), or give a path to a state .json file",
                2,
            )
    names = [s.name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise FleetError(f"host name(s) used twice: {', '.join(dupes)}", 2)
    return specs


def default_images() -> list[str]:
    """The emulator images that exist locally (one per emulated compatibility row)."""
    refs = [f"{VLLM_REPO}:{row}" for row in VLLM_ROWS]
    return [r for r in refs if outer_image_id(r)]


# --------------------------------------------------------------------------- up / down


def _matches(container: dict, spec: HostSpec, host_image_id: str, ports: tuple[int, int]) -> bool:
    labels = (container.get("Config") or {}).get("Labels") or {}
    have = set(published_ports(container)) if container["State"]["Running"] else None
    want = set(range(ports[0], ports[1] + 1))
    return (
        labels.get(PRESET_LABEL) == spec.preset
        and container.get("Image") == host_image_id
        and (have is None or have == want)
    )


def start_host(spec: HostSpec, prefix: str, host_image: str, ports: tuple[int, int]) -> None:
    port_arg = f"127.0.0.1::{ports[0]}" + (f"-{ports[1]}" if ports[1] != ports[0] else "")
    args = [
        "create",
        "--name",
        spec.name,
        "--hostname",
        spec.name,
        "--label",
        f"{FLEET_LABEL}={prefix}",
        "--label",
        f"{PRESET_LABEL}={spec.preset}",
        *DIND_OPTIONS,
        "-p",
        port_arg,
    ]
    if spec.state_file is None:
        args += ["-e", f"ASCEND_SIM_PRESET={spec.preset}"]
    docker(*args, host_image)
    if spec.state_file is not None:
        docker("cp", str(spec.state_file), f"{spec.name}:{STATE_PATH}")
    docker("start", spec.name)


def wait_ready(name: str, timeout: float = READY_TIMEOUT_S) -> None:
    """Wait for the entrypoint's ready marker; fail with the host's last log lines if it dies."""
    deadline = time.monotonic() + timeout
    while True:
        c = inspect_container(name)
        if c is None:
            raise FleetError(f"simulated host {name} disappeared while starting")
        if not c["State"]["Running"]:
            logs = docker("logs", "--tail", "3", name, check=False)
            tail = " | ".join((logs.stdout + logs.stderr).strip().splitlines()[-3:])
            raise FleetError(f"simulated host {name} exited ({c['State']['ExitCode']}): {tail}")
        if docker("exec", name, "test", "-e", READY_MARKER, check=False).returncode == 0:
            return
        if time.monotonic() > deadline:
            raise FleetError(
                f"simulated host {name} not ready after {timeout:.0f} s (docker logs {name})"
            )
        time.sleep(1)


def load_image(host: str, ref: str) -> bool:
    """``docker save REF | docker exec -i HOST docker load`` unless the same id is there."""
    want = outer_image_id(ref)
    if want is None:
        raise FleetError(
            f"image {ref} does not exist here; build it with docker/build-images.sh", 2
        )
    if inner_image_id(host, ref) == want:
        return False
    save = subprocess.Popen(["docker", "save", ref], stdout=subprocess.PIPE)
    assert save.stdout is not None
    try:
        load = subprocess.run(
            ["docker", "exec", "-i", host, "docker", "load", "-q"],
            stdin=save.stdout,
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        save.stdout.close()
        save_rc = save.wait()
    if save_rc != 0 or load.returncode != 0:
        raise FleetError(f"loading {ref} into {host} failed: {load.stderr.strip() or save_rc}")
    if inner_image_id(host, ref) != want:
        raise FleetError(f"after loading {ref} into {host} its image id differs from {want[:19]}")
    return True


def host_hardware(spec: HostSpec) -> str:
    """The hardware family of the host's preset or state file (a2, a3, 310p)."""
    try:
        if spec.state_file is not None:
            state = sim_state.load_state(str(spec.state_file))
        else:
            state = sim_state.load_preset(spec.preset)
    except AscendDeployError as exc:
        raise FleetError(f"{spec.name}: {exc}", 2) from exc
    return str(state["card"]["hardware"])


def hardware_tags(ref: str, hardware: str) -> list[str]:
    """The tags a real host of ``hardware`` pulls for the emulator image ``ref``.

    A real A3 host runs ``vllm-ascend:<tag>-a3``, a 300I Duo ``<tag>-310p`` (upstream's image
    workflow suffixes, the matrix's ``images.suffix``); the emulator image serves every family
    (its npu-smi state says which), so a simulated host gets it under its family's tag too.
    """
    repo = ref.rpartition(":")[0]
    suffix = str(compat.image_rules()["suffix"].get(hardware, f"-{hardware}"))
    if repo != VLLM_REPO or not suffix:
        return []
    return [f"{ref}{suffix}"]


def tag_image(host: str, ref: str, alias: str) -> bool:
    """``docker tag REF ALIAS`` inside ``host`` unless ALIAS already is that image."""
    want = inner_image_id(host, ref)
    if want is None or inner_image_id(host, alias) == want:
        return False
    done = subprocess.run(
        ["docker", "exec", host, "docker", "tag", ref, alias],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise FleetError(f"tagging {ref} as {alias} in {host} failed: {done.stderr.strip()}")
    return True


def status_of(container: dict, images: Sequence[str] | None = None) -> HostStatus:
    name = container["Name"].lstrip("/")
    labels = (container.get("Config") or {}).get("Labels") or {}
    running = bool(container["State"]["Running"])
    ready = (
        running and docker("exec", name, "test", "-e", READY_MARKER, check=False).returncode == 0
    )
    inner: dict[str, str] = {}
    if ready:
        refs = images
        if refs is None:
            out = docker(
                "exec",
                name,
                "docker",
                "images",
                "--format",
                "{{.Repository}}:{{.Tag}}",
                check=False,
            ).stdout
            refs = [r for r in out.split() if not r.endswith(":<none>")]
        for ref in refs:
            iid = inner_image_id(name, ref)
            if iid:
                inner[ref] = iid
    return HostStatus(
        name,
        labels.get(PRESET_LABEL, "?"),
        container["State"]["Status"],
        ready,
        published_ports(container),
        inner,
    )


def up(
    presets: Sequence[str],
    prefix: str = "sim",
    images: Sequence[str] | None = None,
    ports: str = DEFAULT_PORTS,
    host_image: str = HOST_IMAGE,
    inventory: Path | None = None,
    group: str = DEFAULT_GROUP,
    timeout: float = READY_TIMEOUT_S,
) -> list[HostStatus]:
    """Make the fleet ``prefix`` exactly one ready host per preset; return their status."""
    specs = host_specs(presets, prefix)
    port_range = parse_port_range(ports)
    host_image_id = outer_image_id(host_image)
    if host_image_id is None:
        raise FleetError(f"host image {host_image} does not exist; run docker/build-images.sh", 2)
    refs = list(images) if images is not None else default_images()
    for ref in refs:
        if outer_image_id(ref) is None:
            raise FleetError(
                f"image {ref} does not exist here; build it with docker/build-images.sh", 2
            )

    wanted = {s.name for s in specs}
    for c in fleet_containers(prefix):
        if c["Name"].lstrip("/") not in wanted:
            docker("rm", "-f", "-v", c["Name"].lstrip("/"))
    actions: dict[str, str] = {}
    for spec in specs:
        current = inspect_container(spec.name)
        owner = ((current or {}).get("Config") or {}).get("Labels") or {}
        if current is not None and owner.get(FLEET_LABEL) != prefix:
            raise FleetError(
                f"container {spec.name} exists and is not part of fleet {prefix!r}; "
                "remove it or choose another host name",
                2,
            )
        if current is not None and _matches(current, spec, host_image_id, port_range):
            if current["State"]["Running"]:
                actions[spec.name] = "kept"
            else:
                docker("start", spec.name)
                actions[spec.name] = "started"
            continue
        if current is not None:
            docker("rm", "-f", "-v", spec.name)
        start_host(spec, prefix, host_image, port_range)
        actions[spec.name] = "recreated" if current is not None else "created"
    result: list[HostStatus] = []
    for spec in specs:
        wait_ready(spec.name, timeout)
        hardware = host_hardware(spec)
        for ref in refs:
            if load_image(spec.name, ref):
                _log(f"{spec.name}: loaded {ref}")
            for alias in hardware_tags(ref, hardware):
                if tag_image(spec.name, ref, alias):
                    _log(f"{spec.name}: tagged {ref} as {alias} ({hardware})")
        c = inspect_container(spec.name)
        assert c is not None
        st = status_of(c, refs)
        st.action = actions[spec.name]
        result.append(st)
    if inventory is not None:
        write_inventory(inventory, result, group)
    return result


def down(prefix: str | None, inventory: Path | None = None) -> list[str]:
    """Remove the hosts of fleet ``prefix`` (every fleet when None) with their volumes."""
    names = [c["Name"].lstrip("/") for c in fleet_containers(prefix)]
    # Deleting a host's volume (its inner images; full copies per layer with vfs) takes a while.
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda n: docker("rm", "-f", "-v", n), names))
    removed = names
    if inventory is not None and inventory.exists():
        inventory.unlink()
    return removed


# --------------------------------------------------------------------------- inventory


def _yaml_scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if re.fullmatch(r"[A-Za-z0-9_./:@-]+", text) and not re.fullmatch(
        r"[0-9.:-]+|true|false|null|yes|no|on|off|~", text, re.I
    ):
        return text
    return json.dumps(text)


def to_yaml(data: object, indent: int = 0) -> str:
    """A small YAML emitter for nested dicts, lists and scalars (no PyYAML on bare hosts)."""
    pad = "  " * indent
    lines: list[str] = []
    if isinstance(data, dict):
        if not data:
            return pad + "{}\n"
        for k, v in data.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{_yaml_scalar(k)}:\n{to_yaml(v, indent + 1)}")
            elif isinstance(v, dict):
                lines.append(f"{pad}{_yaml_scalar(k)}: {{}}\n")
            elif isinstance(v, list):
                lines.append(f"{pad}{_yaml_scalar(k)}: []\n")
            else:
                lines.append(f"{pad}{_yaml_scalar(k)}: {_yaml_scalar(v)}\n")
    elif isinstance(data, list):
        for v in data:
            if isinstance(v, (dict, list)) and v:
                body = to_yaml(v, indent + 1)
                lines.append(f"{pad}- {body.lstrip()}")
            else:
                lines.append(f"{pad}- {_yaml_scalar(v)}\n")
    else:
        lines.append(pad + _yaml_scalar(data) + "\n")
    return "".join(lines)


def inventory_data(hosts: Sequence[HostStatus], group: str = DEFAULT_GROUP) -> dict:
    """Ansible YAML inventory: one group with every host, plus one group per preset."""
    hostvars = {
        h.name: {
            "ansible_connection": "community.docker.docker",
            "ansible_host": h.name,
            "ansible_user": "root",
            "ansible_python_interpreter": "/usr/bin/python3",
            "sim_preset": h.preset,
            "sim_published_ports": dict(h.published_ports),
        }
        for h in hosts
    }
    by_preset: dict[str, dict] = {}
    for h in hosts:
        g = "preset_" + re.sub(r"[^A-Za-z0-9_]", "_", h.preset)
        by_preset.setdefault(g, {"hosts": {}})["hosts"][h.name] = {}
    return {"all": {"children": {group: {"hosts": hostvars}, **by_preset}}}


def write_inventory(path: Path, hosts: Sequence[HostStatus], group: str = DEFAULT_GROUP) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "# Generated by `python -m ascend_sim.fleet up`; `down` removes it.\n"
    text += to_yaml(inventory_data(hosts, group))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_instance_config(path: Path, hosts: Sequence[HostStatus]) -> None:
    """The instance list molecule's default driver turns into its inventory."""
    entries = [
        {
            "instance": h.name,
            "address": h.name,
            "user": "root",
            "connection": "community.docker.docker",
        }
        for h in hosts
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_yaml(entries) if entries else "[]\n", encoding="utf-8")


# --------------------------------------------------------------------------- CLI


def _log(msg: str) -> None:
    print(f"fleet: {msg}", file=sys.stderr, flush=True)


def _render(hosts: Sequence[HostStatus]) -> str:
    if not hosts:
        return "no simulated hosts"
    rows = []
    for h in hosts:
        ports = ",".join(f"{k}->{v}" for k, v in h.published_ports.items()) or "-"
        imgs = ",".join(r.rsplit(":", 1)[-1] for r in h.images) or "-"
        rows.append(
            f"{h.name:16} {h.preset:22} {h.state:8} {'ready' if h.ready else 'not-ready':9} "
            f"{h.action or '':9} ports {ports}  images {imgs}"
        )
    return "\n".join(rows)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ascend_sim.fleet", description=__doc__.split("\n")[0]
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up", help="start (or keep) one simulated host per --preset")
    u.add_argument(
        "--preset",
        action="append",
        required=True,
        metavar="[NAME=]PRESET|STATE.json",
        help="one host per value (repeat); NAME defaults to PREFIX-<index>",
    )
    u.add_argument(
        "--name-prefix", default="sim", help="hosts are PREFIX-0, PREFIX-1, ... (default sim)"
    )
    u.add_argument(
        "--image", action="append", help="image to load into every host (default: built emulators)"
    )
    u.add_argument("--no-images", action="store_true", help="load no images")
    u.add_argument(
        "--ports", default=DEFAULT_PORTS, help=f"serving ports to publish (default {DEFAULT_PORTS})"
    )
    u.add_argument(
        "--host-image", default=HOST_IMAGE, help=f"default {HOST_IMAGE} ($ASCEND_SIM_HOST_IMAGE)"
    )
    u.add_argument("--inventory", type=Path, help="write an Ansible YAML inventory here")
    u.add_argument(
        "--group", default=DEFAULT_GROUP, help=f"inventory group (default {DEFAULT_GROUP})"
    )
    u.add_argument(
        "--timeout", type=float, default=READY_TIMEOUT_S, help="seconds to wait per host"
    )
    u.add_argument(
        "--instance-config", type=Path, help="write a molecule instance config (YAML) here"
    )
    u.add_argument("--json", action="store_true")
    d = sub.add_parser("down", help="remove the hosts of a fleet and their volumes")
    d.add_argument("--name-prefix", default="sim")
    d.add_argument("--all", action="store_true", help="every simulated fleet")
    d.add_argument("--inventory", type=Path, help="also delete this generated inventory")
    s = sub.add_parser("status", help="list simulated hosts")
    s.add_argument("--name-prefix", default=None, help="one fleet (default: all)")
    s.add_argument("--json", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "up":
            images = [] if args.no_images else args.image
            hosts = up(
                args.preset,
                args.name_prefix,
                images,
                args.ports,
                args.host_image,
                args.inventory,
                args.group,
                args.timeout,
            )
            if args.instance_config is not None:
                write_instance_config(args.instance_config, hosts)
            print(json.dumps([asdict(h) for h in hosts], indent=2) if args.json else _render(hosts))
        elif args.cmd == "down":
            removed = down(None if args.all else args.name_prefix, args.inventory)
            print("removed " + (", ".join(removed) if removed else "nothing"))
        else:
            hosts = [status_of(c) for c in fleet_containers(args.name_prefix)]
            print(json.dumps([asdict(h) for h in hosts], indent=2) if args.json else _render(hosts))
    except FleetError as exc:
        print(f"fleet: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
