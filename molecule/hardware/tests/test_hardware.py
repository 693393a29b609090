"""Verify molecule/hardware: every chip of an A3 and a 300I Duo host serves (issue 21).

Runs as molecule's testinfra verifier, or by hand:
``pytest --hosts=ansible://ascend_llm --ansible-inventory=$MOLECULE_INVENTORY_FILE \
molecule/hardware/tests``.
What a host has comes from its own npu-smi (``info`` and ``info -m``, parsed by the bundle's parser
on the controller), never from the preset: the replicas must cover exactly those devices.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(REPO / "src"))

from ascend_deploy.host import npu_smi  # noqa: E402

SERVICE = "qwen3"
# What each host is, for the image tag a real host of its family pulls (upstream's suffixes).
FAMILY = {"hw-a3": ("a3", "-a3", 16), "hw-duo": ("310p", "-310p", 4)}
IMAGE = "quay.io/ascend/vllm-ascend:v0.23.0"


def _name(host) -> str:
    return host.backend.get_hostname()


def _devices(host) -> dict[int, tuple[int, int]]:
    """device id -> (NPU, chip) from the host's own npu-smi."""
    info = npu_smi.parse(host.check_output("npu-smi info"), kind="info", source="npu-smi info")
    mapped = npu_smi.parse(host.check_output("npu-smi info -m"), kind="map", source="info -m")
    assert npu_smi.hardware_of(info["chips"]) == FAMILY[_name(host)][0]
    return {c["device"]: (c["npu"], c["chip"]) for c in npu_smi.assign_devices(info, mapped)}


def _replicas(host) -> list[dict]:
    names = host.check_output(
        f"docker ps -a --filter label=ascend-deploy.service={SERVICE} --format '{{{{.Names}}}}'"
    ).split()
    return [json.loads(host.check_output(f"docker inspect {n}"))[0] for n in sorted(names)]


def test_replicas_cover_every_chip_exactly_once(host):
    devices = _devices(host)
    assert len(devices) == FAMILY[_name(host)][2]
    mounted: list[int] = []
    for c in _replicas(host):
        assert c["State"]["Running"], (c["Name"], c["State"])
        assert c["HostConfig"]["Privileged"] is False
        ids = sorted(
            int(d["PathOnHost"].removeprefix("/dev/davinci"))
            for d in c["HostConfig"]["Devices"]
            if d["PathOnHost"].removeprefix("/dev/davinci").isdigit()
        )
        mounted += ids
        # the host's ids on the label, the container's own numbering in the variable
        assert c["Config"]["Labels"]["ascend-deploy.npus"] == ",".join(map(str, ids))
        env = dict(e.split("=", 1) for e in c["Config"]["Env"])
        assert env["ASCEND_RT_VISIBLE_DEVICES"] == ",".join(str(i) for i in range(len(ids)))
    assert sorted(mounted) == sorted(devices), "every device once, none twice, none left out"


def test_each_host_runs_its_familys_image(host):
    suffix = FAMILY[_name(host)][1]
    assert {c["Config"]["Image"] for c in _replicas(host)} == {IMAGE + suffix}


def test_verification_passed_on_every_host():
    reports = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "reports"
    rows = {r["host"]: r for r in json.loads((reports / "deploy-summary.json").read_text())}
    assert set(rows) == set(FAMILY)
    for name, (_family, _suffix, chips) in FAMILY.items():
        row = rows[name]
        assert row["status"] == "deployed", row
        count, tp = row["replicas"].split(" x TP")
        assert int(count) * int(tp) == chips, row


def test_the_300i_duo_serves_a_float16_copy_and_the_a3_bfloat16(host):
    # 310P has no BF16: FP8 is converted straight to FP16 there (issue 21 §4)
    want = {"hw-a3": ("-bf16", "bfloat16"), "hw-duo": ("-fp16", "float16")}[_name(host)]
    served = {c["Config"]["Cmd"][2] for c in _replicas(host)}
    assert len(served) == 1 and served.pop().endswith(want[0])
    model = next(iter({c["Config"]["Cmd"][2] for c in _replicas(host)}))
    config = json.loads(host.file(f"{model}/config.json").content_string)
    assert config["torch_dtype"] == want[1]
