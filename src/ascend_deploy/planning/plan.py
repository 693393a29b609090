"""Plan a vLLM-Ascend deployment: TP, replicas, context length, concurrency, argv and env.

Standard library only. Inputs are the model directory, what ``npu-smi`` reports (HBM total
and used per NPU, the ids of the NPUs the service gets) and the serving rules
(``data/serve_rules.json``, passed in by the caller); the result is a dict that the CLI
prints and the Ansible roles turn into containers unchanged (``replica_launch``: one
complete spec per replica).

One step per module: ``validation`` (arguments, hardware, model, quantization), ``tp`` (TP
choice and memory sizing), ``layout`` (replica NPUs, devices, env, ports), this module (the
flags and the result). Decisions (pitfall numbers as in the preflight findings):

* FP8 checkpoints are served converted to BF16 (the weight bytes double; pitfall 2) unless
  the hardware computes FP8 and the release serves block-FP8 (``rules.block_fp8_native``:
  no tagged release does, also on Ascend 950). ``argv`` names the converted directory.
* ``--quantization ascend`` only with ``quant_model_description.json`` (ModelSlim); any
  ``--quantization`` that does not match the checkpoint is refused (pitfall 7).
* Only architectures whose KV cache the planner knows are sized (MHA/GQA, MLA; dense or MoE,
  ``model.info.unsized_reason``); any other is refused by name with what sizing it needs.
* TP must divide both the attention and the KV head counts (pitfall 8; MLA: the heads).
  Without ``--tp`` the smallest valid TP that fits is chosen and every remaining NPU gets
  its own replica.
* Memory: see ``memory``. An unpinned ``max_model_len`` is lowered to what the KV cache
  holds; a pinned one that does not fit makes the plan infeasible (pitfalls 5, 6).
* Environment and version-specific flags come from the serving rules (pitfall 4).
* The API key is never in argv: vLLM reads ``VLLM_API_KEY`` from the environment.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

from ..errors import InputError
from ..model import tp_heads
from ..model.info import inspect_model
from .layout import planned_env, replica_specs, swap_space
from .memory import DEFAULT_MODEL, MemoryModel, capture_warning, profiles_memory, startup_refusal
from .rules import (
    block_fp8_native,
    check_rules,
    load_rules,
    modelslim_autodetected,
    rule_applies,
    shipped_rules,
)
from .serve_options import (
    additional_config_argv,
    cpu_binding_note,
    merged_additional_config,
    option_flags,
    removed_env_warnings,
)
from .tp import Sizing, choose_tp, model_tp_sizes, valid_tp_sizes
from .validation import (
    check_extra_args,
    check_model,
    check_request,
    hardware_entry,
    npu_ids,
    resolve_quantization,
    vllm_ascend_version,
)

__all__ = ["MemoryModel", "describe", "load_rules", "make_plan", "valid_tp_sizes"]


def make_plan(
    model_dir: str,
    hbm_total_mb: int,
    hbm_used_mb: int | None = 0,
    npus: int | Sequence[int] | None = 1,
    hardware: str = "a2",
    vllm_ascend: str | None = None,
    max_model_len: int | None = None,
    max_num_seqs: int | None = None,
    tp: int | None = None,
    gpu_memory_utilization: float = 0.9,
    quantization: str | None = None,
    enforce_eager: bool = False,
    host_ram_mb: int | None = None,
    port: int = 8000,
    host: str = "0.0.0.0",
    served_model_name: str | None = None,
    api_key_env: bool = False,
    extra_args: list[str] | None = None,
    served_model_dir: str | None = None,
    memory_model: MemoryModel | None = None,
    rules: dict | None = None,
    service: str = "vllm",
    estimate_weights: bool = False,
    hccl_base_port: int | None = None,
    additional_config: dict | None = None,
    extra_env: dict | None = None,
    host_cpus: int | None = None,
    host_npus: int | None = None,
    host_arch: str | None = None,
) -> dict:
    """The serving plan; see the module docstring.

    ``npus`` is the list of NPU ids the service gets (a count ``n`` means NPUs 0..n-1);
    ``rules`` the serving rules (default: the shipped ones); replica ``r`` runs in the
    container ``<service>-<r>``. Raises InputError for bad arguments or model files,
    CheckFailed for requests that can never work (TP not dividing the heads, a pinned
    context above the model's limit, --quantization mismatches, unknown hardware). Memory
    shortfalls are returned as ``feasible: False`` with ``reasons``. ``estimate_weights``:
    size weights that are not on disk (yet) from config.json and the index's total_size
    (``model.estimate``) instead of refusing. ``hccl_base_port`` replaces the rules' HCCL base
    port (TP > 1 replicas get base + first NPU id x stride). ``additional_config``: the
    operator's ``--additional-config`` keys, merged over the planned ones (``serve_options``);
    ``extra_env``: the operator's extra container environment, checked against the variables
    the release removed; ``host_cpus``/``host_npus``/``host_arch``: the CPUs the container may
    use, the NPUs npu-smi lists and the CPU architecture, for CPU binding's need.
    """
    mm = memory_model or DEFAULT_MODEL
    notes: list[str] = []
    if hbm_used_mb is None:  # callers that could not read it from npu-smi
        hbm_used_mb = 0
        notes.append("HBM in use unknown: assumed 0 MB; the plan may be optimistic")
    check_request(
        hbm_total_mb,
        hbm_used_mb,
        port,
        gpu_memory_utilization,
        max_model_len,
        max_num_seqs,
        tp,
        host_ram_mb,
        host,
        service,
    )
    ids = npu_ids(npus)
    extra = check_extra_args(extra_args)
    rules = shipped_rules() if rules is None else check_rules(rules)
    hw_key, hw = hardware_entry(rules, hardware, vllm_ascend)
    version = vllm_ascend_version(vllm_ascend) if vllm_ascend is not None else None

    fp8_native, fp8_why = block_fp8_native(rules, hw, vllm_ascend)
    facts = inspect_model(model_dir, fp8_native=fp8_native, estimate=estimate_weights)
    check_model(facts, model_dir, max_model_len)
    quant_flag = resolve_quantization(facts, quantization, model_dir, fp8_why)
    if quant_flag == "ascend" and quantization is None:
        notes.append(_modelslim_note(rules, vllm_ascend))
    if hw.get("eager_only") and not enforce_eager:
        enforce_eager = True
        notes.append(f"{hw['name']} runs in eager mode only: --enforce-eager added")

    valid, heads, kv_heads = model_tp_sizes(facts)
    sizing = Sizing(
        facts,
        mm,
        hbm_total_mb,
        hbm_used_mb,
        gpu_memory_utilization,
        enforce_eager,
        max_model_len,
        max_num_seqs,
        profiles_memory(vllm_ascend),
    )
    chosen = choose_tp(sizing, valid, heads, kv_heads, len(ids), tp)
    t = chosen["tp"]
    refusal = startup_refusal(chosen["budget"], vllm_ascend)
    if refusal:  # the engine would stop before anything else matters
        chosen["reasons"] = [refusal]
    notes += _sizing_notes(chosen, len(ids), facts["max_model_len_limit"], max_model_len)
    capture = None if refusal else capture_warning(chosen["budget"])
    if capture:
        notes.append(f"WARNING: {capture}")
    notes += kv_replication_notes(facts, t, chosen["budget"]["kv_bytes_per_token_per_npu"])
    if hw.get("placement"):
        per = f"{len(ids) // t} replica(s) x TP {t} on {len(ids)} devices"
        notes.append(f"{hw['placement']}: {per}")

    model_type = None if facts["moe"] else facts["model_type"]
    env = planned_env(rules, t, version, hw_key, model_type)
    for name in env:
        if any(r["name"] == name and "model_type_in" in r.get("when", {}) for r in rules["env"]):
            notes.append(f"{name}={env[name]} set: " + _env_why(rules, name))
    ranks = t * (len(ids) // t)
    swap_gib = swap_space(
        rules["flags"]["--swap-space"], t, version, hw_key, host_ram_mb, ranks, notes
    )
    expert_parallel = _expert_parallel(rules, facts, t, version, hw_key, notes)
    serve_dir, name = _served(facts, model_dir, served_model_dir, served_model_name)
    flags = serve_flags(
        chosen, gpu_memory_utilization, hw, quant_flag, enforce_eager, expert_parallel, swap_gib
    )
    flags += option_flags(rules, t, version, hw_key, model_type, enforce_eager, extra, notes)
    extra_config = merged_additional_config(
        rules, t, version, hw_key, model_type, additional_config, notes
    )
    flags += additional_config_argv(extra_config)
    notes += removed_env_warnings(rules, vllm_ascend, extra_env)
    cpu = cpu_binding_note(rules, vllm_ascend, hw_key, host_cpus, host_npus, host_arch)
    if cpu and extra_config.get("enable_cpu_binding") is not False:
        notes.append(cpu)

    def argv_for(replica_port: int) -> list[str]:
        where = ["--host", host, "--port", str(replica_port), "--served-model-name", name]
        return ["vllm", "serve", serve_dir, *where, *flags, *extra]

    hccl = rules.get("hccl_ports")
    if hccl and hccl_base_port is not None:
        if not 1024 <= int(hccl_base_port) <= 65535:
            raise InputError(
                f"HCCL base port {hccl_base_port} is outside 1024-65535 "
                "(vllm_service_hccl_base_port); leave it unset for the default 60000"
            )
        hccl = {**hccl, "base": int(hccl_base_port)}
    launches = replica_specs(service, ids, t, port, env, argv_for, hccl)
    secret_env = _secret_env(rules, api_key_env, notes)
    if facts["needs_conversion"]:
        notes.append(
            f"FP8 weights are converted to BF16 for {hw['name']} ({fp8_why}): "
            f"{facts['weight_bytes_on_disk']:,} bytes on disk become "
            f"{facts['weight_bytes_served']:,} bytes; serving {serve_dir}"
        )
    return {
        "model": facts,
        "model_dir": model_dir,
        "served_model_dir": serve_dir,
        "served_model_name": name,
        "hardware": hw_key,
        "vllm_ascend": vllm_ascend,
        "kv_bytes_per_token": facts["kv_bytes_per_token"],
        "memory": chosen["budget"],
        "memory_model": mm.as_dict(),
        "kv_capacity_tokens": chosen["budget"]["kv_capacity_tokens"],
        "tp": t,
        "valid_tp_sizes": valid,
        "npus": ids,
        "replicas": len(launches),
        "max_model_len": chosen["max_model_len"],
        "max_num_seqs": chosen["max_num_seqs"],
        "gpu_memory_utilization": gpu_memory_utilization,
        "quantization": quant_flag,
        "enforce_eager": enforce_eager,
        "expert_parallel": expert_parallel,
        "swap_space_gib": swap_gib,
        "additional_config": extra_config,
        "conversion": {
            "required": facts["needs_conversion"],
            "source": model_dir,
            "target": serve_dir if facts["needs_conversion"] else None,
        },
        **_result(chosen["reasons"], notes, launches, secret_env),
    }


def _env_why(rules: dict, name: str) -> str:
    """The rule's why and source for a planned environment variable."""
    rule = next(r for r in rules["env"] if r["name"] == name)
    return f"{rule['why']} ({rule['source']})"


def _sizing_notes(chosen: dict, npus: int, max_pos: int, max_model_len: int | None) -> list[str]:
    """Unused NPUs and a lowered context, said in the plan's notes."""
    t, notes = chosen["tp"], []
    if npus % t:
        notes.append(f"{npus % t} NPU(s) stay unused: {npus} is not a multiple of TP {t}")
    if max_model_len is None and chosen["max_model_len"] < max_pos and not chosen["reasons"]:
        notes.append(
            f"max_model_len lowered from the model's {max_pos} to {chosen['max_model_len']} "
            "tokens: that is what the KV cache holds"
        )
    return notes


def kv_replication_notes(facts: dict, tp: int, kv_bytes_per_token_per_npu: int) -> list[str]:
    """What replicated KV heads cost when TP exceeds the KV heads (MHA/GQA only)."""
    kv = facts["num_key_value_heads"]
    copies = tp_heads.kv_head_replicas(kv, tp)
    if facts.get("mla") or copies == 1:
        return []
    return [
        f"TP {tp} is larger than the {kv} KV heads: vLLM replicates each KV head on {copies} "
        f"ranks (QKVParallelLinear), so every rank caches 1 KV head and the group holds "
        f"{copies} copies of the KV cache; KV replication costs memory: "
        f"{kv_bytes_per_token_per_npu} bytes per token on every NPU, as at TP {kv}, the larger "
        "TP adds room for weights, not for tokens (each rank also loads its head's K and V "
        "projections whole)"
    ]


def _expert_parallel(
    rules: dict, facts: dict, tp: int, version: tuple | None, hardware: str, notes: list[str]
) -> bool:
    """Whether a MoE model gets --enable-expert-parallel (the serving rules decide)."""
    rule = rules["flags"].get("--enable-expert-parallel")
    on = bool(facts["moe"] and rule and rule_applies(rule.get("when", {}), tp, version, hardware))
    if on:
        notes.append(
            f"MoE with {facts['moe']['experts']} experts at TP {tp}: --enable-expert-parallel "
            "spreads whole experts over the TP ranks (all experts stay resident)"
        )
    return on


def _served(
    facts: dict, model_dir: str, served_model_dir: str | None, served_model_name: str | None
) -> tuple[str, str]:
    """The directory vLLM loads (the BF16 copy of an FP8 checkpoint) and the served name."""
    if facts["needs_conversion"]:
        serve_dir = served_model_dir or os.path.normpath(model_dir) + "-bf16"
    else:
        serve_dir = served_model_dir or model_dir
    return serve_dir, served_model_name or os.path.basename(os.path.normpath(model_dir))


def _secret_env(rules: dict, api_key_env: bool, notes: list[str]) -> list[str]:
    """Names of the environment variables the container gets from a secret (the API key)."""
    if not api_key_env:
        return []
    notes.append(
        "API key: give the container VLLM_API_KEY from a secret (env file); vLLM reads it "
        "when --api-key is absent, so the key never appears in argv"
    )
    return [rules.get("api_key_env", {}).get("name", "VLLM_API_KEY")]


def _memory_line(mem: dict, kv: int) -> str:
    """The ``memory`` line of ``describe``: the budget as the planned release computes it."""
    tail = f"= KV {kv} MB" if kv > 0 else f"= no KV cache ({-kv} MB short)"
    if mem.get("memory_model") == "profiling":
        return (
            f"memory     per NPU (vLLM profiling, v0.15.0rc1+): device {mem['device_total_mb']} MB "
            f"x {mem['gpu_memory_utilization']} = {mem['usable_mb']} MB (free at start "
            f"{mem['free_at_start_mb']} MB), minus weights {mem['weights_per_npu_mb']}, "
            f"activation {mem['activation_mb']}, HCCL {mem['hccl_mb']} {tail}; graph capture "
            f"{mem['capture_need_mb']} MB in the {mem['capture_headroom_mb']} MB headroom"
        )
    return (
        f"memory     per NPU: {mem['hbm_total_mb']} MB x {mem['gpu_memory_utilization']} = "
        f"{mem['usable_mb']} MB, minus in use {mem['used_by_others_mb']}, weights "
        f"{mem['weights_per_npu_mb']}, activation {mem['activation_mb']}, graphs "
        f"{mem['graph_capture_mb']}, runtime {mem['runtime_reserve_mb']}, HCCL {mem['hccl_mb']} "
        + tail
    )


def _result(
    reasons: list[str], notes: list[str], launches: list[dict], secret_env: list[str]
) -> dict:
    """The verdict and the launch part of the plan (replica 0's argv and env, every spec)."""
    return {
        "feasible": not reasons,
        "reasons": reasons,
        "notes": notes,
        "argv": launches[0]["argv"],
        "env": launches[0]["env"],
        "secret_env": secret_env,
        "devices_per_replica": [launch["npus"] for launch in launches],
        "replica_launch": launches,
        "command": shlex.join(launches[0]["argv"]),
    }


def _modelslim_note(rules: dict, vllm_ascend: str | None) -> str:
    """Why the plan adds ``--quantization ascend`` to a ModelSlim checkpoint, per release."""
    detected = modelslim_autodetected(rules, vllm_ascend)
    if detected is None:
        return "--quantization ascend added for the ModelSlim checkpoint"
    if detected:
        return (
            f"--quantization ascend added for the ModelSlim checkpoint (vllm-ascend "
            f"{vllm_ascend} would also detect it from quant_model_description.json)"
        )
    rule = rules["flags"]["--quantization ascend"]
    where = ", ".join([*rule.get("auto_detected_in", []), f"{rule['auto_detected_from']} on"])
    return (
        f"--quantization ascend added for the ModelSlim checkpoint: vllm-ascend {vllm_ascend} "
        f"does not detect it (releases that do: {where}), and without the flag loading fails "
        "with a KeyError on a quant-only tensor such as deq_scale"
    )


def serve_flags(
    chosen: dict,
    util: float,
    hw: dict,
    quant_flag: str | None,
    enforce_eager: bool,
    expert_parallel: bool,
    swap_gib: int | None,
) -> list[str]:
    """The planned ``vllm serve`` flags after the model name (same for every replica)."""
    flags = ["--tensor-parallel-size", str(chosen["tp"])]
    flags += ["--max-model-len", str(chosen["max_model_len"])]
    if chosen["max_num_seqs"] is not None:
        flags += ["--max-num-seqs", str(chosen["max_num_seqs"])]
    flags += ["--gpu-memory-utilization", str(util)]
    if hw.get("dtype"):
        flags += ["--dtype", hw["dtype"]]
    if quant_flag == "ascend":
        flags += ["--quantization", "ascend"]
    if enforce_eager:
        flags.append("--enforce-eager")
    if expert_parallel:
        flags.append("--enable-expert-parallel")
    if swap_gib:
        flags += ["--swap-space", str(swap_gib)]
    return flags


def describe(plan: dict) -> str:
    """A human-readable rendering of a plan: one line per replica, and the command only when
    the plan is feasible."""
    m = plan["model"]
    mem = plan["memory"]
    if m.get("mla"):
        attn = (
            f"{m['num_attention_heads']} heads, MLA latent {m['mla']['kv_lora_rank']} + rope "
            f"{m['mla']['qk_rope_head_dim']}"
        )
    else:
        attn = (
            f"{m['num_attention_heads']}/{m['num_key_value_heads']} heads, head_dim {m['head_dim']}"
        )
    if m.get("moe"):
        attn += f", MoE {m['moe']['experts']} experts (top {m['moe']['experts_per_token']})"
    if m.get("tensor_count") is None:
        weights = (
            f"weights    {m['weight_bytes_on_disk']:,} bytes on disk, "
            f"{m['weight_bytes_served']:,} bytes served (estimated: the weights are not on "
            f"disk; {m['weights_source']})"
        )
    else:
        weights = (
            f"weights    {m['weight_bytes_on_disk']:,} bytes on disk ({m['tensor_count']} "
            f"tensors), {m['weight_bytes_served']:,} bytes served ({m['served_tensor_count']} "
            "tensors)"
        )
    kv = mem["kv_budget_mb"]
    release = (
        plan.get("vllm_ascend")
        or "unspecified (rules as for an unknown release; pass --vllm-ascend)"
    )
    lines = [
        f"model      {plan['model_dir']} ({m['model_type']}, {m['num_hidden_layers']} layers, "
        f"{attn}, max_position_embeddings {m['max_position_embeddings']})",
        f"context    limit {m['max_model_len_limit']} tokens ({m['max_model_len_source']})",
        f"quant      {m['quant_method'] or 'none'}"
        + (f", block {m['weight_block_size']}" if m["weight_block_size"] else ""),
        weights + (", FP8 -> BF16 conversion required" if m["needs_conversion"] else ""),
        f"kv         {plan['kv_bytes_per_token']:,} bytes per token",
        _memory_line(mem, kv),
        f"capacity   {plan['kv_capacity_tokens']:,} KV tokens per replica",
        f"rules      vllm-ascend {release}, hardware {plan['hardware']}",
        f"plan       TP {plan['tp']}, {plan['replicas']} replica(s) on NPUs "
        f"{', '.join(map(str, plan['npus']))}, max_model_len {plan['max_model_len']}, "
        f"max_num_seqs {plan['max_num_seqs'] if plan['max_num_seqs'] is not None else '-'}, "
        f"gpu_memory_utilization {plan['gpu_memory_utilization']}",
        f"feasible   {'yes' if plan['feasible'] else 'NO'}",
    ]
    lines += [f"  reason:  {r}" for r in plan["reasons"]]
    lines += [f"  note:    {n}" for n in plan["notes"]]
    if not plan["feasible"]:
        lines.append("command    none: the plan is not feasible (see the reasons above)")
        return "\n".join(lines)
    shared = plan["replica_launch"][0]["env"]
    per_replica = ("ASCEND_RT_VISIBLE_DEVICES", "HCCL_IF_BASE_PORT")
    for launch in plan["replica_launch"]:
        own = " ".join(f"{k}={launch['env'][k]}" for k in per_replica if k in launch["env"])
        lines.append(
            f"replica    {launch['name']}: NPUs {','.join(map(str, launch['npus']))}, "
            f"port {launch['port']}, {own}"
        )
    lines.append("env        (every replica; its own variables above)")
    lines += [f"  {k}={v}" for k, v in shared.items() if k not in per_replica]
    lines += [f"  {k}=<from secret>" for k in plan["secret_env"]]
    argv = plan["replica_launch"][0]["argv"]
    host = argv[argv.index("--host") + 1] if "--host" in argv else ""
    if not plan["secret_env"] and host not in ("127.0.0.1", "localhost", "::1"):
        lines.append(
            f"  warning: binds {host} without an API key: anyone who reaches the host can use "
            "the model; add --api-key-env and give the container VLLM_API_KEY"
        )
    others = " (each replica: its port and NPUs above)" if plan["replicas"] > 1 else ""
    lines.append(f"command    replica 0{others}")
    lines.append(f"  {plan['command']}")
    return "\n".join(lines)
