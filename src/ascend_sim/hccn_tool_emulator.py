"""``hccn_tool`` for the simulated host: prints the documented formats from the state file.

Supported: ``-i N -link -g``, ``-net_health -g``, ``-ip -g``, ``-netdetect -g``,
``-gateway -g``, ``-ping -g address X``; ``render_hccn_conf`` writes ``/etc/hccn.conf``.
Formats as in tests/data/hccn (sources: tests/data/hccn/SOURCES). State (optional; the
defaults give every NPU an UP, healthy link)::

    "network": {"npu_subnet": "10.20", "host_octet": 10,
                "npus": {"<npu id>": {"ipaddr", "netmask", "link": "UP"|"DOWN",
                                      "net_health": "Success"|..., "netdetect", "gateway"}}},
    "faults": {"hccn_link_down": [npu ids], "hccn_ping_fail": [addresses],
               "hccn_no_ip": [npu ids]}

By default NPU i has ``<npu_subnet>.<i>.<host_octet>/24`` (each NPU index its own /24, the
direct-connect pairing) with netdetect and gateway ``<npu_subnet>.<i>.1``. A link set down
(as ``hccn_tool -i N -link -s down`` does on a real host) also turns ``-net_health`` to
``Fault`` (Ascend mind-cluster fault-injection docs) and fails every ping from that NPU.
"""

from __future__ import annotations

import ipaddress
import sys
from collections.abc import Sequence

from ascend_deploy.errors import AscendDeployError, InputError

from .state import load_state


def _ids(state: dict, key: str) -> set:
    value = state.get("faults", {}).get(key, [])
    if not isinstance(value, list):
        raise InputError(f"faults.{key} must be a list, got {value!r}")
    return {str(v) for v in value}


def npu_network(state: dict, npu: int) -> dict:
    """One NPU's network facts after defaults and faults."""
    net = state.get("network") or {}
    prefix = str(net.get("npu_subnet", "10.20"))
    octet = int(net.get("host_octet", 10))
    custom = (net.get("npus") or {}).get(str(npu), {})
    info = {
        "ipaddr": f"{prefix}.{npu}.{octet}",
        "netmask": "255.255.255.0",
        "link": "UP",
        "net_health": "Success",
        "netdetect": f"{prefix}.{npu}.1",
        "gateway": f"{prefix}.{npu}.1",
        **custom,
    }
    if str(npu) in _ids(state, "hccn_link_down"):
        info["link"], info["net_health"] = "DOWN", "Fault"
    if str(npu) in _ids(state, "hccn_no_ip"):
        info["ipaddr"] = info["netmask"] = None
    return info


def npu_ids(state: dict) -> list[int]:
    return list(state["card"]["npu_ids"])


def render(state: dict, npu: int, kind: str, address: str | None = None) -> str:
    if npu not in npu_ids(state):
        raise _Usage(f"device {npu} does not exist")
    n = npu_network(state, npu)
    if kind == "link":
        return f"link status: {n['link']}\n"
    if kind == "net_health":
        return f"net health status: {n['net_health']}\n"
    if kind == "ip":
        if not n["ipaddr"]:
            return ""
        return f"ipaddr:{n['ipaddr']}\nnetmask:{n['netmask']}\n"
    if kind == "netdetect":
        return f"netdetect address: {n['netdetect']}\n"
    if kind == "gateway":
        return f"default gateway:{n['gateway']}, Iface:eth{npu}\n"
    if kind == "ping":
        try:
            ipaddress.IPv4Address(str(address))
        except ValueError:
            raise _Usage(f"-ping needs 'address <IPv4>', got {address!r}") from None
        fail = n["link"] != "UP" or not n["ipaddr"] or str(address) in _ids(state, "hccn_ping_fail")
        lines = [f"device {npu} PING {address}"]
        if fail:
            lines += [f"recv time out seq={s}" for s in range(3)]
            lines.append("3 packets transmitted, 0 received, 100.00% packet loss")
        else:
            lines += [f"recv seq={s},time=0.0{64 + s}000ms" for s in range(3)]
            lines.append("3 packets transmitted, 3 received, 0.00% packet loss")
        return "\n".join(lines) + "\n"
    raise _Usage(f"-{kind} is not simulated")


def render_hccn_conf(state: dict) -> str:
    """``/etc/hccn.conf`` for the state (``address_N``, ``netmask_N``, ``netdetect_N``,
    ``gateway_N``, ``send_arp_status_N`` per NPU)."""
    lines = []
    for npu in npu_ids(state):
        n = npu_network(state, npu)
        if n["ipaddr"]:
            lines += [f"address_{npu}={n['ipaddr']}", f"netmask_{npu}={n['netmask']}"]
        lines += [f"netdetect_{npu}={n['netdetect']}", f"gateway_{npu}={n['gateway']}",
                  f"send_arp_status_{npu}=1"]  # fmt: skip
    return "\n".join(lines) + "\n"


class _Usage(Exception):
    pass


def run(args: list[str], state: dict) -> str:
    """The text ``hccn_tool ARGS`` prints for ``state``."""
    if len(args) < 4 or args[0] != "-i":
        raise _Usage("supported: -i N -link|-net_health|-ip|-netdetect|-gateway -g, "
                     "-i N -ping -g address X")  # fmt: skip
    try:
        npu = int(args[1])
    except ValueError:
        raise _Usage(f"-i needs a device id, got {args[1]!r}") from None
    kind, rest = args[2].lstrip("-"), args[3:]
    if rest[:1] != ["-g"]:
        raise _Usage(f"only -g (get) is simulated, got {' '.join(rest)!r}")
    if kind == "ping":
        if len(rest) != 3 or rest[1] != "address":
            raise _Usage("usage: -i N -ping -g address X")
        return render(state, npu, kind, rest[2])
    if len(rest) != 1:
        raise _Usage(f"unexpected arguments after -g: {' '.join(rest[1:])!r}")
    return render(state, npu, kind)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        state = load_state()
        sys.stdout.write(run(args, state))
    except AscendDeployError as exc:
        print(f"hccn_tool (ascend-sim): {exc}", file=sys.stderr)
        return 2
    except _Usage as exc:
        print(f"hccn_tool (ascend-sim): {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
