"""ascend_deploy.host.deployed_state without Docker: the bundle digest and the record's edge cases.

The check against real containers and a real /health server is in
tests/integration/test_ansible_modules.py (through the Ansible module).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import REPO

from ascend_deploy.errors import CheckFailed, InputError
from ascend_deploy.host import deployed_state

PARTS = ["playbooks", "roles", "plugins/modules", "plugins/module_utils/ascend_deploy"]


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    root = tmp_path / "bundle"
    for part in PARTS:
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, root / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (root / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / part)
    return root


def test_bundle_digest_is_stable_and_sees_content_names_and_new_files(bundle):
    first = deployed_state.tree_digest(str(bundle), PARTS)
    assert first == deployed_state.tree_digest(str(bundle), PARTS)
    # Byte-compiled files are not the bundle.
    cache = bundle / "plugins" / "modules" / "__pycache__"
    cache.mkdir()
    (cache / "x.cpython-311.pyc").write_bytes(b"\0")
    assert deployed_state.tree_digest(str(bundle), PARTS) == first

    defaults = bundle / "roles" / "vllm_service" / "defaults" / "main.yml"
    text = defaults.read_text()
    defaults.write_text(text.replace("vllm_service_name: vllm", "vllm_service_name: vllm2"))
    changed = deployed_state.tree_digest(str(bundle), PARTS)
    assert changed != first
    defaults.write_text(text)
    assert deployed_state.tree_digest(str(bundle), PARTS) == first

    (bundle / "playbooks" / "tasks" / "extra.yml").write_text("---\n")
    assert deployed_state.tree_digest(str(bundle), PARTS) != first


def test_bundle_digest_of_a_missing_part_names_it(tmp_path):
    with pytest.raises(InputError, match=r"bundle path .*/roles does not exist"):
        deployed_state.tree_digest(str(tmp_path), ["roles"])


def test_no_record_unreadable_record_and_old_format_are_not_converged(tmp_path):
    state = tmp_path / "svc"
    state.mkdir()
    res = deployed_state.check(str(state), "svc", "d" * 64, docker="docker")
    assert res["converged"] is False and res["facts"] == {}
    assert res["reasons"] == ["no record of a verified deployment"]

    (state / deployed_state.RECORD).write_text("{not json")
    res = deployed_state.check(str(state), "svc", "d" * 64)
    assert not res["converged"] and "is unreadable" in res["reasons"][0]

    (state / deployed_state.RECORD).write_text(json.dumps({"format": 0, "desired": "d" * 64}))
    res = deployed_state.check(str(state), "svc", "d" * 64)
    assert not res["converged"]
    assert res["reasons"] == [f"{state / 'deployed.json'} has another format"]


def _definition(state: Path, specs: dict[str, str]) -> None:
    state.mkdir(parents=True, exist_ok=True)
    replicas = [{"name": n, "labels": {"ascend-deploy.spec": s}} for n, s in specs.items()]
    (state / "containers.json").write_text(json.dumps({"replicas": replicas}))


def test_record_is_private_atomic_and_forgotten(tmp_path):
    state = tmp_path / "svc"
    _definition(state, {})
    state.chmod(0o700)
    observed = {"files": {}, "containers": [], "dirs": {}}
    path = deployed_state.write_record(str(state), "d" * 64, observed, {"k": 1}, [8000])
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert oct(os.stat(state).st_mode & 0o777) == "0o700"
    # no temporary file left
    assert sorted(p.name for p in state.iterdir()) == ["containers.json", "deployed.json"]
    body = json.loads(Path(path).read_text())
    assert body["format"] == deployed_state.FORMAT and body["ports"] == [8000]
    assert deployed_state.forget(str(state)) is True
    assert deployed_state.forget(str(state)) is False


def test_empty_desired_digest_is_refused(tmp_path):
    with pytest.raises(InputError, match="desired-state digest is empty"):
        deployed_state.write_record(str(tmp_path), "", {}, {}, [])


def test_differences_name_each_drifted_thing():
    c0 = {"name": "q-0", "running": True, "spec": "s0", "image": "sha256:a"}
    c1 = {"name": "q-1", "running": True, "spec": "s1", "image": "sha256:a"}
    recorded = {
        "files": {"service.env": {"sha256": "a", "mode": "0o600", "uid": 0}},
        "containers": [c0, c1],
        "dirs": {"/m": [["a.safetensors", 10, 1]]},
    }
    now = {
        "files": {"service.env": {"sha256": "a", "mode": "0o644", "uid": 0}},
        "containers": [{**c0, "running": False}, {**c1, "spec": "other"}, {**c1, "name": "q-2"}],
        "dirs": {"/m": [["a.safetensors", 10, 2]]},
    }
    assert deployed_state._differences(recorded, now) == [
        "file service.env changed",
        "container q-0 is not running",
        "container q-1 was replaced or changed",
        "container q-2 is new",
        "files under /m changed",
    ]
    assert deployed_state._differences(recorded, recorded) == []


def test_record_is_refused_when_the_running_containers_are_not_the_verified_definition(tmp_path):
    # Issue 22: two runs raced, the losing run wrote the fast-path record while the host ran the
    # other run's containers; every later run with its inputs then said "converged".
    state = tmp_path / "svc"
    _definition(state, {"q-0": "s0", "q-1": "s1"})
    ok = [
        {"name": "q-0", "running": True, "spec": "s0", "image": "i"},
        {"name": "q-1", "running": True, "spec": "s1", "image": "i"},
        {"name": "q-lb", "running": True, "spec": "", "image": "nginx"},
    ]
    deployed_state.write_record(str(state), "d" * 64, {"containers": ok}, {}, [8000, 8001])
    other = [{**ok[0], "spec": "other-run"}, {**ok[1], "running": False}, ok[2]]
    other.append({"name": "q-2", "running": True, "spec": "s2", "image": "i"})
    with pytest.raises(CheckFailed) as err:
        deployed_state.write_record(str(state), "e" * 64, {"containers": other}, {}, [8000])
    assert "container q-0 runs another definition (spec 'other-run')" in str(err.value)
    assert "container q-1 is not running" in str(err.value)
    assert "container q-2 is not in the definition" in str(err.value)
    assert "q-lb" not in str(err.value)
    # the earlier record stays as it was
    assert json.loads((state / "deployed.json").read_text())["desired"] == "d" * 64
    missing = [ok[0]]
    with pytest.raises(CheckFailed, match="replica q-1 of the definition has no container"):
        deployed_state.write_record(str(state), "e" * 64, {"containers": missing}, {}, [8000])
    (state / "containers.json").unlink()
    with pytest.raises(CheckFailed, match=r"containers\.json is unreadable"):
        deployed_state.write_record(str(state), "e" * 64, {"containers": ok}, {}, [8000])


def test_a_pending_transition_is_never_converged(tmp_path):
    state = tmp_path / "svc"
    state.mkdir()
    assert deployed_state.pending_transition(str(state)) is None
    (state / deployed_state.TRANSITION).write_text(
        json.dumps({"phase": "replacing", "since": "2026-12-03T13:00:00Z", "run": "r1"})
    )
    assert deployed_state.pending_transition(str(state))["phase"] == "replacing"
    (state / deployed_state.RECORD).write_text(
        json.dumps({"format": deployed_state.FORMAT, "desired": "d" * 64, "observed": {}})
    )
    res = deployed_state.check(str(state), "svc-none", "d" * 64)
    assert not res["converged"]
    assert res["reasons"][0] == (
        "an interrupted transition is pending (replacing since 2026-12-03T13:00:00Z, run r1): "
        "this run finishes or undoes it"
    )
    (state / deployed_state.TRANSITION).write_text("{half")
    assert deployed_state.pending_transition(str(state)) == {}
