"""The NPU network before a multi-node start: parse ``hccn_tool`` and ``/etc/hccn.conf``, check.

Standard library only; runs on the host (or on the controller with outputs gathered there).
The checks are the ones vLLM-Ascend's multi-node guides run before a start ("Verify
Multi-Node Communication Environment": every ``-link -g`` UP, every ``-net_health -g``
Success, an NPU IP per card, then a cross-node ``-ping``;
https://docs.vllm.ai/projects/ascend/en/latest/tutorials/models/DeepSeek-R1.html). Formats
(verbatim samples and their sources: tests/data/hccn/SOURCES):

* ``hccn_tool -i N -link -g``       ``link status: UP`` (or ``DOWN``)
* ``hccn_tool -i N -net_health -g`` ``net health status: Success`` (or ``Init``, ``Fault``,
  ``Socket fail``, ``Receive timeout``, ``Unreachable``, ...)
* ``hccn_tool -i N -ip -g``         ``ipaddr:10.xx.xx.10`` / ``netmask:255.255.255.0``
* ``hccn_tool -i N -netdetect -g``  ``netdetect address: 11.12.165.1``
* ``hccn_tool -i N -gateway -g``    ``default gateway:11.12.165.1, Iface:eth0``
* ``hccn_tool -i N -ping -g address X``  ``device N PING X``, ``recv seq=0,time=0.114000ms``
  or ``recv time out seq=0`` lines, ``3 packets transmitted, 3 received, 0.00% packet loss``
* ``/etc/hccn.conf``                ``address_N=...``, ``netmask_N=...``, ``netdetect_N=...``,
  ``gateway_N=...`` lines

Every finding names the member, the NPU and the exact command that shows it.
"""

from __future__ import annotations

import ipaddress
import re

from ..errors import InputError

_LINK = re.compile(r"link status:\s*(\w+)", re.IGNORECASE)
_HEALTH = re.compile(r"net health status:\s*([^\r\n]+)", re.IGNORECASE)
_IPADDR = re.compile(r"ipaddr:\s*([0-9.]+)")
_NETMASK = re.compile(r"netmask:\s*([0-9.]+)")
_NETDETECT = re.compile(r"netdetect address:\s*([0-9.]+)", re.IGNORECASE)
_GATEWAY = re.compile(r"default gateway:\s*([0-9.]+)(?:,\s*Iface:\s*(\S+))?", re.IGNORECASE)
_PING_HEAD = re.compile(r"device\s+(\d+)\s+PING\s+(\S+)")
_PING_SUM = re.compile(
    r"(\d+)\s+packets transmitted,\s*(\d+)\s+received,\s*([0-9.]+)%\s+packet loss"
)
_CONF = re.compile(r"^\s*([a-z_]+?)_(\d+)\s*=\s*(\S*)\s*$")

TOOL = "hccn_tool"


def command(npu: int, kind: str, address: str | None = None) -> str:
    """The exact command line whose output shows ``kind`` for ``npu``."""
    if kind == "ping":
        return f"{TOOL} -i {npu} -ping -g address {address}"
    return f"{TOOL} -i {npu} -{kind} -g"


def _one(pattern: re.Pattern, text: str, what: str) -> re.Match:
    match = pattern.search(text or "")
    if match is None:
        raise InputError(f"not {what} output: {(text or '').strip()[:80]!r}")
    return match


def parse_link(text: str) -> str:
    """``UP`` / ``DOWN`` from ``-link -g``."""
    return _one(_LINK, text, "hccn_tool -link -g").group(1).upper()


def parse_net_health(text: str) -> str:
    """``Success``, ``Init``, ``Fault``, ... from ``-net_health -g``."""
    return _one(_HEALTH, text, "hccn_tool -net_health -g").group(1).strip()


def parse_ip(text: str) -> dict:
    """``{"ipaddr", "netmask"}`` from ``-ip -g`` (None for a field that is absent)."""
    ip, mask = _IPADDR.search(text or ""), _NETMASK.search(text or "")
    return {"ipaddr": ip.group(1) if ip else None, "netmask": mask.group(1) if mask else None}


def parse_netdetect(text: str) -> str:
    return _one(_NETDETECT, text, "hccn_tool -netdetect -g").group(1)


def parse_gateway(text: str) -> dict:
    m = _one(_GATEWAY, text, "hccn_tool -gateway -g")
    return {"gateway": m.group(1), "iface": m.group(2)}


def parse_ping(text: str) -> dict:
    """``{"npu", "target", "transmitted", "received", "loss_pct", "ok"}`` from ``-ping -g``."""
    head = _PING_HEAD.search(text or "")
    total = _one(_PING_SUM, text, "hccn_tool -ping -g")
    sent, got, loss = int(total.group(1)), int(total.group(2)), float(total.group(3))
    return {
        "npu": int(head.group(1)) if head else None,
        "target": head.group(2) if head else None,
        "transmitted": sent,
        "received": got,
        "loss_pct": loss,
        "ok": sent > 0 and got == sent,
    }


