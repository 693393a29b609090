"""The simulated Ascend host's state file: load, validate, fill defaults, derive chips.

One JSON file per host (``/etc/ascend-sim/state.json``) drives everything the simulator
prints: npu-smi tables, version files, device nodes. Schema (extend, don't rename)::

    {"preset": str, "hostname": str|null,
     "card": {"model", "hardware": "a2"|"a3"|"310p", "count", "chips_per_card",
              "hbm_total_mb", "idle_hbm_used_mb", "memory_kind": "hbm"|"ddr",
              "memory_total_mb", "idle_memory_used_mb", "npu_ids": [int] (optional)},
     "health": {"<npu id>": "OK"|"Warning"|"Alarm"|"Critical"|"UNKNOWN"},
     "versions": {"npu_smi", "driver", "driver_inner", "firmware", "cann", "cann_layout",
                  "arch"},
     "npu_smi_style": "24.1"|"25.x"|"26.x",
     "faults": {"graph_capture_broken": bool, "driver_not_loaded": bool,
                "hccn_link_down": [npu ids], "hccn_ping_fail": [addresses],
                "hccn_no_ip": [npu ids]},
     "network": {"npu_subnet", "host_octet", "npus": {...}} (hccn_tool; see
                ascend_sim.hccn_tool_emulator),
     "chips": [{"npu", "chip", <any chip field below>}],
     "processes": [{"npu", "chip", "pid", "name", "memory_mb"}]}

``processes`` entries may carry ``container_pid`` (26.x ``Process id in container``).
``chips`` overrides per chip: ``name``, ``health``, ``power_w``, ``temp_c``,
``aicore_pct``, ``bus_id``, ``hbm_used_mb``, ``memory_used_mb``, ``hugepages`` ([used,
total]). ``processes`` are fixed entries (to reproduce a captured table); live serving
processes come from ``ascend_sim.npu_registry`` instead.

Field meanings and typical values come from the npu-smi samples (docs/sources.md)
(idle HBM use about 3.2-3.4 GB on 910B, 65536 MB HBM on 910B1/B2/B2C/B3/B4-64G/A3,
32768 MB on 910B4 32 GB, 310P power ``NA``, A3 two chips per NPU with global Phy-IDs).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

from ascend_deploy.errors import InputError
from ascend_deploy.versioning import version_key

DEFAULT_STATE = "/etc/ascend-sim/state.json"
PRESETS_DIR = Path(__file__).resolve().parent / "data" / "presets"
HEALTH_VALUES = ("OK", "Warning", "Alarm", "Critical", "UNKNOWN")
HARDWARE = ("a2", "a3", "310p")
STYLES = ("24.1", "25.x", "26.x")

# Per model defaults (npu-smi samples; hardware families from the compatibility matrix).
MODELS: dict[str, dict[str, Any]] = {
    "910B1": {"hardware": "a2", "hbm_total_mb": 65536, "aicore_count": 24},
    "910B2": {"hardware": "a2", "hbm_total_mb": 65536, "aicore_count": 24},
    "910B2C": {"hardware": "a2", "hbm_total_mb": 65536, "aicore_count": 24},
    "910B3": {"hardware": "a2", "hbm_total_mb": 65536, "aicore_count": 20},
    "910B4": {"hardware": "a2", "hbm_total_mb": 32768, "aicore_count": 20},
    "910B4-1": {"hardware": "a2", "hbm_total_mb": 65536, "aicore_count": 20},
    "Ascend910": {"hardware": "a3", "hbm_total_mb": 65536, "aicore_count": 24},
    "310P3": {"hardware": "310p", "memory_total_mb": 21527, "aicore_count": 8},
}
HARDWARE_DEFAULTS: dict[str, dict[str, Any]] = {
    "a2": {"chips_per_card": 1, "memory_kind": "hbm", "idle_hbm_used_mb": 3300},
    "a3": {"chips_per_card": 2, "memory_kind": "hbm", "idle_hbm_used_mb": 3150},
    "310p": {"chips_per_card": 1, "memory_kind": "ddr", "idle_memory_used_mb": 1700},
}
CHIP_FIELDS = {
    "name": str,
    "health": str,
    "power_w": (int, float, type(None)),
    "temp_c": (int, float),
    "aicore_pct": (int, float),
    "bus_id": (str, type(None)),
    "hbm_used_mb": int,
    "memory_used_mb": int,
    "memory_total_mb": int,  # 310P Duo chips differ (44280 / 43693)
    "hugepages": list,
    "board": dict,  # printed `-t board` values by key (to reproduce a capture)
    "usages": dict,  # printed `-t usages` values by key
}


def _fail(source: str, what: str) -> InputError:
    return InputError(f"{source}: {what}")


def _expect(value: Any, types: Any, source: str, where: str) -> Any:
    if isinstance(value, bool) and types in (int, (int, float)):
        raise _fail(source, f"{where} must be a number, got {value!r}")
    if not isinstance(value, types):
        want = getattr(types, "__name__", None) or " or ".join(t.__name__ for t in types)
        raise _fail(source, f"{where} must be {want}, got {type(value).__name__} {value!r}")
    return value


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.json"))


def load_preset(name: str) -> dict:
    """The named preset, validated and with defaults filled in."""
    path = PRESETS_DIR / f"{name}.json"
    if not path.is_file():
        raise InputError(f"unknown preset {name!r}; known: {', '.join(preset_names()) or 'none'}")
    return load_state(str(path))


def load_state(path: str | None = None) -> dict:
    """Read and validate a state file (default: ``$ASCEND_SIM_STATE`` or /etc/ascend-sim)."""
    path = path or os.environ.get("ASCEND_SIM_STATE") or DEFAULT_STATE
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise _fail(path, "state file not found; set ASCEND_SIM_STATE or pass --state") from None
    except OSError as exc:
        raise _fail(path, f"cannot read the state file ({exc.strerror})") from None
    if not raw.strip():
        raise _fail(path, "state file is empty")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise _fail(path, "state file is not UTF-8 text (binary?)") from None
    except json.JSONDecodeError as exc:
        raise _fail(path, f"state file is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    return normalise(data, path)


def normalise(data: Any, source: str = "state") -> dict:
    """Validate ``data`` and return a copy with every default filled in."""
    _expect(data, dict, source, "the state")
    state = copy.deepcopy(data)
    card = _expect(state.setdefault("card", {}), dict, source, "card")
    model = _expect(card.setdefault("model", "910B3"), str, source, "card.model")
    base = MODELS.get(model, {})
    hardware = card.setdefault("hardware", base.get("hardware", "a2"))
    if hardware not in HARDWARE:
        raise _fail(source, f"card.hardware must be one of {', '.join(HARDWARE)}, got {hardware!r}")
    for key, value in {**HARDWARE_DEFAULTS[hardware], **base}.items():
        if key != "hardware":
            card.setdefault(key, value)
    card.setdefault("count", 8)
    card.setdefault("aicore_count", 20)
    card.setdefault("hbm_total_mb", 65536 if hardware != "310p" else 0)
    card.setdefault("idle_hbm_used_mb", 0)
    card.setdefault("memory_total_mb", 0)
    card.setdefault("idle_memory_used_mb", 0)
    for key in ("count", "chips_per_card", "hbm_total_mb", "idle_hbm_used_mb",
                "memory_total_mb", "idle_memory_used_mb", "aicore_count"):  # fmt: skip
        _expect(card[key], int, source, f"card.{key}")
        if card[key] < 0 or (key in ("count", "chips_per_card") and card[key] < 1):
            raise _fail(source, f"card.{key} must be positive, got {card[key]}")
    if card["memory_kind"] not in ("hbm", "ddr"):
        raise _fail(source, f"card.memory_kind must be hbm or ddr, got {card['memory_kind']!r}")
    ids = card.setdefault("npu_ids", list(range(card["count"])))
    _expect(ids, list, source, "card.npu_ids")
    if len(ids) != card["count"] or len(set(ids)) != len(ids):
        raise _fail(source, f"card.npu_ids must list {card['count']} distinct NPU ids")
    for value in ids:
        _expect(value, int, source, "card.npu_ids[]")

    health = _expect(state.setdefault("health", {}), dict, source, "health")
    for key, value in health.items():
        if value not in HEALTH_VALUES:
            raise _fail(source, f"health[{key!r}] must be one of {', '.join(HEALTH_VALUES)}")

    versions = _expect(state.setdefault("versions", {}), dict, source, "versions")
    versions.setdefault("driver", "25.2.0")
    versions.setdefault("npu_smi", versions["driver"])
    versions.setdefault("firmware", "7.7.0.6.236")
    versions.setdefault("cann", "8.2.RC1")
    versions.setdefault("cann_layout", "cann" if _cann_at_least_85(versions["cann"]) else "toolkit")
    versions.setdefault("arch", "aarch64")
    for key, value in versions.items():
        _expect(value, (str, type(None)), source, f"versions.{key}")
    if versions["cann_layout"] not in ("toolkit", "cann"):
        raise _fail(source, "versions.cann_layout must be toolkit or cann")

    style = state.setdefault("npu_smi_style", _style_for(versions["npu_smi"]))
    if style not in STYLES:
        raise _fail(source, f"npu_smi_style must be one of {', '.join(STYLES)}, got {style!r}")
    faults = _expect(state.setdefault("faults", {}), dict, source, "faults")
    faults.setdefault("graph_capture_broken", False)
    faults.setdefault("driver_not_loaded", False)
    state.setdefault("preset", Path(source).stem if source != "state" else "custom")
    state.setdefault("hostname", None)

    for i, chip in enumerate(_expect(state.setdefault("chips", []), list, source, "chips")):
        _expect(chip, dict, source, f"chips[{i}]")
        for key in ("npu", "chip"):
            _expect(chip.get(key, 0), int, source, f"chips[{i}].{key}")
        for key, types in CHIP_FIELDS.items():
            if key in chip:
                _expect(chip[key], types, source, f"chips[{i}].{key}")
        if "health" in chip and chip["health"] not in HEALTH_VALUES:
            raise _fail(source, f"chips[{i}].health must be one of {', '.join(HEALTH_VALUES)}")
    for i, proc in enumerate(_expect(state.setdefault("processes", []), list, source, "processes")):
        _expect(proc, dict, source, f"processes[{i}]")
        for key in ("npu", "chip", "pid", "memory_mb"):
            _expect(proc.get(key, 0), int, source, f"processes[{i}].{key}")
    return state


def _style_for(npu_smi: str) -> str:
    """24.1 and older / 25.x / 26.x (the 116-column table of 26.x drivers)."""
    try:
        major = version_key(npu_smi)[0][0]
    except ValueError:
        return "25.x"
    return "24.1" if major < 25 else "25.x" if major == 25 else "26.x"


def _cann_at_least_85(version: str) -> bool:
    """CANN 8.5 or newer (any phase: 8.5.0.alpha001 counts), by its release numbers."""
    try:
        return version_key(version)[0][:2] >= (8, 5)
    except ValueError:
        return False


def _override(state: dict, npu: int, chip: int) -> dict:
    for entry in state["chips"]:
        if entry.get("npu", 0) == npu and entry.get("chip", 0) == chip:
            return entry
    return {}


def default_bus_id(hardware: str, index: int, chip: int) -> str:
    """PCIe addresses in the order real hosts print them.

    A2 8-card servers: C1, C2, 81, 82, 01, 02, 41, 42 (vllm-ascend issues #1130, #10504,
    #1767); A3: NPU n chip c at 0x9D - 4n + 2c (A3 samples: 9D/9F, 99/9B, 89/8B, 83).
    """
    if hardware == "a3":
        return f"0000:{0x9D - 4 * index + 2 * chip:02X}:00.0"
    if hardware == "a2":
        order = ["C1", "C2", "81", "82", "01", "02", "41", "42"]
        bus = order[index] if index < len(order) else f"{(0x10 + index) & 0xFF:02X}"
        return f"0000:{bus}:00.0"
    return f"0000:{(0x01 + index) & 0xFF:02X}:00.0"


def chip_name(state: dict) -> str:
    return state["card"]["model"]


def chips(state: dict, holders: list | None = None) -> list[dict]:
    """Every chip as ``npu-smi info`` shows it (the parser's chip schema plus logic_id).

    ``holders`` are live ``npu_registry`` entries; their memory adds to HBM (or DDR) use.
    """
    card = state["card"]
    hardware = card["hardware"]
    held: dict[tuple[int, int], int] = {}
    for holder in holders or []:
        key = (int(holder.npu), int(holder.chip))
        held[key] = held.get(key, 0) + int(holder.memory_mb)
    out = []
    logic = 0
    for index, npu in enumerate(card["npu_ids"]):
        for chip in range(card["chips_per_card"]):
            o = _override(state, npu, chip)
            ddr = card["memory_kind"] == "ddr"
            # Deterministic, realistic idle readings (A2 samples: 87-97 W, 30-44 C).
            if hardware == "310p":
                power = None
            elif hardware == "a3" and chip == 1:
                power = None  # A3 reports power per NPU on chip 0 (npu-smi samples)
            else:
                power = round(88.0 + (npu * 37 % 90) / 10, 1)
            hbm_used = o.get("hbm_used_mb", card["idle_hbm_used_mb"])
            mem_used = o.get("memory_used_mb", card["idle_memory_used_mb"])
            extra = held.get((npu, chip), 0)
            if ddr:
                mem_used += extra
            else:
                hbm_used += extra
            hugepages = o.get("hugepages", [0, 0])
            out.append(
                {
                    "npu": npu,
                    "chip": chip,
                    # A3: NPU n holds chips with global Phy-IDs 2n and 2n+1 (A3 samples).
                    "phy_id": 2 * npu + chip if hardware == "a3" else None,
                    "name": o.get("name", chip_name(state)),
                    "health": o.get("health", state["health"].get(str(npu), "OK")),
                    "power_w": o.get("power_w", power),
                    "temp_c": o.get("temp_c", 33 + (npu * 7 + chip) % 9),
                    "aicore_pct": o.get("aicore_pct", 0),
                    "bus_id": o.get("bus_id", default_bus_id(hardware, index, chip)),
                    "hbm_used_mb": None if ddr else hbm_used,
                    "hbm_total_mb": None if ddr else card["hbm_total_mb"],
                    "memory_used_mb": mem_used,
                    "memory_total_mb": o.get("memory_total_mb", card["memory_total_mb"]),
                    "hugepages_used": hugepages[0],
                    "hugepages_total": hugepages[1],
                    "logic_id": logic,
                }
            )
            logic += 1
    return out


def device_count(state: dict) -> int:
    """Number of ``/dev/davinciN`` nodes: one per chip logic id."""
    return state["card"]["count"] * state["card"]["chips_per_card"]
