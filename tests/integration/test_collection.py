"""The collection as an operator installs it: built, installed, documented, deploying by FQCN.

``tools/build_collection.py`` builds the tarball; ``ansible-galaxy collection install`` puts it in
a temporary collections path; from a directory outside the repository, with no ansible.cfg of the
bundle, ``ansible-playbook ascend_vllm.serving.deploy`` deploys the tiny model onto one simulated
host and the deployment summary says deployed. ``ansible-doc`` answers for every module.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import ansible
import pytest
import yaml

from ascend_sim import fleet
from ascend_sim.state import load_preset

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
FQ = "ascend_vllm.serving"
PREFIX = "coll-deploy"
HOST = f"{PREFIX}-0"
IMAGE = "quay.io/ascend/vllm-ascend:v0.23.0"
# The `ansible` package installs its collections beside ansible-core.
BUNDLED = Path(ansible.__file__).resolve().parents[1] / "ansible_collections"
MODULES = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("*.py"))


def version_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def required_collections() -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    """requirements.yml's collections with their ">=low,<high" ranges."""
    ranges = {}
    for entry in yaml.safe_load((REPO / "requirements.yml").read_text())["collections"]:
        low, high = (part.lstrip(">=<") for part in entry["version"].split(","))
        ranges[entry["name"]] = (version_key(low), version_key(high))
    return ranges


