"""``npu-smi`` for the simulated host: prints the real layouts from the host's state file.

Supported: ``npu-smi info``, ``info -m``, ``info -l``, ``info -t board -i N [-c C]``,
``info -t usages -i N``, ``info -t health -i N [-c C]``, ``-v``. Every layout, width and
key order is the one in tests/data/samples (sources: docs/sources.md):

* the 98-column HBM table of A2/A3 (``npu-smi-info_910B4_32GB_24.1.1_partial_7.txt``,
  ``npu-smi-info_910B4-1_25.2.0_partial_8.txt``, ``npu-smi-info_A3_25.2.1_partial_4.txt``;
  24.1 and 25.x print the same table), the 106-column DDR table of 310P
  (``npu-smi-info_310P3_no_processes_3.txt``, ``npu-smi-info_310P3_duo_25.2.0_partial_4.txt``);
* ``-m`` / ``-l`` / ``-t``: a TAB, the key or column left-justified in 30 characters
  (``npu-smi-info-m_910B4_7.txt``, ``npu-smi-info-l_910B_2.txt``,
  ``npu-smi-info-t-board_910B2C_card_4.txt``); ``-t usages`` gains Aivector / NPU
  Utilization / Aicube keys on 25.x drivers (``npu-smi-info-t-usages_950_doc_4.txt``).

The process table is live: entries of ``ascend_sim.npu_registry`` whose process still runs
(host PID resolved) are listed and add their memory to the chip's HBM use.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from ascend_deploy.errors import AscendDeployError

from . import npu_registry
from .state import chips as state_chips
from .state import load_state

REGISTRY_REL = "usr/local/dcmi/.ascend-sim/procs"
# The DCMI failure an unusable driver gives (docs/sources.md, npu-smi).
DCMI_FAILURE = "dcmi module initialize failed. ret is -8005"


def registry_dir() -> str:
    return os.environ.get("ASCEND_SIM_PROCS") or os.path.join(
        os.environ.get("ASCEND_SIM_ROOT") or "/", REGISTRY_REL
    )


def live_processes() -> list:
    return npu_registry.live_holders(registry_dir())


# --------------------------------------------------------------------------- formatting


def _num(value: float | int | None, missing: str) -> str:
    if value is None:
        return missing
    if isinstance(value, float) and not value.is_integer():
        return f"{value:g}"
    return str(int(value))


def _power(value: float | None, missing: str) -> str:
    return missing if value is None else f"{float(value):.1f}"


def _pair(used: int | None, total: int | None, used_w: int, total_w: int) -> str:
    return f"{_num(used, 'NA'):<{used_w}}/ {_num(total, 'NA'):<{total_w}}"


def _bar(widths: Sequence[int], fill: str) -> str:
    return "+" + "+".join(fill * w for w in widths) + "+"


def _full(width: int, fill: str = "-") -> str:
    return "+" + fill * (width - 2) + "+"


def _row(*cells: str) -> str:
    return "|" + "|".join(cells) + "|"


def _text_row(text: str, width: int) -> str:
    return "| " + text.ljust(width - 3) + "|"


class _Layout:
    """Column widths and cell formats of one table family."""

    def __init__(self, hardware: str, style: str = "25.x") -> None:
        self.ddr = hardware == "310p"
        self.a3 = hardware == "a3"
        self.wide = style == "26.x" and not self.ddr
        if self.ddr:  # 106 columns: 31 | 17 | 54
            self.widths, self.id_w, self.name_w = (31, 17, 54), 8, 22
            self.power_w, self.temp_w, self.hp = 13, 18, (6, 14)
            self.banner_tool_w, self.missing_power = 41, "NA"
        elif self.wide:  # 116 columns: 27 | 15 | 70 (26.x drivers)
            self.widths, self.id_w, self.name_w = (27, 15, 70), 6, 20
            self.power_w, self.temp_w, self.hp = 21, 24, (5, 17)
            self.banner_tool_w, self.missing_power = 36, "-"
        else:  # 98 columns: 27 | 15 | 52
            self.widths, self.id_w, self.name_w = (27, 15, 52), 6, 20
            self.power_w, self.temp_w, self.hp = 12, 18, (5, 14)
            self.banner_tool_w, self.missing_power = 25, "-"
        self.width = sum(self.widths) + 4

    def banner(self, tool: str, driver: str) -> str:
        return _text_row(f"npu-smi {tool:<{self.banner_tool_w}}Version: {driver}", self.width)

    def headers(self) -> list[str]:
        w1, w2, w3 = self.widths
        if self.ddr:
            return [
                _row(f" {'NPU':<8}{'Name':<22}", f" {'Health':<16}",
                     f" {'Power(W)':<13}{'Temp(C)':<18}{'Hugepages-Usage(page)':<22}"),
                _row(f" {'Chip':<8}{'Device':<22}", f" {'Bus-Id':<16}",
                     f" {'AICore(%)':<13}{'Memory-Usage(MB)':<40}"),
            ]  # fmt: skip
        second = f"{'Chip':<6}Phy-ID" if self.a3 else "Chip"
        p, t = self.power_w, self.temp_w
        return [
            _row(f" {'NPU':<6}{'Name':<20}", f" {'Health':<14}",
                 f" {'Power(W)':<{p}}{'Temp(C)':<{t}}Hugepages-Usage(page)".ljust(w3)),
            _row(f" {second:<{w1 - 1}}", f" {'Bus-Id':<{w2 - 1}}",
                 f" {'AICore(%)':<{p}}{'Memory-Usage(MB)':<{t}}HBM-Usage(MB)".ljust(w3)),
        ]  # fmt: skip

    def chip_rows(self, c: dict) -> list[str]:
        w1, w2, w3 = self.widths
        hp = _pair(c["hugepages_used"], c["hugepages_total"], *self.hp)
        summary = _row(
            f" {c['npu']!s:<{self.id_w}}{c['name']:<{self.name_w}}",
            f" {c['health']:<{w2 - 1}}",
            f" {_power(c['power_w'], self.missing_power):<{self.power_w}}"
            f"{_num(c['temp_c'], 'NA'):<{self.temp_w}}{hp}".ljust(w3),
        )
        if self.ddr:
            ids = f" {c['chip']!s:<8}{c['logic_id']!s:<22}"
            usage = f" {_num(c['aicore_pct'], 'NA'):<13}" + _pair(
                c["memory_used_mb"], c["memory_total_mb"], 5, 33
            )
        else:
            chip_id = f"{c['chip']!s:<6}{c['phy_id']}" if self.a3 else str(c["chip"])
            ids = f" {chip_id:<{w1 - 1}}"
            mem_total_w = self.temp_w - 7  # 'used/ ' takes 7 of the Memory-Usage column
            usage = (
                f" {_num(c['aicore_pct'], 'NA'):<{self.power_w}}"
                + _pair(c["memory_used_mb"], c["memory_total_mb"], 5, mem_total_w)
                + _pair(c["hbm_used_mb"], c["hbm_total_mb"], 5, self.hp[1])
            )
        detail = _row(ids, f" {c['bus_id'] or 'NA':<{w2 - 1}}", usage.ljust(w3))
        return [summary, detail]

    def _process_cells(self, name: str, memory: str, container: str) -> str:
        w3 = self.widths[2]
        if self.wide:  # 26.x: | name (19) | memory (22) | Process id in container (24) |
            return f" {name:<19}| {memory:<22}| {container:<{w3 - 46}}"
        return f" {name:<25}| {memory:<{w3 - 28}}"

    def process_header(self) -> str:
        w1, w2, _ = self.widths
        return _row(
            f" {'NPU':<8}{'Chip':<{w1 - 9}}",
            f" {'Process id':<{w2 - 1}}",
            self._process_cells("Process name", "Process memory(MB)", "Process id in container"),
        )

    def process_row(self, p: dict) -> str:
        w1, w2, _ = self.widths
        container = p.get("container_pid")
        return _row(
            f" {p['npu']!s:<8}{p['chip']!s:<{w1 - 9}}",
            f" {p['pid']!s:<{w2 - 1}}",
            self._process_cells(
                p["name"] or "", _num(p["memory_mb"], "NA"),
                "NA" if container is None else str(container),
            ),
        )  # fmt: skip


# --------------------------------------------------------------------------- commands


def render_info(state: dict, holders: list | None = None) -> str:
    """``npu-smi info``."""
    layout = _Layout(state["card"]["hardware"], state["npu_smi_style"])
    versions = state["versions"]
    chips = state_chips(state, holders)
    lines = [
        _full(layout.width),
        layout.banner(versions["npu_smi"], versions["driver"]),
        _bar(layout.widths, "-"),
        *layout.headers(),
        _bar(layout.widths, "="),
    ]
    for i, chip in enumerate(chips):
        lines += layout.chip_rows(chip)
        last_of_npu = i + 1 == len(chips) or chips[i + 1]["npu"] != chip["npu"]
        if last_of_npu:
            lines.append(_bar(layout.widths, "="))
        elif layout.a3:  # A3: a full-width rule between the two chips of one NPU
            lines.append(_full(layout.width))
        else:  # 310P Duo: a rule with column junctions
            lines.append(_bar(layout.widths, "-"))

    procs = [dict(p) for p in state["processes"]]
    procs += [
        {
            "npu": h.npu,
            "chip": h.chip,
            "pid": h.pid,
            "name": h.name,
            "memory_mb": h.memory_mb,
            "container_pid": h.ns_pid if h.ns_pid != h.pid else None,
        }
        for h in holders or []
    ]
    lines += [_bar(layout.widths, "-"), layout.process_header(), _bar(layout.widths, "=")]
    for npu in dict.fromkeys(c["npu"] for c in chips):
        mine = [p for p in procs if p["npu"] == npu]
        if mine:
            lines += [layout.process_row(p) for p in sorted(mine, key=lambda p: p["chip"])]
        else:
            lines.append(_text_row(f"No running processes found in NPU {npu}", layout.width))
        lines.append(_bar(layout.widths, "="))
    return "\n".join(lines) + "\n"


def _kv(key: str, value: object) -> str:
    return f"\t{key:<30} : {value}"


def render_map(state: dict) -> str:
    """``npu-smi info -m``: chips plus each A2/310P card's MCU pseudo-chip."""
    card = state["card"]
    a3 = card["hardware"] == "a3"
    titles = ["NPU ID", "Chip ID", "Chip Logic ID", *(["Chip Phy-ID"] if a3 else []), "Chip Name"]
    lines = ["\t" + "".join(f"{t:<30} " for t in titles[:-1]) + f"{titles[-1]:<30}"]
    chips = state_chips(state)
    for i, chip in enumerate(chips):
        ids = [chip["npu"], chip["chip"], chip["logic_id"], *([chip["phy_id"]] if a3 else [])]
        name = "Ascend910" if a3 else f"Ascend {chip['name']}"
        lines.append("\t" + "".join(f"{v!s:<30} " for v in ids) + name)
        if i + 1 == len(chips) or chips[i + 1]["npu"] != chip["npu"]:
            mcu = [chip["npu"], chip["chip"] + 1, "-", *(["-"] if a3 else [])]
            lines.append("\t" + "".join(f"{v!s:<30} " for v in mcu) + f"{'Mcu':<30}")
    return "\n".join(lines) + "\n"


