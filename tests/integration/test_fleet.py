"""Simulated fleet: argument checks, the generated inventory, and real Docker-in-Docker hosts.

Tests marked ``docker`` start real simulated hosts (``ascend-sim/host:latest``); they need the
host image plus ``ascend_sim.host_setup`` and the presets, and skip with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from ascend_sim import fleet
from ascend_sim.fleet import FleetError, HostStatus

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
SRC = REPO / "src" / "ascend_sim"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "ascend_sim.fleet", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        timeout=900,
        check=False,
    )


@pytest.fixture
def presets_dir(tmp_path, monkeypatch):
    d = tmp_path / "presets"
    d.mkdir()
    for name in ("a2-910b3-8x64g", "a2-card3-alarm"):
        (d / f"{name}.json").write_text(json.dumps({"preset": name}), encoding="utf-8")
    monkeypatch.setattr(fleet, "PRESETS_DIR", d)
    return d


# --------------------------------------------------------------------------- input checks


@pytest.mark.parametrize(
    ("text", "expected"),
    [("8000", (8000, 8000)), ("8000-8003", (8000, 8003)), (" 9000 - 9001 ", (9000, 9001))],
)
def test_port_range_parses(text, expected):
    assert fleet.parse_port_range(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "8003-8000", "0", "70000", "8000-9000", "80:80"])
def test_bad_port_range_is_exit_2(text):
    with pytest.raises(FleetError) as exc:
        fleet.parse_port_range(text)
    assert exc.value.exit_code == 2
    assert "--ports" in str(exc.value)


def test_host_specs_name_hosts_by_prefix_or_explicitly(presets_dir):
    specs = fleet.host_specs(["a2-910b3-8x64g", "edge=a2-card3-alarm"], "lab")
    assert [(s.name, s.preset, s.state_file) for s in specs] == [
        ("lab-0", "a2-910b3-8x64g", None),
        ("edge", "a2-card3-alarm", None),
    ]


def test_unknown_preset_lists_the_known_ones(presets_dir):
    with pytest.raises(FleetError) as exc:
        fleet.host_specs(["a2-nope"], "sim")
    assert exc.value.exit_code == 2
    assert "unknown preset 'a2-nope'" in str(exc.value)
    assert "a2-910b3-8x64g, a2-card3-alarm" in str(exc.value)


def test_state_file_is_accepted_and_bad_ones_are_exit_2(presets_dir, tmp_path):
    good = tmp_path / "custom-host.json"
    good.write_text(json.dumps({"preset": "custom", "card": {"count": 2}}), encoding="utf-8")
    spec = fleet.host_specs([str(good)], "sim")[0]
    assert (spec.name, spec.preset, spec.state_file) == ("sim-0", "custom-host", good.resolve())

    for name, content in (
        ("empty.json", b""),
        ("garbage.json", b"\x00\xff\x10binary"),
        ("truncated.json", b'{"preset": "x", "card": {'),
        ("list.json", b"[1, 2]"),
    ):
        bad = tmp_path / name
        bad.write_bytes(content)
        with pytest.raises(FleetError) as exc:
            fleet.host_specs([str(bad)], "sim")
        assert exc.value.exit_code == 2
        assert str(bad) in str(exc.value)


def test_duplicate_and_invalid_host_names_are_exit_2(presets_dir):
    with pytest.raises(FleetError, match="used twice: xx"):
        fleet.host_specs(["xx=a2-910b3-8x64g", "xx=a2-card3-alarm"], "sim")
    for bad in ("bad name", "x", "-x"):
        with pytest.raises(FleetError, match="not a valid container name"):
            fleet.host_specs([f"{bad}=a2-910b3-8x64g"], "sim")
    with pytest.raises(FleetError, match="--name-prefix"):
        fleet.host_specs(["a2-910b3-8x64g"], "../x")


def test_cli_unknown_preset_is_one_line_exit_2():
    proc = _cli("up", "--preset", "no-such-preset-anywhere", "--name-prefix", "t-never")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "unknown preset 'no-such-preset-anywhere'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_bad_ports_is_one_line_exit_2(tmp_path):
    state = tmp_path / "s.json"
    state.write_text("{}", encoding="utf-8")
    proc = _cli("up", "--preset", str(state), "--ports", "x-y", "--name-prefix", "t-never")
    assert proc.returncode == 2
    assert "--ports 'x-y'" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("preset", "hardware", "tags"),
    [
        ("a2-910b3-8x64g", "a2", []),
        ("a2-910b4-8x32g", "a2", []),
        ("a3-ascend910-16chip", "a3", [f"{fleet.VLLM_REPO}:v0.23.0-a3"]),
        ("310p3-duo-2x", "310p", [f"{fleet.VLLM_REPO}:v0.23.0-310p"]),
    ],
)
def test_a_host_gets_the_image_tags_of_its_hardware(preset, hardware, tags):
    # issue 21 §6: deploy.yml pulls <tag>-a3 on an A3 host, <tag>-310p on a 300I Duo
    spec = fleet.HostSpec("h", preset)
    assert fleet.host_hardware(spec) == hardware
    assert fleet.hardware_tags(f"{fleet.VLLM_REPO}:v0.23.0", hardware) == tags
    # other images (the engine image, the host image) keep their one tag
    assert fleet.hardware_tags("ascend-sim/vllm-engine:v0.23.0", hardware) == []


def test_a_state_file_host_has_its_cards_hardware(tmp_path):
    state = tmp_path / "duo.json"
    state.write_text(json.dumps({"card": {"model": "310P3", "count": 2}}), encoding="utf-8")
    assert fleet.host_hardware(fleet.HostSpec("h", "duo", state)) == "310p"
    broken = tmp_path / "bad.json"
    broken.write_text(json.dumps({"card": {"hardware": "h100"}}), encoding="utf-8")
    with pytest.raises(FleetError, match=r"card\.hardware must be one of"):
        fleet.host_hardware(fleet.HostSpec("h", "bad", broken))


# --------------------------------------------------------------------------- inventory


def _hosts() -> list[HostStatus]:
    return [
        HostStatus("sim-0", "a2-910b3-8x64g", "running", True, {8000: 32768, 8001: 32769}),
        HostStatus("sim-1", "a2-card3-alarm", "running", True, {8000: 32770}),
    ]


def test_inventory_yaml_round_trips_through_pyyaml(tmp_path):
    yaml = pytest.importorskip("yaml")
    path = tmp_path / "inv" / "fleet.yml"
    fleet.write_inventory(path, _hosts(), "ascend_hosts")
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert loaded == fleet.inventory_data(_hosts(), "ascend_hosts")
    h0 = loaded["all"]["children"]["ascend_hosts"]["hosts"]["sim-0"]
    assert h0["ansible_connection"] == "community.docker.docker"
    assert h0["sim_published_ports"] == {8000: 32768, 8001: 32769}
    assert loaded["all"]["children"]["preset_a2_card3_alarm"]["hosts"] == {"sim-1": {}}


def test_ansible_reads_the_inventory(tmp_path):
    exe = Path(PY).parent / "ansible-inventory"
    if not exe.exists():
        pytest.skip("ansible-inventory is not installed in this environment")
    path = tmp_path / "fleet.yml"
    fleet.write_inventory(path, _hosts())
    proc = subprocess.run(
        [str(exe), "-i", str(path), "--list"], capture_output=True, text=True, check=True
    )
    data = json.loads(proc.stdout)
    hv = data["_meta"]["hostvars"]
    assert hv["sim-1"]["ansible_connection"] == "community.docker.docker"
    assert hv["sim-1"]["ansible_host"] == "sim-1"
    assert hv["sim-0"]["sim_published_ports"] == {"8000": 32768, "8001": 32769} or hv["sim-0"][
        "sim_published_ports"
    ] == {8000: 32768, 8001: 32769}
    assert sorted(data["ascend_hosts"]["hosts"]) == ["sim-0", "sim-1"]
    assert data["preset_a2_910b3_8x64g"]["hosts"] == ["sim-0"]


def test_yaml_emitter_quotes_what_yaml_would_misread():
    yaml = pytest.importorskip("yaml")
    data = {"a": "yes", "b": "1.0", "c": "x: y", "d": "", "e": [], "f": {}, "g": ["n", {"k": 1}]}
    assert yaml.safe_load(fleet.to_yaml(data)) == data


def test_instance_config_lists_docker_connections(tmp_path):
    yaml = pytest.importorskip("yaml")
    path = tmp_path / "instance_config.yml"
    fleet.write_instance_config(path, _hosts())
    assert yaml.safe_load(path.read_text(encoding="utf-8")) == [
        {
            "instance": n,
            "address": n,
            "user": "root",
            "connection": "community.docker.docker",
        }
        for n in ("sim-0", "sim-1")
    ]
    fleet.write_instance_config(path, [])
    assert yaml.safe_load(path.read_text(encoding="utf-8")) == []


# --------------------------------------------------------------------------- real hosts


def _docker_ok() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0


def _missing_parts() -> str | None:
    if not _docker_ok():
        return "no Docker engine answers"
    if not (SRC / "host_setup.py").exists() and not (SRC / "host_setup").is_dir():
        return "src/ascend_sim/host_setup does not exist yet (simulated-host engineer)"
    if "a2-910b3-8x64g" not in fleet.known_presets():
        return "preset a2-910b3-8x64g does not exist yet"
    return None


@pytest.fixture(scope="module")
def built_host_image():
    why = _missing_parts()
    if why:
        pytest.skip(why)
    proc = subprocess.run(
        [str(REPO / "docker" / "build-images.sh"), "--only", "host"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.fixture
def prefix(built_host_image):
    name = f"t-fleet-{uuid.uuid4().hex[:6]}"
    yield name
    fleet.down(name)


def _volumes(container: str) -> list[str]:
    data = fleet.inspect_container(container) or {}
    return [m["Name"] for m in data.get("Mounts", []) if m.get("Type") == "volume"]


@pytest.mark.docker
@pytest.mark.slow
def test_up_is_idempotent_and_down_removes_hosts_and_volumes(prefix, tmp_path):
    inv = tmp_path / "fleet.yml"
    presets = ["a2-910b3-8x64g", "a2-910b3-8x64g"]
    hosts = fleet.up(presets, prefix, images=[], ports="8000-8001", inventory=inv)
    assert [h.action for h in hosts] == ["created", "created"]
    assert all(h.ready and h.state == "running" for h in hosts)
    assert all(set(h.published_ports) == {8000, 8001} for h in hosts)
    ids = {h.name: fleet.inspect_container(h.name)["Id"] for h in hosts}
    volumes = [v for h in hosts for v in _volumes(h.name)]
    assert volumes, "the inner /var/lib/docker should be a volume"

    # the generated inventory names the published ports
    yaml = pytest.importorskip("yaml")
    inv_hosts = yaml.safe_load(inv.read_text())["all"]["children"]["ascend_hosts"]["hosts"]
    assert inv_hosts[f"{prefix}-0"]["sim_published_ports"] == hosts[0].published_ports

    # a published port reaches a server inside the simulated host, via 127.0.0.1 only
    name = hosts[0].name
    subprocess.run(
        ["docker", "exec", "-d", name, "python3", "-m", "http.server", "8000", "-d", "/etc"],
        check=True,
    )
    url = f"http://127.0.0.1:{hosts[0].published_ports[8000]}/hostname"
    deadline = time.monotonic() + 20
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                body = resp.read().decode()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    assert body.strip() == name

    again = fleet.up(presets, prefix, images=[], ports="8000-8001", inventory=inv)
    assert [h.action for h in again] == ["kept", "kept"]
    assert {h.name: fleet.inspect_container(h.name)["Id"] for h in again} == ids

    # fewer presets: the surplus host goes; another preset: the host is recreated
    changed = fleet.up(["a2-card3-alarm"], prefix, images=[], ports="8000-8001")
    assert [(h.name, h.action) for h in changed] == [(f"{prefix}-0", "recreated")]
    assert fleet.inspect_container(f"{prefix}-1") is None

    assert fleet.down(prefix, inv) == [f"{prefix}-0"]
    assert not inv.exists()
    left = subprocess.run(
        ["docker", "volume", "ls", "-q"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert not set(volumes) & set(left)


@pytest.mark.docker
@pytest.mark.slow
def test_a_foreign_container_with_the_same_name_is_left_alone(prefix):
    foreign = f"{prefix}-0"
    subprocess.run(
        ["docker", "create", "--name", foreign, fleet.HOST_IMAGE], capture_output=True, check=True
    )
    try:
        with pytest.raises(FleetError, match="is not part of fleet") as exc:
            fleet.up(["a2-910b3-8x64g"], prefix, images=[])
        assert exc.value.exit_code == 2
        assert fleet.inspect_container(foreign) is not None
    finally:
        subprocess.run(["docker", "rm", "-f", "-v", foreign], capture_output=True, check=False)


@pytest.mark.docker
@pytest.mark.slow
def test_emulator_images_load_once(prefix):
    from ascend_sim.images import VLLM_REPO, image_id

    ref = f"{VLLM_REPO}:v0.23.0"
    if image_id(ref) is None:
        pytest.skip(f"{ref} is not built (docker/build-images.sh)")
    hosts = fleet.up(["a2-910b3-8x64g"], prefix, images=[ref])
    name = hosts[0].name
    assert hosts[0].images[ref] == image_id(ref)
    t0 = time.monotonic()
    assert fleet.load_image(name, ref) is False  # same id inside: no second load
    assert time.monotonic() - t0 < 10
    version = subprocess.run(
        ["docker", "exec", name, "docker", "run", "--rm", ref, "vllm", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert version.returncode == 0, version.stderr
    assert "0.23.0" in version.stdout


@pytest.mark.docker
@pytest.mark.slow
def test_a_host_whose_state_is_invalid_fails_up_with_its_log(prefix, tmp_path):
    bad = tmp_path / "bad-state.json"
    bad.write_text(json.dumps({"preset": "bad", "card": {"count": "many"}}), encoding="utf-8")
    with pytest.raises(FleetError) as exc:
        fleet.up([str(bad)], prefix, images=[], timeout=60)
    message = str(exc.value)
    assert exc.value.exit_code == 1
    assert f"simulated host {prefix}-0 exited" in message
    assert "host_setup" in message


def _start_raw_host(name: str, *env: str) -> None:
    args = ["docker", "run", "-d", "--name", name, *fleet.DIND_OPTIONS]
    for item in ("ASCEND_SIM_PRESET=a2-910b3-8x64g", *env):
        args += ["-e", item]
    subprocess.run([*args, fleet.HOST_IMAGE], capture_output=True, check=True)


def _wait_logs(name: str, needle: str, timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    while True:
        logs = subprocess.run(["docker", "logs", name], capture_output=True, text=True).stderr
        if needle in logs or time.monotonic() > deadline:
            return logs
        time.sleep(1)


@pytest.mark.docker
@pytest.mark.slow
def test_inner_engine_storage_driver_is_chosen_logged_and_can_be_pinned(prefix):
    """auto: overlay2 where the volume holds overlay mounts, else vfs; a pin wins; junk fails."""
    auto, pinned, junk = f"{prefix}-0", f"{prefix}-1", f"{prefix}-2"
    try:
        _start_raw_host(auto)
        _start_raw_host(pinned, "ASCEND_SIM_STORAGE_DRIVER=vfs")
        _start_raw_host(junk, "ASCEND_SIM_STORAGE_DRIVER=zfs")
        drivers = {}
        for name in (auto, pinned):
            logs = _wait_logs(name, "sim-host: ready")
            driver = subprocess.run(
                ["docker", "exec", name, "docker", "info", "-f", "{{.Driver}}"],
                capture_output=True, text=True, check=True,
            ).stdout.strip()  # fmt: skip
            assert f"inner dockerd ({driver}) after" in logs, logs
            drivers[name] = driver
        assert drivers[auto] in ("overlay2", "vfs")
        assert drivers[pinned] == "vfs"
        logs = _wait_logs(junk, "ASCEND_SIM_STORAGE_DRIVER=zfs")
        assert "ASCEND_SIM_STORAGE_DRIVER=zfs: use auto, overlay2 or vfs" in logs
    finally:
        for name in (auto, pinned, junk):
            subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True, check=False)
