"""One report of every host check that predicts a failed vLLM-Ascend start.

Each check is a finding ``{"id", "pitfall", "status": ok|warn|fail, "evidence", "fix"}``;
pitfall numbers are those of the table of eight failures in docs/guides/troubleshooting.md
(1 stack mismatch / NPU not visible, 2 FP8, 3 stale processes and ports, 5-8 memory, KV cache,
quantization, tensor parallelism). ``ok`` in the result is False as soon as one check fails.
"""

from __future__ import annotations

import os
import re

from ..errors import AscendDeployError, CheckFailed, InputError
from ..host.npu_smi import hardware_mismatch, hardware_of
from ..host.procs import find_holders
from ..host.versions import read_versions
from ..reporting import tables
from ..reporting.tables import Column
from . import compat

MANAGEMENT_NODES = ("davinci_manager", "devmm_svm", "hisi_hdc")
# Chips vllm-ascend does not support (vllm-ascend docs/source/faqs.md: Atlas 200I A2 (310B),
# the first-generation Ascend 910 / 910 Pro B; the 310 never was).
UNSUPPORTED_CHIPS = re.compile(r"^(910A|910ProA|910ProB|910PremiumA|910|310|310B\d?)$", re.I)
BUSY_HBM_MB = 8192  # an idle A2 chip shows ~3 GB used by firmware; more means someone holds it


def finding(fid: str, pitfall: int | None, status: str, evidence: str, fix: str = "") -> dict:
    return {"id": fid, "pitfall": pitfall, "status": status, "evidence": evidence, "fix": fix}


# ----------------------------------------------------------------------------- NPUs


def _load_npu_info(npu_info: dict | None) -> tuple[dict | None, str | None]:
    if npu_info is not None:
        return npu_info, None
    from ..host import npu_smi

    try:
        text = npu_smi.run_npu_smi(["info"])
        return npu_smi.parse(text, kind="info", source="npu-smi info"), None
    except AscendDeployError as exc:
        return None, str(exc)


def npu_checks(npu_info: dict | None, error: str | None) -> tuple[list[dict], list[dict]]:
    chips = (npu_info or {}).get("chips") or []
    if npu_info is None or not chips:
        why = error or "npu-smi info lists no NPU chips"
        return [
            finding(
                "npu.visible",
                1,
                "fail",
                why,
                "install the Ascend driver and firmware (npu-smi info must list the chips); "
                "in a container pass the /dev/davinci* devices and mount npu-smi",
            )
        ], chips
    names = sorted({str(c.get("name")) for c in chips})
    out = [
        finding(
            "npu.visible",
            1,
            "ok",
            f"{len(chips)} chip(s) {', '.join(names)}; driver {npu_info.get('version') or '?'}",
        )
    ]
    unsupported = sorted(
        {
            str(c.get("name"))
            for c in chips
            if UNSUPPORTED_CHIPS.match(str(c.get("name")).replace("Ascend", ""))
            and c.get("phy_id") is None  # A3 chips print as "Ascend910" with a Phy-ID
        }
    )
    if unsupported:
        out.append(
            finding(
                "npu.supported",
                1,
                "fail",
                f"chip {', '.join(unsupported)} is not supported by vllm-ascend",
                "use Atlas A2 (910B), A3, Ascend 950 or Atlas 300I Duo (310P) hosts",
            )
        )
    for chip in chips:
        health = str(chip.get("health") or "unknown")
        where = f"NPU {chip.get('npu')} chip {chip.get('chip')}"
        if health.upper() == "OK":
            status, fix = "ok", ""
        elif health.lower() == "warning":
            status, fix = "warn", f"npu-smi info -t health -i {chip.get('npu')} shows the alarm"
        else:
            status = "fail"
            fix = (
                f"npu-smi info -t health -i {chip.get('npu')}; reset the chip "
                f"(npu-smi set -t reset -i {chip.get('npu')} -c {chip.get('chip')}) or "
                "replace it, or exclude it with ASCEND_RT_VISIBLE_DEVICES"
            )
        out.append(
            finding(
                f"npu.health.{chip.get('npu')}.{chip.get('chip')}",
                1,
                status,
                f"{where} health {health}",
                fix,
            )
        )
    return out, chips


