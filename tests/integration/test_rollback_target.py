"""The rollback target survives a rollout that never verified (issue 22, data loss).

last-good/ moves to a new definition when /health answers, before verification; tasks/snapshot.yml
copied last-good/ over verify-previous/ at the start of every run. After a Ctrl-C during
verification the rerun therefore snapshotted the unverified definition and "rolled back" to it,
and the definition that had verified was gone from the host. The role's own snapshot tasks run
here on localhost against a state directory laid out as each case leaves it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ANSIBLE_PLAYBOOK, REPO, run_local_play

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="needs the venv's ansible-playbook"),
]


def _definition(directory: Path, name: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "containers.json").write_text(f'[{{"name": "{name}"}}]\n')
    (directory / "service.env").write_text(f"DEFINITION={name}\n")


def _snapshot(tmp_path: Path, state: Path, tasks: str = "snapshot.yml") -> str:
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {"_vllm_service_state_dir": str(state), "vllm_service_api_key": ""},
            "tasks": [
                {
                    "name": "Run the role's tasks",
                    "ansible.builtin.include_tasks": str(REPO / "roles/vllm_service/tasks" / tasks),
                }
            ],
        }
    ]
    done = run_local_play(play, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_a_verified_service_is_snapshotted(tmp_path):
    state = tmp_path / "etc" / "qwen3"
    _definition(state / "last-good", "verified")
    _snapshot(tmp_path, state)
    assert (state / "verify-previous" / "containers.json").read_text() == '[{"name": "verified"}]\n'
    assert (state / "verify-previous" / "service.env").read_text() == "DEFINITION=verified\n"


def test_the_snapshot_of_an_unverified_rollout_is_kept(tmp_path):
    # A Ctrl-C during verification: last-good/ already holds the new, unverified definition and
    # the snapshot of the verified one is still there.
    state = tmp_path / "etc" / "qwen3"
    _definition(state / "last-good", "unverified")
    _definition(state / "verify-previous", "verified")
    out = _snapshot(tmp_path, state)
    assert (state / "verify-previous" / "containers.json").read_text() == '[{"name": "verified"}]\n'
    assert (state / "verify-previous" / "service.env").read_text() == "DEFINITION=verified\n"
    assert "did not finish its verification" in out


def test_a_snapshot_without_a_service_is_forgotten(tmp_path):
    state = tmp_path / "etc" / "qwen3"
    _definition(state / "verify-previous", "stale")
    _snapshot(tmp_path, state)
    assert not (state / "verify-previous").exists()


def test_an_interrupted_transition_is_named_by_the_next_run(tmp_path):
    state = tmp_path / "etc" / "qwen3"
    _definition(state / "last-good", "verified")
    (state / "transition.json").write_text(
        '{"phase": "verifying", "run": "r1", "playbook": "deploy.yml", "controller": "ctl",'
        ' "since": "2026-12-03T13:00:00Z"}'
    )
    out = " ".join(_snapshot(tmp_path, state).split())
    assert (
        "an earlier run (r1, deploy.yml from ctl) was interrupted while verifying "
        "(since 2026-12-03T13:00:00Z)"
    ) in out
    assert "rolls back to last-good/, which holds only a definition that passed verification" in out


def test_promotion_moves_the_verified_candidate_to_last_good_and_ends_the_transition(tmp_path):
    state = tmp_path / "etc" / "qwen3"
    _definition(state / "last-good", "verified")
    _definition(state / "candidate", "new")
    (state / "transition.json").write_text('{"phase": "verifying"}')
    _snapshot(tmp_path, state, "promote.yml")
    assert (state / "last-good" / "containers.json").read_text() == '[{"name": "new"}]\n'
    assert (state / "last-good" / "service.env").read_text() == "DEFINITION=new\n"
    assert not (state / "candidate").exists() and not (state / "transition.json").exists()
    # Nothing to promote (a converged run, verify.yml): last-good/ stays as it is.
    _snapshot(tmp_path, state, "promote.yml")
    assert (state / "last-good" / "containers.json").read_text() == '[{"name": "new"}]\n'