def render_list(state: dict) -> str:
    """``npu-smi info -l``."""
    card = state["card"]
    blocks = [_kv("Total Count", card["count"])]
    for npu in card["npu_ids"]:
        blocks.append(_kv("NPU ID", npu) + "\n" + _kv("Chip Count", card["chips_per_card"]))
    return "\n\n".join(blocks) + "\n"


def _chip(state: dict, npu: int, chip: int | None) -> dict:
    found = [c for c in state_chips(state, live_processes()) if c["npu"] == npu]
    if not found:
        raise _Usage(f"the NPU ID {npu} does not exist on this host")
    if chip is None:
        return found[0]
    for c in found:
        if c["chip"] == chip:
            return c
    raise _Usage(f"the chip ID {chip} does not exist on NPU {npu}")


def _override(state: dict, npu: int, chip: int, section: str) -> dict:
    for entry in state["chips"]:
        if entry.get("npu", 0) == npu and entry.get("chip", 0) == chip:
            return entry.get(section, {})
    return {}


def _die_id(npu: int, chip: int, salt: int) -> str:
    seed = (npu * 2654435761 + chip * 40503 + salt * 97) & 0xFFFFFFFF
    groups = []
    for _ in range(5):
        seed = (seed * 1103515245 + 12345) & 0xFFFFFFFF
        groups.append(f"{seed:08X}")
    return " ".join(groups)


