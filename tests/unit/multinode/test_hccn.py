"""hccn_tool parsing, the group network checks, and the emulated hccn_tool."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_deploy.errors import InputError
from ascend_deploy.host import hccn
from ascend_sim import hccn_tool_emulator as emu
from ascend_sim.state import load_preset

DATA = Path(__file__).resolve().parents[2] / "data" / "hccn"
SRC = Path(__file__).resolve().parents[3] / "src"


def text(name: str) -> str:
    return (DATA / name).read_text()


def test_documented_outputs_parse():
    assert hccn.parse_link(text("link_up.txt")) == "UP"
    assert hccn.parse_net_health(text("net_health_success.txt")) == "Success"
    assert hccn.parse_net_health(text("net_health_fault.txt")) == "Fault"
    assert hccn.parse_ip(text("ip.txt")) == {"ipaddr": "11.12.165.80", "netmask": "255.255.255.0"}
    assert hccn.parse_netdetect(text("netdetect.txt")) == "11.12.165.1"
    assert hccn.parse_gateway(text("gateway.txt")) == {"gateway": "11.12.165.1", "iface": "eth0"}
    ok = hccn.parse_ping(text("ping_ok.txt"))
    assert ok["ok"] and ok["npu"] == 0 and ok["target"] == "11.12.165.80"
    loss = hccn.parse_ping(text("ping_loss.txt"))
    assert not loss["ok"] and loss["received"] == 2 and loss["loss_pct"] == 33.33
    assert not hccn.parse_ping(text("ping_fail.txt"))["ok"]
    conf = hccn.parse_hccn_conf(text("hccn.conf"))
    assert conf[7]["address"] == "29.1.170.143" and conf[0]["netmask"] == "255.255.0.0"
    with pytest.raises(InputError, match="not hccn_tool -link -g output"):
        hccn.parse_link("garbage")


def outputs(state: dict, peer: str | None = None) -> dict:
    out = {}
    for npu in emu.npu_ids(state):
        o = {k: emu.render(state, npu, k) for k in ("link", "net_health", "ip")}
        if peer:
            o["ping"] = {peer: emu.render(state, npu, "ping", peer)}
        out[npu] = o
    return out


def host(octet: int, **faults) -> dict:
    state = load_preset("a2-910b3-8x64g")
    state["network"] = {"host_octet": octet}
    state["faults"].update(faults)
    return state


def test_healthy_group_has_no_findings():
    a, b = host(10), host(11)
    members = [
        {
            "name": "node0",
            "address": "10.0.0.10",
            "netmask": "255.255.255.0",
            "outputs": outputs(a),
        },
        {
            "name": "node1",
            "address": "10.0.0.11",
            "netmask": "255.255.255.0",
            "outputs": outputs(b, "10.20.0.10"),
        },
    ]
    assert hccn.check_group(members) == []


def test_each_failure_names_member_npu_and_command():
    a = host(10)
    b = host(11, hccn_link_down=[3], hccn_ping_fail=["10.20.0.10"], hccn_no_ip=[5])
    b["network"]["npus"] = {"6": {"ipaddr": "10.99.6.11"}}
    members = [
        {"name": "node0", "address": "10.0.0.10", "outputs": outputs(a)},
        {
            "name": "node1",
            "address": "10.0.1.11",
            "netmask": "255.255.255.0",
            "outputs": outputs(b, "10.20.0.10"),
        },
    ]
    found = hccn.check_group(members)
    got = {(f["member"], f["npu"], f["check"]) for f in found}
    assert ("node1", 3, "link") in got and ("node1", 3, "net_health") in got
    assert ("node1", 5, "ip") in got and ("node1", 6, "subnet") in got
    assert ("node1", 0, "ping") in got and ("node1", None, "hccl_if_ip") in got
    link = next(f for f in found if f["check"] == "link")
    assert link["command"] == "hccn_tool -i 3 -link -g" and "node1 NPU 3" in link["message"]
    ping = next(f for f in found if f["check"] == "ping" and f["npu"] == 0)
    assert ping["command"] == "hccn_tool -i 0 -ping -g address 10.20.0.10"
    assert all(f["member"] == "node1" for f in found)


def test_emulated_hccn_tool_entry_point(tmp_path):
    state = host(10, hccn_link_down=[1])
    path = tmp_path / "state.json"
    path.write_text(json.dumps(state))
    env = {**os.environ, "ASCEND_SIM_STATE": str(path), "PYTHONPATH": str(SRC)}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "ascend_sim.hccn_tool_emulator", *args],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )

    assert hccn.parse_link(run("-i", "0", "-link", "-g").stdout) == "UP"
    assert hccn.parse_link(run("-i", "1", "-link", "-g").stdout) == "DOWN"
    assert hccn.parse_net_health(run("-i", "1", "-net_health", "-g").stdout) == "Fault"
    assert hccn.parse_ip(run("-i", "2", "-ip", "-g").stdout)["ipaddr"] == "10.20.2.10"
    assert hccn.parse_netdetect(run("-i", "2", "-netdetect", "-g").stdout) == "10.20.2.1"
    assert hccn.parse_gateway(run("-i", "2", "-gateway", "-g").stdout)["iface"] == "eth2"
    assert hccn.parse_ping(run("-i", "0", "-ping", "-g", "address", "10.20.0.11").stdout)["ok"]
    assert not hccn.parse_ping(run("-i", "1", "-ping", "-g", "address", "10.20.1.11").stdout)["ok"]
    assert run("-i", "99", "-link", "-g").returncode == 1
    assert run("-i", "0", "-link", "-s", "down").returncode == 1
    conf = hccn.parse_hccn_conf(emu.render_hccn_conf(state))
    assert conf[2]["address"] == "10.20.2.10" and len(conf) == 8