def run(cmd: list[str], cwd: Path, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(ops directory, environment) with the built collection installed outside the repo."""
    tmp = tmp_path_factory.mktemp("collection")
    built = run(
        [sys.executable, str(REPO / "tools" / "build_collection.py"), "--output-path", str(tmp)],
        REPO,
        dict(os.environ),
    )
    assert built.returncode == 0, built.stderr
    tarball = Path(built.stdout.strip().splitlines()[-1])
    with tarfile.open(tarball) as tar:
        members = tar.getmembers()
    names = {m.name for m in members}
    assert not [m.name for m in members if m.issym() or m.islnk()], "the tarball holds links"
    assert "plugins/module_utils/ascend_deploy/planning/plan.py" in names
    assert "plugins/module_utils/ascend_deploy/data/serve_rules.json" in names
    assert {f"plugins/modules/{m}.py" for m in MODULES} <= names
    assert "plugins/action/ascend_role_vars.py" in names  # the first play's check runs from it
    assert "playbooks/deploy.yml" in names and "roles/vllm_service/tasks/main.yml" in names
    assert not [n for n in names if n.split("/")[0] in ("src", "tests", "molecule", "docker")]
    # Its own README: every path it names is in the tarball (the checkout's quick start named
    # make demo, tests/ and src/, which build_ignore leaves out); the licence ships with it.
    with tarfile.open(tarball) as tar:
        readme = tar.extractfile("README.md").read().decode()  # type: ignore[union-attr]
    assert readme == (REPO / "docs" / "collection.md").read_text()
    named = set(
        re.findall(r"`((?:roles|docs|plugins|meta|playbooks|inventory)/[\w./-]*\w/?)`", readme)
    )
    named |= {n for n in ("LICENSE", "CHANGELOG.md", "requirements.yml") if f"`{n}`" in readme}
    assert named and not [
        n
        for n in named
        if n.rstrip("/") not in {m.rstrip("/") for m in names}
        and not any(m.startswith(n) for m in names)
    ], named
    assert "make demo" not in readme and "LICENSE" in names

    ops = tmp / "ops"
    ops.mkdir()
    collections = tmp / "collections"
    # ansible-core plus what requirements.yml names, nothing else: the `ansible` package's other
    # bundled collections are not scanned; its copies of the required ones stand in for Galaxy.
    (ops / "ansible.cfg").write_text(
        f"[defaults]\ncollections_path = {collections}\ncollections_scan_sys_path = false\n"
    )
    for name, (low, high) in required_collections().items():
        namespace, coll = name.split(".")
        bundled = BUNDLED / namespace / coll
        version = json.loads((bundled / "MANIFEST.json").read_text())["collection_info"]["version"]
        assert low <= version_key(version) < high, (
            f"bundled {name} {version} is outside {low}-{high}"
        )
        shutil.copytree(bundled, collections / "ansible_collections" / namespace / coll)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "MOLECULE_"))}
    env.update(ANSIBLE_CONFIG=str(ops / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0")
    galaxy = [str(BIN / "ansible-galaxy"), "collection", "install", "--no-deps", "--offline"]
    done = run([*galaxy, str(tarball), "-p", str(collections)], ops, env)
    assert done.returncode == 0, done.stdout + done.stderr
    installed = collections / "ansible_collections" / "ascend_vllm" / "serving"
    assert (installed / "MANIFEST.json").exists()
    return ops, env, collections


def test_every_module_is_documented_by_fqcn(installed):
    ops, env, collections = installed
    for module in MODULES:
        done = run([str(BIN / "ansible-doc"), f"{FQ}.{module}"], ops, env, timeout=120)
        assert done.returncode == 0, f"{module}: {done.stderr[-600:]}"
        assert str(collections) in done.stdout, f"{module} documented from elsewhere"
        assert "EXAMPLES" in done.stdout and "RETURN VALUES" in done.stdout, module


@pytest.mark.docker
@pytest.mark.slow
def test_deploy_by_fqcn_from_outside_the_repository(installed):
    ops, env, _ = installed
    if run(["docker", "image", "inspect", "ascend-sim/host:latest", IMAGE], ops, env).returncode:
        pytest.fail("needs Docker with ascend-sim/host and the emulator images (make images)")
    model = run(
        [str(BIN / "ansible-playbook"), str(REPO / "playbooks" / "sim_model.yml")],
        REPO,
        {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")},
    )
    assert model.returncode == 0, model.stdout[-2000:]
    state = load_preset("a2-910b3-8x64g")
    state["preset"] = "coll-1card"
    state["card"]["count"] = 1
    state["card"]["npu_ids"] = [0]
    (ops / "state.json").write_text(json.dumps(state))
    inventory = ops / "inventory"
    inventory.mkdir()
    # The operator's own inventory: the simulated fleet's groups and group variables, copied.
    (inventory / "group_vars" / "all").mkdir(parents=True)
    for src in (REPO / "inventory" / "sim" / "group_vars" / "all").glob("*.yml"):
        (inventory / "group_vars" / "all" / src.name).write_text(src.read_text())
    (inventory / "groups.yml").write_text((REPO / "inventory" / "sim" / "groups.yml").read_text())
    fleet.down(PREFIX)
    try:
        fleet.up(
            [f"{HOST}={ops / 'state.json'}"],
            PREFIX,
            images=[IMAGE],
            ports="8000-8000",  # the service's port (inventory/sim), as make demo publishes
            inventory=inventory / "hosts.yml",
        )
        done = run(
            [
                str(BIN / "ansible-playbook"),
                "-i",
                str(inventory),
                f"{FQ}.deploy",
                "--limit",
                f"{HOST},localhost",
                "-e",
                f"model_weights_src={REPO / '.cache' / 'models' / 'qwen3-tiny-fp8'}",
                "-e",
                f"ascend_report_dir={ops / 'reports'}",
                "-e",
                "ascend_canary=false",
            ],
            ops,
            env,
            timeout=900,
        )
        (ops / "deploy.log").write_text(done.stdout + done.stderr)
        assert done.returncode == 0, done.stdout[-4000:]
        (row,) = json.loads((ops / "reports" / "deploy-summary.json").read_text())
        assert row["host"] == HOST and row["status"] == "deployed", row
        # The modules ran from the installed copy: nothing in the checkout was on the path.
        assert str(REPO / "library") not in done.stdout
        demo_commands_work_as_printed(inventory)
    finally:
        fleet.down(PREFIX, inventory / "hosts.yml")


def demo_commands_work_as_printed(inventory: Path) -> None:
    """What make demo ends with (tools/demo_usage.py), pasted into a shell at the checkout."""
    usage = subprocess.run(
        [sys.executable, str(REPO / "tools" / "demo_usage.py"), "--inventory", str(inventory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert usage.returncode == 0, usage.stderr
    lines = [line for line in usage.stdout.splitlines() if not line.startswith("#")]
    assert len(lines) == 4, usage.stdout
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    outputs = []
    for line in lines:
        done = subprocess.run(
            ["sh", "-c", line], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
        outputs.append(done.stdout)
    models, chat, verify, client = outputs
    assert json.loads(models)["data"][0]["id"] == "qwen3-tiny"
    assert "Paris" in json.loads(chat)["choices"][0]["message"]["content"]
    assert ": PASS" in verify.splitlines()[0], verify
    assert "Paris" in client