def render_board(state: dict, npu: int, chip: int | None) -> str:
    """``npu-smi info -t board -i N`` (card) or ``... -c C`` (chip)."""
    card = state["card"]
    hardware = card["hardware"]
    c = _chip(state, npu, chip)
    index = card["npu_ids"].index(npu)
    firmware = state["versions"]["firmware"]
    if chip is None:
        device = {"a2": "0xd802", "a3": "0xd803", "310p": "0xd500"}[hardware]
        pairs = [
            ("NPU ID", npu),
            ("Product Name", {"310p": "Atlas 300I Pro"}.get(hardware, "IT21HMDB02-B2")),
            ("Model", "NA"),
            ("Manufacturer", "Huawei"),
            ("Serial Number", f"1024150839{index:02d}"),
            ("Software Version", state["versions"]["driver"]),
            ("Firmware Version", firmware),
            ("Compatibility", "OK"),
            ("Board ID", "0x65"),
            ("PCB ID", "A"),
            ("BOM ID", "1"),
            ("PCIe Bus Info", c["bus_id"] or "NA"),
            ("Slot ID", index),
            ("Class ID", "NA"),
            ("PCI Vendor ID", "0x19e5"),
            ("PCI Device ID", device),
            ("Subsystem Vendor ID", "0x0200"),
            ("Subsystem Device ID", "0x0100" if hardware == "310p" else "0x3003"),
            ("Chip Count", card["chips_per_card"]),
        ]
        over = _override(state, npu, 0, "board")
    else:
        if hardware == "a3":
            names = [("NPU Name", "9392"), ("Chip Name", "Ascend910")]
        else:
            names = [("Chip Type", "Ascend"), ("Chip Name", c["name"])]
        pairs = [("NPU ID", npu), ("Chip ID", chip), *names, ("Chip Version", "V1"),
                 ("Board ID", "0x65")]  # fmt: skip
        if hardware == "310p":
            pairs.append(("Die ID", _die_id(npu, chip, 1)))
        else:
            pairs += [("PCB ID", "A"), ("BOM ID", "1"), ("VDie ID", _die_id(npu, chip, 1)),
                      ("NDie ID", _die_id(npu, chip, 2))]  # fmt: skip
        pairs += [("Chip Position ID", chip), ("PCIe Bus Info", c["bus_id"] or "NA"),
                  ("Firmware Version", firmware)]  # fmt: skip
        over = _override(state, npu, chip, "board")
    return "\n".join(_kv(k, over.get(k, v)) for k, v in pairs) + "\n"


