"""Holders of a service's ports and NPUs and ending our stale ones (what ``ascend_procs`` runs),
with real processes: a listening ``http.server`` and ``sleep`` processes placed in npu-smi's
process table of a real sample."""

from __future__ import annotations

import signal

import pytest
from conftest import sample, spawn_sleeper

from ascend_deploy.host import npu_smi
from ascend_deploy.host.service_holders import (
    Scope,
    others_used_by_device,
    others_used_mb,
    settle,
    survey,
)

CID = "a" * 64


@pytest.fixture
def sleepers():
    procs = [spawn_sleeper(), spawn_sleeper()]
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=10)


def npu_table(pids: list[int]) -> dict:
    """The A3 sample's two NPU processes (NPU 0, chips 0 and 1), given these PIDs."""
    info = npu_smi.parse(sample("npu-smi-info_A3_26.0.rc1_wide_trimmed_2.txt"))
    for proc, pid in zip(info["processes"], pids, strict=True):
        proc["pid"] = pid
    return info


def test_a_foreign_listener_is_reported_and_left_running_unless_opted_in(http_listener):
    proc, port = http_listener
    scope = Scope("vllm", ports=[port], containers={})
    found = survey(scope)
    assert found.result["managed"] == [] and found.result["stale"] == []
    [foreign] = found.result["foreign"]
    assert (
        foreign["pid"] == proc.pid
        and foreign["port"] == port
        and "http.server" in " ".join(foreign["argv"])
    )
    assert found.foreign_pids == [proc.pid] and found.stale_pids == []
    # state=absent without the opt-in ends nothing
    assert settle(scope, end=True, dry_run=False)["stopped"] == []
    assert proc.poll() is None
    opted = Scope("vllm", ports=[port], containers={}, kill_foreign=True)
    would = settle(opted, end=True, dry_run=True)["stopped"]
    assert would == [{**foreign, "foreign": True, "pid": proc.pid, "result": "would stop"}]
    assert proc.poll() is None
    done = settle(opted, end=True, dry_run=False, grace_s=5)
    assert [(s["pid"], s["result"], s["foreign"]) for s in done["stopped"]] == [
        (proc.pid, "terminated", True)
    ]
    assert proc.wait(timeout=5) == -signal.SIGTERM
    assert done["foreign"] == []  # surveyed again after the stop


def test_our_replica_is_managed_and_stale_only_outside_keep(sleepers):
    ours, theirs = sleepers
    info = npu_table([ours.pid, theirs.pid])
    containers = {CID: {"name": "vllm-0", "service": "vllm", "pid": ours.pid}}
    kept = survey(Scope("vllm", npu_info=info, keep=["vllm-0"], containers=containers))
    assert [e["pid"] for e in kept.result["managed"]] == [ours.pid]
    assert kept.result["managed"][0]["container_name"] == "vllm-0"
    assert kept.result["stale"] == [] and kept.result["stale_containers"] == []
    assert [e["pid"] for e in kept.result["foreign"]] == [theirs.pid]
    stale = settle(Scope("vllm", npu_info=info, containers=containers), end=True, dry_run=False)
    # a stale replica in a container is removed by name (the role), never signalled here
    assert stale["stale_containers"] == ["vllm-0"] and stale["stopped"] == []
    assert ours.poll() is None and theirs.poll() is None


def test_foreign_npu_holders_count_on_our_npus_and_opting_in_frees_their_memory(sleepers):
    on_ours, elsewhere = sleepers
    chips = [
        {"npu": n, "chip": 0, "hbm_total_mb": 65536, "hbm_used_mb": used}
        for n, used in [(2, 40000), (5, 9000)]
    ]
    table = [
        {"npu": 2, "chip": 0, "pid": on_ours.pid, "name": "python", "memory_mb": 39000},
        {"npu": 5, "chip": 0, "pid": elsewhere.pid, "name": "python", "memory_mb": 8000},
    ]
    info = {"chips": chips, "processes": table}
    listed = survey(Scope("qwen3", npu_info=info, npus=[2, 3], containers={})).result
    assert [e["pid"] for e in listed["foreign"]] == [on_ours.pid]
    assert listed["others_used_mb"] == {"2": 40000, "5": 9000}
    opted = settle(
        Scope("qwen3", npu_info=info, npus=[2, 3], kill_foreign=True, containers={}),
        end=False,
        dry_run=False,
    )
    assert opted["others_used_mb"] == {"2": 1000, "5": 9000} and opted["stopped"] == []
    assert on_ours.poll() is None and elsewhere.poll() is None


def test_holders_that_are_not_running_here_are_left_out():
    """npu-smi (run in a container, or stale) lists PIDs that do not exist in this namespace."""
    info = npu_smi.parse(sample("npu-smi-info_with_processes_910B1_elided_3.txt"))
    found = survey(Scope("vllm", npu_info=info, containers={}))
    assert found.result["foreign"] == [] and found.result["managed"] == []
    assert set(found.result["others_used_mb"]) == {str(c["npu"]) for c in info["chips"]}