def parse_hccn_conf(text: str) -> dict[int, dict[str, str]]:
    """``/etc/hccn.conf`` as ``{npu: {"address", "netmask", "netdetect", "gateway", ...}}``."""
    out: dict[int, dict[str, str]] = {}
    for line in (text or "").splitlines():
        m = _CONF.match(line)
        if m:
            out.setdefault(int(m.group(2)), {})[m.group(1)] = m.group(3)
    return out


def network_of(ip: str, netmask: str) -> ipaddress.IPv4Network:
    return ipaddress.IPv4Network(f"{ip}/{netmask}", strict=False)


def _finding(member: str, npu: int | None, check: str, cmd: str, message: str) -> dict:
    return {"member": member, "npu": npu, "check": check, "command": cmd, "message": message}


def check_member(
    name: str, outputs: dict, leader_networks: dict[int, ipaddress.IPv4Network] | None = None
) -> list[dict]:
    """Findings for one member. ``outputs``: ``{npu: {"link": text, "net_health": text,
    "ip": text, "ping": {address: text}}}`` (any key may be missing: not checked).
    ``leader_networks``: the leader's NPU networks by NPU index (NPU i of a member must be
    on the leader's NPU i network: the direct-connect and switch layouts both pair them)."""
    found = []
    for npu in sorted(outputs):
        out = outputs[npu]
        where = f"{name} NPU {npu}"
        if "link" in out:
            state = parse_link(out["link"])
            if state != "UP":
                found.append(
                    _finding(
                        name,
                        npu,
                        "link",
                        command(npu, "link"),
                        f"{where}: link status {state} (must be UP)",
                    )
                )
        if "net_health" in out:
            health = parse_net_health(out["net_health"])
            if health.lower() != "success":
                hint = (
                    " (no netdetect address set: `hccn_tool -i N -netdetect -s address X`)"
                    if health.lower() == "init"
                    else ""
                )
                found.append(
                    _finding(
                        name,
                        npu,
                        "net_health",
                        command(npu, "net_health"),
                        f"{where}: net health status {health} (must be Success)" + hint,
                    )
                )
        if "ip" in out:
            ip = parse_ip(out["ip"])
            if not ip["ipaddr"] or not ip["netmask"]:
                found.append(
                    _finding(
                        name,
                        npu,
                        "ip",
                        command(npu, "ip"),
                        f"{where}: no NPU IP address configured (address_{npu} / "
                        f"netmask_{npu} in /etc/hccn.conf)",
                    )
                )
            elif leader_networks and npu in leader_networks:
                net = network_of(ip["ipaddr"], ip["netmask"])
                lead = leader_networks[npu]
                if ipaddress.IPv4Address(ip["ipaddr"]) not in lead or net != lead:
                    found.append(
                        _finding(
                            name,
                            npu,
                            "subnet",
                            command(npu, "ip"),
                            f"{where}: NPU IP {ip['ipaddr']}/{ip['netmask']} is "
                            f"not on the leader's NPU {npu} network {lead}",
                        )
                    )
        for address, text in (out.get("ping") or {}).items():
            result = parse_ping(text)
            if not result["ok"]:
                found.append(
                    _finding(
                        name,
                        npu,
                        "ping",
                        command(npu, "ping", address),
                        f"{where}: ping to {address} failed ({result['received']}/"
                        f"{result['transmitted']} received, {result['loss_pct']:.2f}% "
                        "packet loss)",
                    )
                )
    return found


def leader_networks(outputs: dict) -> dict[int, ipaddress.IPv4Network]:
    """The leader's NPU networks by NPU index, from its ``-ip -g`` outputs."""
    nets = {}
    for npu, out in outputs.items():
        ip = parse_ip(out.get("ip", ""))
        if ip["ipaddr"] and ip["netmask"]:
            nets[npu] = network_of(ip["ipaddr"], ip["netmask"])
    return nets


def check_hccl_if_ip(
    name: str, address: str, netmask: str, leader: str, leader_address: str
) -> dict | None:
    """A finding when the member's HCCL_IF_IP (its host NIC address) is not on the leader's
    host network (``address``/``netmask`` as ``ip -4 addr show <nic>`` shows them)."""
    net = network_of(address, netmask)
    if ipaddress.IPv4Address(leader_address) in net:
        return None
    return _finding(
        name,
        None,
        "hccl_if_ip",
        f"ip -4 addr show  # on {name}",
        f"{name}: HCCL_IF_IP {address}/{netmask} ({net}) is not on the network of the leader "
        f"{leader} ({leader_address}); HCCL and Gloo bootstrap to the leader over this NIC",
    )


def check_group(members: list[dict], leader: str | None = None) -> list[dict]:
    """Every finding of a group. A member: ``{"name", "address", "netmask"?, "outputs"}``
    (``outputs`` as in ``check_member``). The leader is the first member unless named."""
    if not members:
        return []
    lead = next((m for m in members if m["name"] == leader), members[0]) if leader else members[0]
    nets = leader_networks(lead.get("outputs") or {})
    found = []
    for m in members:
        found += check_member(m["name"], m.get("outputs") or {}, None if m is lead else nets)
        if m is not lead and m.get("address") and m.get("netmask"):
            f = check_hccl_if_ip(
                m["name"], m["address"], m["netmask"], lead["name"], lead["address"]
            )
            if f:
                found.append(f)
    return found