def device_check(root: str, chips: list[dict]) -> dict:
    dev = os.path.join(root, "dev")
    try:
        entries = os.listdir(dev)
    except OSError:
        entries = []
    davinci = sorted(e for e in entries if re.fullmatch(r"davinci\d+", e))
    missing = [n for n in MANAGEMENT_NODES if n not in entries]
    expected = max(1, len(chips))
    if len(davinci) < expected:
        missing.append(f"davinci* ({len(davinci)} of {expected})")
    if missing:
        return finding(
            "devices.nodes",
            1,
            "fail",
            f"missing in {dev}: {', '.join(missing)}",
            "load the Ascend driver (the .run installer creates the nodes); containers need "
            "--device /dev/davinciN --device /dev/davinci_manager --device /dev/devmm_svm "
            "--device /dev/hisi_hdc",
        )
    return finding(
        "devices.nodes",
        1,
        "ok",
        f"{len(davinci)} davinci node(s) and {', '.join(MANAGEMENT_NODES)} in {dev}",
    )


# ----------------------------------------------------------------------------- versions


def driver_cann_check(driver: dict, cann_version: str, local: dict | None) -> dict:
    """The host's CANN against the published pairings (and the monotonic rule); a pairing
    that is not published warns with the note, adding the observed innerversion rule."""
    version = driver["version"]
    published = compat.driver_supports_cann(version, cann_version)
    source = compat.pairing_source(cann_version)
    if published is True:
        return finding(
            "versions.driver-cann",
            1,
            "ok",
            f"driver {version} is listed for CANN {cann_version} ({source})",
        )
    if published is False:
        floor = compat.oldest_driver(cann_version)
        return finding(
            "versions.driver-cann",
            1,
            "fail",
            f"driver {version} is older than HDK {floor[0] if floor else '?'}, the oldest CANN "
            f"{cann_version} accepts ({source})",
            f"upgrade the Ascend HDK (firmware, then driver, then reboot) to one listed for CANN "
            f"{cann_version}, or install a CANN this driver runs (ascend-deploy compat resolve "
            f"--driver {version} names the release)",
        )
    note = compat.pairing_note(version, cann_version) or (
        f"no published pairing of driver {version} with CANN {cann_version}"
    )
    if local is not None and local.get("status") == "fail":
        return local
    observed = f"; {local['evidence']}" if local is not None else ""
    return finding(
        "versions.driver-cann",
        1,
        "warn",
        note + observed,
        "upgrade the HDK to one the CANN release notes list (hiascend.com), or install a CANN "
        "release whose pairing with this driver is published",
    )


def pairing_verdicts(info: dict) -> list[dict]:
    """The host's pairing findings (``read_versions``' ``checks``) with the driver-CANN one
    decided by the published pairings: the one verdict per check id that both ``versions``
    and ``preflight`` report."""
    out = []
    driver, cann = info.get("driver"), info.get("cann")
    for check in info.get("checks", []):
        if check["id"] == "versions.driver-cann" and driver and cann:
            check = driver_cann_check(driver, cann["version"], check)
        out.append(check)
    return out