def test_memory_freed_is_subtracted_per_npu_and_never_below_zero():
    info = {
        "chips": [
            {"npu": 0, "chip": 0, "hbm_used_mb": 3000},
            {"npu": 0, "chip": 1, "hbm_used_mb": 7000},  # second chip: counted under chip 0
            {"npu": 1, "chip": 0, "hbm_used_mb": 100},
        ]
    }
    freed = [{"npus": [{"npu": 0, "memory_mb": 2500}, {"npu": 1, "memory_mb": 500}]}]
    assert others_used_mb(info, freed) == {"0": 500, "1": 0}


def test_another_service_of_the_bundle_is_named_and_never_ended(sleepers):
    """issue 22: kill_foreign was offered (and would have ended) a second service of this bundle
    on the same NPUs; it is foreign with its service named, and never stopped."""
    other, stranger = sleepers
    info = npu_table([other.pid, stranger.pid])
    containers = {CID: {"name": "chat-0", "service": "chat", "pid": other.pid}}
    scope = Scope("qwen3", npu_info=info, kill_foreign=True, containers=containers)
    found = survey(scope)
    by_pid = {e["pid"]: e for e in found.result["foreign"]}
    assert by_pid[other.pid]["other_service"] == "chat"
    assert "other_service" not in by_pid[stranger.pid]
    assert found.result["other_services"] == ["chat"]
    assert found.foreign_pids == [stranger.pid]  # only the stranger may be ended
    # the other service's memory stays counted as in use, even with kill_foreign
    freed_stranger_only = others_used_mb(info, [by_pid[stranger.pid]])
    assert found.result["others_used_mb"] == freed_stranger_only
    assert freed_stranger_only != others_used_mb(info, list(by_pid.values()))
    done = settle(scope, end=True, dry_run=False, grace_s=5)
    assert [s["pid"] for s in done["stopped"]] == [stranger.pid]
    assert other.poll() is None


def test_memory_in_use_is_read_per_chip_by_device_id():
    """Every A3 die and 300I Duo chip on its own (issue 21 §1); DDR where a chip has no HBM."""
    a3 = npu_smi.parse(sample("npu-smi-info_A3_26.0.rc1_wide_trimmed_2.txt"))
    npu_smi.assign_devices(a3)
    used = others_used_by_device(a3, [])
    assert used == {str(c["device"]): c["hbm_used_mb"] for c in a3["chips"]}
    assert set(used) == {"0", "1", "10", "11"}  # die 1 of NPU 0 is not folded into die 0
    # what ours hold on die 11 (NPU 5 chip 1) is freed there only
    freed = [{"npus": [{"npu": 5, "chip": 1, "memory_mb": 1000}]}]
    after = others_used_by_device(a3, freed)
    assert after["11"] == used["11"] - 1000 and after["10"] == used["10"]

    duo = npu_smi.parse(sample("npu-smi-info_310P3_duo_25.2.0_partial_4.txt"))
    npu_smi.assign_devices(duo)
    ddr = others_used_by_device(duo, [])
    assert ddr == {str(c["device"]): c["memory_used_mb"] for c in duo["chips"]}
    assert all(c["hbm_used_mb"] is None for c in duo["chips"]) and any(ddr.values())


def test_foreign_holders_are_matched_per_chip_by_device_id(sleepers):
    """A3: a stranger on die 0 of NPU 0 is not in the way of a replica on die 1 (issue 21 §1)."""
    die0, die1 = sleepers
    info = npu_table([die0.pid, die1.pid])
    npu_smi.assign_devices(info)
    by_chip = {(p["npu"], p["chip"]): p["pid"] for p in info["processes"]}
    assert by_chip == {(0, 0): die0.pid, (0, 1): die1.pid}
    devices = {c["chip"]: c["device"] for c in info["chips"] if c["npu"] == 0}
    per_card = survey(Scope("qwen3", npu_info=info, npus=[0], containers={})).result
    assert sorted(e["pid"] for e in per_card["foreign"]) == sorted([die0.pid, die1.pid])
    per_chip = survey(
        Scope("qwen3", npu_info=info, npus=[0], devices=[devices[1]], containers={})
    ).result
    assert [e["pid"] for e in per_chip["foreign"]] == [die1.pid]
    # kill_foreign ends only the holder of our die (dry run: what it would end)
    plan = settle(
        Scope("qwen3", npu_info=info, npus=[0], devices=[devices[1]], kill_foreign=True,
              containers={}),
        end=True,
        dry_run=True,
    )  # fmt: skip
    assert [s["pid"] for s in plan["stopped"]] == [die1.pid]
    assert die0.poll() is None and die1.poll() is None
