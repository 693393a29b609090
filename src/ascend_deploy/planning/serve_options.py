"""Serving options upstream documents per release, the one ``--additional-config`` object,
warnings on environment variables a release no longer reads, and CPU binding's CPU need.

All from the serving rules (``serve_options``, ``removed_env``, ``cpu_binding`` in
``data/serve_rules.json``); every entry carries its upstream source. Standard library only.
"""

from __future__ import annotations

import json

from ..errors import InputError
from ..versioning import version_key
from .rules import rule_applies

ADDITIONAL_CONFIG_VARIABLE = "vllm_service_additional_config"
_ARM = ("aarch64", "arm64")


def _given(flag: str, extra: list[str]) -> bool:
    """Whether the operator's extra args already carry ``flag`` (or its ``--no-`` form)."""
    names = {flag, "--no-" + flag[2:]}
    if flag == "--compilation-config":
        return any(a.split("=", 1)[0] in names or a.startswith("-O") for a in extra)
    return any(a.split("=", 1)[0] in names for a in extra)


def option_flags(
    rules: dict,
    tp: int,
    version: tuple | None,
    hardware: str,
    model_type: str | None,
    enforce_eager: bool,
    extra: list[str],
    notes: list[str],
) -> list[str]:
    """The ``serve_options.flags`` that apply, as argv; a flag the operator gives is left out."""
    argv: list[str] = []
    for rule in (rules.get("serve_options") or {}).get("flags") or []:
        if not rule_applies(rule.get("when", {}), tp, version, hardware, model_type):
            continue
        flag = rule["flag"]
        if rule.get("graph_mode_only") and enforce_eager:
            continue
        if _given(flag, extra) or flag in argv:
            if flag not in argv:
                notes.append(f"{flag} not planned: the extra args give it ({rule['why']})")
            continue
        value = rule.get("value")
        argv += [flag] if value is None else [flag, _arg(value)]
        shown = flag if value is None else f"{flag} '{_arg(value)}'"
        notes.append(f"{shown} added: {rule['why']} ({rule['source']})")
    return argv


def _arg(value: object) -> str:
    return json.dumps(value, separators=(", ", ": ")) if isinstance(value, dict) else str(value)


def merged_additional_config(
    rules: dict,
    tp: int,
    version: tuple | None,
    hardware: str,
    model_type: str | None,
    operator: dict | None,
    notes: list[str],
) -> dict:
    """The planned ``--additional-config`` keys merged with the operator's (operator keys win)."""
    if operator is not None and not isinstance(operator, dict):
        raise InputError(
            f"additional config must be a mapping of vllm-ascend options, got {operator!r} "
            f"({ADDITIONAL_CONFIG_VARIABLE})"
        )
    planned: dict = {}
    for rule in (rules.get("serve_options") or {}).get("additional_config") or []:
        if rule_applies(rule.get("when", {}), tp, version, hardware, model_type):
            planned[rule["key"]] = rule["value"]
            notes.append(
                f"--additional-config {rule['key']}={json.dumps(rule['value'])} added: "
                f"{rule['why']} ({rule['source']})"
            )
    for key in sorted(set(planned) & set(operator or {})):
        if planned[key] != operator[key]:  # type: ignore[index]
            notes.append(
                f"--additional-config {key}: the operator's {json.dumps(operator[key])} "  # type: ignore[index]
                f"replaces the planned {json.dumps(planned[key])}"
            )
    return {**planned, **(operator or {})}


def additional_config_argv(config: dict) -> list[str]:
    """``--additional-config <json>`` once, or nothing for an empty object."""
    return ["--additional-config", json.dumps(config, sort_keys=True)] if config else []


def removed_env_warnings(rules: dict, vllm_ascend: str | None, extra_env: dict | None) -> list[str]:
    """A warning for each operator variable the release removed or reads only as deprecated."""
    if not extra_env or vllm_ascend is None:
        return []
    version = version_key(vllm_ascend)
    out = []
    for entry in (rules.get("removed_env") or {}).get("variables") or []:
        name = entry["name"]
        if name not in extra_env:
            continue
        since = entry.get("removed_in") or entry.get("deprecated_in")
        if since is None or version < version_key(since):
            continue
        what = "no longer reads" if entry.get("removed_in") else "reads only as deprecated"
        where = "removed" if entry.get("removed_in") else "deprecated"
        fix = entry.get("replacement")
        use = f"use {fix}" if fix else "there is no replacement; drop it"
        if fix and fix.startswith("additional config"):
            use += f" (in {ADDITIONAL_CONFIG_VARIABLE}, CLI --additional-config)"
        out.append(
            f"WARNING: extra env sets {name}, which vllm-ascend {vllm_ascend} {what} ({where} in "
            f"{since}; {entry['source']}): {use}"
        )
    return out


def cpu_binding_note(
    rules: dict,
    vllm_ascend: str | None,
    hardware: str,
    host_cpus: int | None,
    host_npus: int | None,
    host_arch: str | None,
) -> str | None:
    """A warning when the CPUs per NPU fall below what the release's CPU binding needs."""
    section = rules.get("cpu_binding")
    if not section or vllm_ascend is None or not host_cpus or not host_npus:
        return None
    version = version_key(vllm_ascend)
    if version < version_key(section["on_from"]):
        return None
    if host_arch and host_arch.lower() not in _ARM:
        return None  # vllm-ascend binds on ARM hosts only
    need, source = None, ""
    for entry in section["min_cpus_per_npu"]:
        if version < version_key(entry["from"]):
            continue
        if "below" in entry and version >= version_key(entry["below"]):
            continue
        need = entry["cpus"]
        a5_from = entry.get("a5_cpus_from")
        if hardware == "a5" and a5_from and version >= version_key(a5_from):
            need = entry["a5_cpus"]
        source = entry["source"]
    if need is None:
        return None
    per = host_cpus // host_npus
    if per >= need:
        return None
    return (
        f"WARNING: CPU binding (on by default from {section['on_from']}) needs {need} CPUs per "
        f"NPU at vllm-ascend {vllm_ascend}, and {host_cpus} CPUs for {host_npus} NPUs give "
        f"{per}: vllm-ascend logs 'Bind cpus failed in rank...' and serves without binding. "
        f"Fix: give the container at least {need * host_npus} CPUs, or pass "
        f'{ADDITIONAL_CONFIG_VARIABLE} {{"enable_cpu_binding": false}} ({section["why"]}; {source})'
    )