def runtime_checks(info: dict, hardware: str, matrix: dict | None = None) -> list[dict]:
    """Which vllm-ascend release (and image) this host can run (pitfall 1)."""
    out: list[dict] = []
    driver, cann = info.get("driver"), info.get("cann")
    if cann:
        try:
            row = compat.resolve(cann["version"], hardware, matrix=matrix)
            out.append(
                finding(
                    "compat.runtime",
                    1,
                    "ok",
                    f"CANN {cann['version']} on {hardware}: vllm-ascend {row['vllm_ascend']}, "
                    f"vllm {row['vllm']}, torch {row['torch']}, torch_npu {row['torch_npu']}, "
                    f"image {row['image'] or 'none upstream (host mode or a source build)'}",
                )
            )
        except CheckFailed as exc:
            try:
                row = compat.resolve(cann["version"], hardware, allow_rc=True, matrix=matrix)
                out.append(
                    finding(
                        "compat.runtime",
                        1,
                        "warn",
                        f"only a release candidate supports CANN {cann['version']}: "
                        f"vllm-ascend {row['vllm_ascend']} "
                        f"({row['image'] or 'no upstream image'})",
                        "accept the RC (compat resolve --allow-rc) or install the CANN of a "
                        "final release",
                    )
                )
            except CheckFailed:
                out.append(
                    finding("compat.runtime", 1, "fail", str(exc), "install a CANN from the matrix")
                )
        return out
    # No CANN on the host: the container image brings CANN; the host driver must fit it.
    if not driver:
        out.append(
            finding(
                "compat.runtime",
                1,
                "fail",
                "neither the driver nor CANN is installed, no runtime can be chosen",
                "install the Ascend HDK driver and firmware first",
            )
        )
        return out
    rows = []
    for row in compat.load_matrix(matrix):
        supported, _note = compat.hardware_support(row, hardware)
        built = compat.image_built(row, hardware, matrix)
        if supported and built and compat.is_final(row) and compat.is_official(row):
            rows.append(row)
    rows.sort(key=compat.preference, reverse=True)
    verdicts = [
        (r, compat.driver_supports_cann(driver["version"], compat.row_cann(r, hardware)))
        for r in rows
    ]
    chosen = next((rv for rv in verdicts if rv[1] is True), None)
    chosen = chosen or next((rv for rv in verdicts if rv[1] is None), None)
    if chosen is None:
        out.append(
            finding(
                "compat.runtime",
                1,
                "fail",
                f"driver {driver['version']} is older than every HDK published for the CANN "
                "of the final vllm-ascend images",
                compat.upgrade_advice(driver["version"], hardware, matrix)
                or "upgrade the Ascend HDK (firmware, then driver, then reboot)",
            )
        )
        return out
    row, verdict = chosen
    cann_needed = compat.row_cann(row, hardware)
    image = compat.image_for(row, hardware, None, compat.DEFAULT_REGISTRY, matrix)
    if verdict:
        out.append(
            finding(
                "compat.runtime",
                1,
                "ok",
                f"no CANN on the host; image {image} (CANN {cann_needed}) is published for "
                f"driver {driver['version']} ({compat.pairing_source(cann_needed)})",
            )
        )
    else:
        out.append(
            finding(
                "compat.runtime",
                1,
                "warn",
                f"no CANN on the host; newest image {image} needs CANN {cann_needed}, whose "
                f"pairing with driver {driver['version']} is not published",
                f"check the CANN {cann_needed} release notes for the HDK it needs",
            )
        )
    return out


def version_checks(info: dict, hardware: str, matrix: dict | None = None) -> list[dict]:
    out: list[dict] = []
    driver, firmware, cann = info.get("driver"), info.get("firmware"), info.get("cann")
    if not driver:
        out.append(
            finding(
                "versions.driver",
                1,
                "fail",
                f"{info['ascend_home']}/driver/version.info not found",
                "install the Ascend HDK driver (Ascend-hdk-<chip>-npu-driver_<ver>.run --full "
                "--install-for-all)",
            )
        )
    if not firmware:
        out.append(
            finding(
                "versions.firmware",
                1,
                "warn" if driver else "fail",
                f"{info['ascend_home']}/firmware/version.info not found",
                "install the Ascend HDK firmware released with the driver, then reboot",
            )
        )
    out += pairing_verdicts(info)
    if cann and not info.get("nnal"):
        out.append(
            finding(
                "versions.nnal",
                1,
                "warn",
                f"CANN {cann['version']} is installed without NNAL/ATB; torch_npu and "
                "vllm-ascend need libatb.so",
                f"install Ascend-cann-nnal_{cann['version']} and source "
                "/usr/local/Ascend/nnal/atb/set_env.sh",
            )
        )
    out += runtime_checks(info, hardware, matrix)
    packages = info.get("packages") or {}
    if cann and any(packages.values()):
        out += [
            f
            for f in compat.check(info, cann["version"], hardware, matrix)
            if f["id"] != "compat.cann"
        ]
    return out


def driver_loaded_check(driver: dict | None, npu_info: dict | None) -> dict | None:
    """The running driver (npu-smi banner) is the installed one (version.info)."""
    banner = (npu_info or {}).get("version")
    if not driver or not banner:
        return None
    if str(banner).lower() == str(driver["version"]).lower():
        return finding(
            "versions.driver-loaded", 1, "ok", f"npu-smi and version.info both say {banner}"
        )
    return finding(
        "versions.driver-loaded",
        1,
        "warn",
        f"npu-smi reports driver {banner} but {driver['path']} says {driver['version']}",
        "reboot (or reload the driver) after a driver upgrade; if --root is not this host, ignore",
    )


# ----------------------------------------------------------------------------- processes


def _who(entry: dict) -> str:
    owner = entry.get("container_name") or (entry.get("container_id") or "")[:12]
    owner = (
        f"container {owner}" if owner else (entry.get("systemd_unit") or entry.get("user") or "")
    )
    cmd = (entry.get("cmdline") or entry.get("name") or "?")[:60]
    return f"pid {entry.get('pid')} ({cmd}; {owner})"


