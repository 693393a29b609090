"""ascend_deploy.reporting.file_sd: target groups, validation, merge and the atomic write."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ascend_deploy.errors import InputError
from ascend_deploy.reporting import file_sd

REPLICA = {"host": "npu-a", "address": "10.0.0.1", "port": 8001, "npus": [2, 3],
           "model": "qwen3-8b", "service": "qwen3", "replica": "qwen3-1"}  # fmt: skip


def test_replica_group_labels_and_targets():
    group = file_sd.replica_group(REPLICA, {"cluster": "bj-1"})
    assert group == {
        "targets": ["10.0.0.1:8001"],
        "labels": {"cluster": "bj-1", "host": "npu-a", "npu": "2,3", "model": "qwen3-8b",
                   "service": "qwen3", "replica": "qwen3-1"},
    }  # fmt: skip
    assert file_sd.target("::1", 8000) == "[::1]:8000"


@pytest.mark.parametrize(
    ("change", "labels", "message"),
    [
        ({"port": 70000}, {}, "port 70000 of 10.0.0.1 is not a TCP port"),
        ({"address": "a b"}, {}, "scrape address 'a b' is not a host name or IP"),
        ({}, {"1x": "v"}, "label name '1x' is not valid in Prometheus"),
        ({}, {"host": "other"}, "extra label(s) host would replace the replica's own"),
        ({"npus": None} | {}, {}, None),
    ],
)
def test_bad_input_is_refused_with_the_value(change, labels, message):
    replica = {**REPLICA, **change}
    if message is None:  # npus given as a scalar is accepted as it is
        assert file_sd.replica_group(replica)["labels"]["npu"] == "None"
        return
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        file_sd.replica_group(replica, labels)


def test_merge_replaces_keeps_and_drops_hosts():
    old = [file_sd.replica_group({**REPLICA, "host": h}) for h in ("npu-a", "npu-b", "gone")]
    new = [file_sd.replica_group({**REPLICA, "port": 9000})]
    merged = file_sd.merge(old, new, ["npu-a"], fleet=["npu-a", "npu-b"])
    assert [(g["labels"]["host"], g["targets"]) for g in merged] == [
        ("npu-a", ["10.0.0.1:9000"]),
        ("npu-b", ["10.0.0.1:8001"]),
    ]


def test_update_writes_atomically_and_only_on_change(tmp_path):
    path = str(tmp_path / "d" / "targets.json")
    changed, groups = file_sd.update(path, [REPLICA], ["npu-a"])
    assert changed and json.loads(Path(path).read_text()) == groups
    inode = os.stat(path).st_ino
    assert file_sd.update(path, [REPLICA], ["npu-a"]) == (False, groups)
    assert os.stat(path).st_ino == inode
    assert file_sd.update(path, [], ["npu-a"], check=True) == (True, [])
    assert json.loads(Path(path).read_text()) == groups  # check mode wrote nothing
    assert file_sd.update(path, [], ["npu-a"]) == (True, [])
    assert json.loads(Path(path).read_text()) == [] and os.listdir(tmp_path / "d") == [
        "targets.json"
    ]


def test_existing_file_must_be_file_sd(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"targets": ["a:1"]}))
    with pytest.raises(InputError, match="is not a JSON list of target groups"):
        file_sd.load(str(path))
    path.write_text(json.dumps([{"targets": "a:1"}]))
    with pytest.raises(InputError, match="entry 0 has no list of targets"):
        file_sd.load(str(path))
    with pytest.raises(InputError, match="replicas of npu-a given, but not among"):
        file_sd.update(str(tmp_path / "u.json"), [REPLICA], ["npu-b"])


def test_two_services_on_one_host_keep_each_others_targets(tmp_path):
    """Issue 22: deploying or undeploying service B on a host leaves service A's targets."""
    path = str(tmp_path / "targets.json")
    a = {**REPLICA, "service": "qwen3", "replica": "qwen3-0", "port": 8000}
    b = {**REPLICA, "service": "other", "replica": "other-0", "port": 8004}
    file_sd.update(path, [a], ["npu-a"], services={"npu-a": "qwen3"})
    _, groups = file_sd.update(path, [b], ["npu-a"], services={"npu-a": "other"})
    assert sorted(g["labels"]["replica"] for g in groups) == ["other-0", "qwen3-0"]
    # B's undeploy: only B's targets leave
    _, groups = file_sd.update(path, [], ["npu-a"], services={"npu-a": "other"})
    assert [g["labels"]["replica"] for g in groups] == ["qwen3-0"]
    assert json.loads(Path(path).read_text()) == groups
    # without services (older callers): the host's groups are all replaced
    _, groups = file_sd.update(path, [b], ["npu-a"])
    assert [g["labels"]["replica"] for g in groups] == ["other-0"]