def _rate(used: int | None, total: int | None) -> int:
    if not used or not total:
        return 0
    return round(100 * used / total)


def render_usages(state: dict, npu: int) -> str:
    """``npu-smi info -t usages -i N``: one block per chip, each ending with its Chip ID."""
    card = state["card"]
    new_keys = state["npu_smi_style"] != "24.1"  # 25.x added Aivector/NPU Util/Aicube
    chips = [c for c in state_chips(state, live_processes()) if c["npu"] == npu]
    if not chips:
        raise _Usage(f"the NPU ID {npu} does not exist on this host")
    blocks = [_kv("NPU ID", npu) + "\n" + _kv("Chip Count", card["chips_per_card"])]
    for c in chips:
        pairs: list[tuple[str, object]] = [
            ("DDR Capacity(MB)", c["memory_total_mb"] or 0),
            ("DDR Usage Rate(%)", _rate(c["memory_used_mb"], c["memory_total_mb"])),
            ("DDR Hugepages Total(page)", c["hugepages_total"] or 0),
            ("DDR Hugepages Usage Rate(%)", _rate(c["hugepages_used"], c["hugepages_total"])),
        ]
        if card["memory_kind"] == "hbm":
            rate = _rate(c["hbm_used_mb"], c["hbm_total_mb"])
            pairs += [("HBM Capacity(MB)", c["hbm_total_mb"]), ("HBM Usage Rate(%)", rate)]
        pairs.append(("Aicore Usage Rate(%)", _num(c["aicore_pct"], "0")))
        if new_keys:
            pairs.append(("Aivector Usage Rate(%)", 0))
        pairs += [("Aicpu Usage Rate(%)", 0), ("Ctrlcpu Usage Rate(%)", 2)]
        if card["memory_kind"] == "ddr":
            pairs.append(("Vectorcore Usage Rate(%)", 0))
        pairs.append(("DDR Bandwidth Usage Rate(%)", 0))
        if card["memory_kind"] == "hbm":
            pairs.append(("HBM Bandwidth Usage Rate(%)", 0))
        else:
            pairs += [
                (f"DVPP {u} Usage Rate(%)", 0) for u in ("VDEC", "VPC", "VENC", "JPEGE", "JPEGD")
            ]
        if new_keys:
            pairs += [
                ("NPU Utilization(%)", _num(c["aicore_pct"], "0")),
                ("Aicube Usage Rate(%)", 0),
            ]
        pairs.append(("Chip ID", c["chip"]))
        over = _override(state, npu, c["chip"], "usages")
        blocks.append("\n".join(_kv(k, over.get(k, v)) for k, v in pairs))
    return "\n\n".join(blocks) + "\n"