def selected_chips(chips: list[dict], npus: list[int] | None) -> list[dict]:
    """The chips of the NPUs ``npus`` names (all chips when it is empty or None)."""
    return [c for c in chips if c.get("npu") in npus] if npus else list(chips)


def _held_npus(holder: dict) -> list:
    """The NPU ids a holder's npu-smi rows name."""
    return sorted({n.get("npu") for n in holder.get("npus") or []}, key=str)


def _on(holder: dict, npus: list[int]) -> bool:
    """Whether the holder has memory on any NPU of ``npus``."""
    return any(n in npus for n in _held_npus(holder))


def _others_finding(others: list[dict], npus: list[int]) -> dict:
    """NPU memory held outside the service's NPUs: information, never a failure."""
    return finding(
        "npu.other-memory",
        3,
        "ok",
        f"outside this service's NPUs {npus}: "
        + "; ".join(
            f"NPU {','.join(str(n) for n in _held_npus(h))} {_who(h)} {h.get('memory_mb')} MB"
            for h in others
        ),
        "nothing to do for this service (vllm_service_npus keeps it off those NPUs)",
    )


def process_checks(
    holders: dict,
    chips: list[dict],
    port: int | None,
    service: str | None,
    npus: list[int] | None = None,
) -> list[dict]:
    """Port and NPU memory holders; with ``npus`` only those NPUs are judged, others listed."""
    out: list[dict] = []
    kill = f"ascend-deploy procs --port {port}" if port else "ascend-deploy procs"
    if service:
        kill += f" --service {service}"
    if port is not None:
        listeners = holders["listeners"]
        foreign = [e for e in listeners if not e.get("managed")]
        if not listeners:
            out.append(finding("port.free", 3, "ok", f"nothing listens on port {port}"))
        elif foreign:
            out.append(
                finding(
                    "port.free",
                    3,
                    "fail",
                    f"port {port} is held by " + "; ".join(_who(e) for e in foreign),
                    f"{kill} --kill-foreign (after checking the owner), or choose another --port",
                )
            )
        else:
            out.append(
                finding(
                    "port.free",
                    3,
                    "ok",
                    f"port {port} is served by our service {service}: "
                    + "; ".join(_who(e) for e in listeners),
                    "nothing to do: a deployment replaces its own replicas",
                )
            )
    npu_holders = holders["npu_holders"]
    if npus:
        others = [h for h in npu_holders if not _on(h, npus) and h.get("alive")]
        npu_holders = [h for h in npu_holders if _on(h, npus)]
        chips = selected_chips(chips, npus)
        if others:
            out.append(_others_finding(others, npus))
    foreign = [h for h in npu_holders if h.get("alive") and not h.get("managed")]
    stale = [h for h in npu_holders if not h.get("alive")]
    managed = [h for h in npu_holders if h.get("alive") and h.get("managed")]
    if foreign:
        out.append(
            finding(
                "npu.foreign-memory",
                3,
                "fail",
                "NPU memory held by "
                + "; ".join(f"{_who(h)} {h['memory_mb']} MB" for h in foreign),
                f"{kill} --kill-foreign once the owners agree, or serve on other NPUs "
                "(vllm_service_npus; CLI: --npus)",
            )
        )
    elif stale:
        out.append(
            finding(
                "npu.foreign-memory",
                3,
                "warn",
                "npu-smi lists PIDs not running here: "
                + ", ".join(f"{h['pid']} ({h['memory_mb']} MB)" for h in stale),
                "run preflight on the host (not in a container); if the PIDs are gone the "
                "driver still holds the memory: reset the chip or reboot",
            )
        )
    elif managed:
        out.append(
            finding(
                "npu.foreign-memory",
                3,
                "ok",
                f"NPU memory held only by our service {service}: "
                + "; ".join(_who(h) for h in managed),
                "nothing to do: a deployment replaces its own replicas",
            )
        )
    else:
        busy = [
            c
            for c in chips
            if isinstance(c.get("hbm_used_mb"), int) and c["hbm_used_mb"] > BUSY_HBM_MB
        ]
        if busy:
            out.append(
                finding(
                    "npu.foreign-memory",
                    3,
                    "warn",
                    "HBM in use without a listed process: "
                    + ", ".join(
                        f"NPU {c['npu']} chip {c['chip']} {c['hbm_used_mb']}/{c['hbm_total_mb']} MB"
                        for c in busy
                    ),
                    "find the owner (processes in other containers are not always listed); "
                    "free it before serving",
                )
            )
        elif chips:
            out.append(finding("npu.foreign-memory", 3, "ok", "no process holds NPU memory"))
    return out


