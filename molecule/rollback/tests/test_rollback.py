"""Verify the rollback scenario: three deploy.yml runs (see molecule.yml).

Runs as molecule's testinfra verifier (hosts from molecule's inventory); each run's exit code,
output, deployment summary and verification reports are read from the scenario's ephemeral
directory (molecule/_shared/run_case.yml). A missing output fails the test.
"""

from __future__ import annotations

import json

import pytest

from ascend_sim.scenario_outputs import api_key, outputs_dir, read_case, row_of

GOOD = "quay.io/ascend/vllm-ascend:v0.23.0"
NEW = "quay.io/ascend/vllm-ascend:v0.11.0"
STATE = "/etc/ascend-deploy/vllm"
A, B = "molecule-rollback-a", "molecule-rollback-b"
ASK = (
    "import json, urllib.request; "
    "req = urllib.request.Request('http://127.0.0.1:%d/v1/chat/completions', "
    "data=json.dumps({'messages': [{'role': 'user', 'content': 'What is the capital of France?'}], "
    "'max_tokens': 60, 'temperature': 0, "
    "'chat_template_kwargs': {'enable_thinking': False}}).encode(), "
    "headers={'Content-Type': 'application/json', 'Authorization': 'Bearer %s'}); "
    "print(json.load(urllib.request.urlopen(req, timeout=60))['choices'][0]['message']['content'])"
)


def case(name: str) -> tuple[dict, list[dict]]:
    found = read_case("rollback", name)
    assert found is not None, f"converge kept no output for case {name}"
    return found


def verify_summary(name: str) -> dict:
    """deploy_verify's summary.json of run ``name`` (one run id per deploy.yml run)."""
    paths = list((outputs_dir("rollback") / name).glob("*/summary.json"))
    assert len(paths) == 1, paths
    return json.loads(paths[0].read_text())


def host_status(name: str, host: str) -> dict:
    return next(h for h in verify_summary(name)["hosts"] if h["host"] == host)


def replicas(host) -> dict[str, dict]:
    """Every container of the service (running or not) by name."""
    names = host.check_output("docker ps -a --filter name=^vllm- --format '{{.Names}}'").split()
    return {n: json.loads(host.check_output(f"docker inspect {n}"))[0] for n in names}


def answers_paris(host, port: int) -> bool:
    return "Paris" in host.check_output(f'python3 -c "{ASK % (port, api_key())}"')


def on(host, name: str) -> None:
    if host.backend.get_hostname() != name:
        pytest.skip("checked on its own host")


def test_good_version_deployed_on_both():
    run, rows = case("good")
    assert run["rc"] == 0, run["stdout"][-3000:]
    for h in (A, B):
        row = row_of(rows, h)
        assert row["status"] == "deployed" and row["image"] == GOOD
        assert host_status("good", h)["status"] == "verified"


def test_rollout_failed_only_rollback_a_and_says_why():
    run, rows = case("rollout")
    assert run["rc"] == 2, run["stdout"][-3000:]
    assert row_of(rows, A)["status"] == "FAILED"
    assert row_of(rows, B)["status"] == "deployed" and row_of(rows, B)["image"] == NEW
    a = host_status("rollout", A)
    assert a["status"] == "rolled back"
    assert "first_request" in a["checks"]
    assert a["pitfall"] and a["cause"] not in ("-", "no known signature")
    assert a["rollback"] == f"rolled back to {GOOD} (healthy)"
    assert host_status("rollout", B)["status"] == "verified"
    report = next(outputs_dir("rollback").glob(f"rollout/*/{A}"))
    # The replicas died with the NPU runtime's inner error; the diagnosis names it.
    findings = json.loads((report / "diagnosis.json").read_text())["findings"]
    assert any(f["pitfall"] == 4 and "inner error" in f["title"].lower() for f in findings)
    for f in ("diagnosis.json", "npu-smi.txt", "vllm-0.log", "vllm-0/verify.json", "plan.json"):
        assert (report / f).is_file(), f
    # npu-smi's table as npu_facts read it (capped, bounded), not an error message
    assert "npu-smi" in (report / "npu-smi.txt").read_text()
    for name in ("vllm-0", "vllm-1"):  # the restored service was verified again
        assert json.loads((report / f"rollback-{name}" / "verify.json").read_text())["ok"]


def test_rollback_a_has_every_earlier_replica_back_and_no_new_one(host):
    on(host, A)
    found = replicas(host)
    assert sorted(found) == ["vllm-0", "vllm-1"], sorted(found)  # vllm-2 of the rollout is gone
    for name, c in found.items():
        assert c["State"]["Running"], (name, c["State"])
        assert c["Config"]["Image"] == GOOD
        assert c["Config"]["Labels"].get("ascend-deploy.rollback") == "true"
        assert "ASCEND_SIM_TEST_CRASH_ON_REQUEST=1" not in c["Config"]["Env"]
    last_good = json.loads(host.file(f"{STATE}/last-good/containers.json").content_string)
    assert last_good["image"] == GOOD
    assert [r["name"] for r in last_good["replicas"]] == ["vllm-0", "vllm-1"]
    assert answers_paris(host, 8000) and answers_paris(host, 8001)


def test_unhealthy_definition_is_rolled_back_by_the_service_role():
    run, rows = case("unhealthy")
    assert run["rc"] == 2, run["stdout"][-3000:]
    row = row_of(rows, B)
    assert row["status"] == "FAILED"
    assert "did not become healthy" in row["why"], row["why"]
    assert f"Rolled back to the last good definition ({NEW}): healthy" in row["why"], row["why"]
    # The service role failed the host before verification: no verification this run.
    assert "TASK [ascend_vllm.serving.deploy_verify : Verify every replica" not in run["stdout"]


def test_rollback_b_runs_the_last_good_v0_11_replicas(host):
    on(host, B)
    found = replicas(host)
    assert sorted(found) == ["vllm-0", "vllm-1", "vllm-2"], sorted(found)
    for name, c in found.items():
        assert c["State"]["Running"], (name, c["State"])
        assert c["Config"]["Image"] == NEW
        assert "--compilation-config" not in c["Config"]["Cmd"], name
        assert "ascend-deploy.rollback" not in c["Config"]["Labels"]
    last_good = json.loads(host.file(f"{STATE}/last-good/containers.json").content_string)
    assert last_good["image"] == NEW
    assert all("--compilation-config" not in r["command"] for r in last_good["replicas"])
    assert all(answers_paris(host, port) for port in (8000, 8001, 8002))