def render_health(state: dict, npu: int, chip: int | None) -> str:
    """``npu-smi info -t health -i N [-c C]`` (mind-cluster sample ``-t health``)."""
    c = _chip(state, npu, chip)
    return "\n".join(
        _kv(k, v) for k, v in (("Health Status", c["health"]), ("Error Code", "NA"),
                                ("Error Information", "NA"))
    ) + "\n"  # fmt: skip


# --------------------------------------------------------------------------- entry point


class _Usage(Exception):
    """A command line this simulator does not understand."""


def _option(args: list[str], flag: str) -> int | None:
    if flag not in args:
        return None
    i = args.index(flag)
    try:
        return int(args[i + 1])
    except (IndexError, ValueError):
        raise _Usage(f"{flag} needs a number") from None


def run(args: list[str], state: dict) -> str:
    """The text ``npu-smi ARGS`` prints for ``state``."""
    if args in (["-v"], ["--version"]):
        return f"npu-smi version: {state['versions']['npu_smi']}\n"
    if not args or args[0] != "info":
        raise _Usage("supported: info, info -m, info -l, info -t board|usages|health -i N, -v")
    rest = args[1:]
    if not rest:
        return render_info(state, live_processes())
    if rest == ["-m"]:
        return render_map(state)
    if rest == ["-l"]:
        return render_list(state)
    if "-t" in rest:
        kind = rest[rest.index("-t") + 1] if rest.index("-t") + 1 < len(rest) else ""
        npu, chip = _option(rest, "-i"), _option(rest, "-c")
        if npu is None:
            raise _Usage(f"-t {kind} needs -i <NPU ID>")
        if kind == "board":
            return render_board(state, npu, chip)
        if kind == "usages":
            return render_usages(state, npu)
        if kind == "health":
            return render_health(state, npu, chip)
        raise _Usage(f"-t {kind} is not simulated")
    raise _Usage("unsupported info options: " + " ".join(rest))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        state = load_state()
    except AscendDeployError as exc:
        print(f"npu-smi (ascend-sim): {exc}", file=sys.stderr)
        return 2
    if state["faults"].get("driver_not_loaded"):
        print(DCMI_FAILURE)
        return 1
    try:
        sys.stdout.write(run(args, state))
    except _Usage as exc:
        print(f"npu-smi (ascend-sim): {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