# ----------------------------------------------------------------------------- model plan

_PITFALL_WORDS = (
    (2, ("fp8", "float8")),
    (8, ("tensor-parallel", "tensor parallel", "kv head", "key_value_heads", "attention head")),
    (7, ("quantiz", "modelslim")),
    (6, ("concurren", "max-num-seqs", "preempt")),
    (5, ("memory", "hbm", "kv cache", "max-model-len", "out of memory", "oom")),
)


def _pitfall_of(reason: str) -> int:
    text = f" {reason.lower()}"
    for number, words in _PITFALL_WORDS:
        if any(w in text for w in words):
            return number
    return 5


def npu_memory(chips: list[dict]) -> tuple[int, int] | None:
    """(memory per NPU, memory in use) to plan with, in MB, from ``npu-smi info`` chips: the
    smallest total and the largest use of any chip; None when npu-smi gave no figures.
    HBM on A2/A3/950; 310P cards report their DDR as Memory-Usage instead."""
    kind = "hbm" if any(isinstance(c.get("hbm_total_mb"), int) for c in chips) else "memory"
    totals = [c[f"{kind}_total_mb"] for c in chips if isinstance(c.get(f"{kind}_total_mb"), int)]
    used = [c[f"{kind}_used_mb"] for c in chips if isinstance(c.get(f"{kind}_used_mb"), int)]
    if not totals:
        return None
    return min(totals), max(used) if used else 0


def plan_checks(
    model_dir: str,
    chips: list[dict],
    hardware: str,
    rules: dict | None = None,
    vllm_ascend: str | None = None,
) -> list[dict]:
    """Run the planner for ``model_dir`` on this host's NPUs (pitfalls 2, 5-8), for release
    ``vllm_ascend`` when given (its memory model: ``memory.profiles_memory``)."""
    try:
        from .plan import make_plan
    except ImportError as exc:
        return [finding("model.plan", 5, "warn", f"planner not available ({exc})", "")]
    memory = npu_memory(chips)
    if memory is None:
        return [
            finding(
                "model.plan",
                5,
                "warn",
                "npu-smi gave no HBM figures, so the model was not planned",
                "fix the NPU checks above, then rerun preflight",
            )
        ]
    try:
        plan = make_plan(
            model_dir=model_dir,
            hbm_total_mb=memory[0],
            hbm_used_mb=memory[1],
            npus=len(chips),
            hardware=hardware,
            rules=rules,
            vllm_ascend=vllm_ascend,
        )
    except CheckFailed as exc:
        return [finding("model.plan", _pitfall_of(str(exc)), "fail", str(exc), "")]
    out: list[dict] = []
    conversion = plan.get("conversion") or {}
    if conversion.get("required"):
        target = conversion.get("target")
        ready = bool(target) and os.path.isfile(os.path.join(target, "config.json"))
        out.append(
            finding(
                "model.fp8",
                2,
                "ok" if ready else "warn",
                f"FP8 checkpoint is served as BF16 from {target}"
                + ("" if ready else " (not converted yet)"),
                "" if ready else f"ascend-deploy convert {model_dir} {target}",
            )
        )
    reasons = [str(r) for r in plan.get("reasons") or []]
    if plan.get("feasible") and not reasons:
        summary = (
            f"TP {plan.get('tp')}, {plan.get('replicas')} replica(s), max-model-len "
            f"{plan.get('max_model_len')}, max-num-seqs {plan.get('max_num_seqs')}, "
            f"KV cache {plan.get('kv_capacity_tokens')} tokens"
        )
        out.append(finding("model.plan", 5, "ok", f"{model_dir}: {summary}"))
        return out
    if not reasons:
        reasons = ["the planner found no feasible configuration"]
    # make_plan returns memory shortfalls as reasons (pitfall 5; 6 for concurrency)
    out += [
        finding(f"model.plan.{i}", 6 if re.search(r"max-num-seqs|preempt", r) else 5, "fail", r)
        for i, r in enumerate(reasons, 1)
    ]
    return out


# ----------------------------------------------------------------------------- entry point


def run_preflight(
    root: str = "/",
    port: int | None = None,
    model_dir: str | None = None,
    npu_info: dict | None = None,
    service: str | None = None,
    hardware: str | None = None,
    python: str | None = None,
    proc_root: str = "/proc",
    containers: dict | None = None,
    matrix: dict | None = None,
    rules: dict | None = None,
    npus: list[int] | None = None,
    vllm_ascend: str | None = None,
    enforce_eager: bool = False,
) -> dict:
    """Run every check; returns ``{"ok", "hardware", "checks", "versions", "holders"}``.

    ``vllm_ascend``: the release that will serve (None: not known). It selects the plan's
    memory model and warns when its default graph mode needs a newer HDK than the driver
    (``compat.graph_mode_hdk_note``; not with ``enforce_eager``).

    ``npus`` are the NPU ids the service would use (None or empty: every NPU): NPU memory, its
    holders and the plan are judged on those only; holders of other NPUs are listed as
    information (``npu.other-memory``), so a second service on disjoint NPUs passes.
    ``npu_info`` is a parsed ``npu-smi info`` (``npu_smi.parse``); when None, npu-smi runs.
    ``matrix`` and ``rules`` are the compatibility matrix and serving rules documents
    (default: the shipped ones).
    """
    if hardware is not None and hardware not in compat.HARDWARE:
        raise InputError(f"--hardware {hardware!r} is not one of {', '.join(compat.HARDWARE)}")
    if model_dir is not None and not os.path.isdir(model_dir):
        raise InputError(f"{model_dir}: --model-dir is not a directory")
    npu_info, npu_error = _load_npu_info(npu_info)
    checks, chips = npu_checks(npu_info, npu_error)
    detected = hardware_of(chips)
    hw = hardware or detected or "a2"
    if hardware is None and detected is None and chips:
        checks.append(
            finding(
                "npu.hardware",
                1,
                "warn",
                f"cannot tell the product from chip names "
                f"{sorted({str(c.get('name')) for c in chips})}; assuming Atlas A2",
                "pass --hardware a2|a3|a5|310p",
            )
        )
    mismatch = hardware_mismatch(hardware, chips)
    if mismatch:
        checks.append(finding("npu.hardware", 1, "fail", *mismatch))
    checks.append(device_check(root, chips))
    info = read_versions(root, python)
    checks += version_checks(info, hw, matrix)
    graph = compat.graph_mode_hdk_note(
        vllm_ascend, (info.get("driver") or {}).get("version"), enforce_eager
    )
    if graph:
        message, fix = graph.split(" Fix: ", 1)
        checks.append(finding("versions.hdk-graph", 4, "warn", message, fix))
    loaded = driver_loaded_check(info.get("driver"), npu_info)
    if loaded:
        checks.append(loaded)
    holders = find_holders(port, service, npu_info, proc_root, containers)
    if npus:
        ids = sorted({c.get("npu") for c in chips})
        missing = [n for n in npus if n not in ids]
        if missing:
            raise InputError(
                f"NPUs {missing} of the selection {list(npus)} are not on this host (its NPUs: "
                f"{ids}); fix vllm_service_npus (CLI: --npus)"
            )
    checks += process_checks(holders, chips, port, service, npus)
    if model_dir is not None:
        checks += plan_checks(model_dir, selected_chips(chips, npus), hw, rules, vllm_ascend)
    return {
        "ok": not any(c["status"] == "fail" for c in checks),
        "hardware": hw,
        "checks": checks,
        "versions": info,
        "holders": holders,
    }


def render_table(checks: list[dict], width: int = 150) -> str:
    """Human table: id, pitfall, status, evidence, fix (long cells wrap)."""
    id_w = max([len("CHECK")] + [len(c["id"]) for c in checks])
    rest = max(40, width - (id_w + 3 + 7 + 3 + 6 + 3))
    ev_w = rest * 55 // 100
    columns = [
        Column("CHECK"),
        Column("PIT", align=">"),
        Column("STATUS"),
        Column("EVIDENCE", ev_w),
        Column("FIX", rest - ev_w - 3),
    ]
    pit = ["-" if c.get("pitfall") is None else c["pitfall"] for c in checks]
    rows = [
        [c["id"], p, c["status"].upper(), c["evidence"], c.get("fix")]
        for c, p in zip(checks, pit, strict=True)
    ]
    return "\n".join(tables.render(columns, rows, sep=" | ", rule="-+-", blank=""))
