"""Plan a vLLM-Ascend deployment: TP, replicas, context length, concurrency, argv and env.

Standard library only. Inputs are the model directory and what ``npu-smi`` reports (HBM
total and used per NPU, number of NPUs); the result is a dict that the CLI prints and the
Ansible roles render into the container command line.

Decisions (issue 2 §4; pitfalls in /work/shared/reference/error-signatures.md):

* FP8 checkpoints on hardware without FP8 compute (A2/A3/310P) are served converted to
  BF16: the weight bytes double (pitfall 2). ``argv`` names the converted directory.
* ``--quantization ascend`` only with ``quant_model_description.json`` (ModelSlim); any
  ``--quantization`` that does not match the checkpoint is refused (pitfall 7).
* Only architectures whose KV cache the planner knows are sized (MHA/GQA, MLA; dense or MoE,
  ``model_info.unsized_reason``); any other is refused by name with what sizing it needs.
* TP must divide both the attention and the KV head counts (pitfall 8; MLA: the heads).
  Without ``--tp`` the smallest valid TP that fits is chosen and every remaining NPU gets
  its own replica.
* Memory: see ``memory_model``. An unpinned ``max_model_len`` is lowered to what the KV
  cache holds; a pinned one that does not fit makes the plan infeasible (pitfalls 5, 6).
* Environment and version-specific flags come from ``data/serve_rules.json`` (pitfall 4).
* The API key is never in argv: vLLM reads ``VLLM_API_KEY`` from the environment.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex

from ..errors import CheckFailed, InputError
from ..model.files import MODELSLIM_DESCRIPTION
from ..model.info import inspect_model
from ..resources import data_path
from .memory import DEFAULT_MODEL, MemoryModel

__all__ = ["MemoryModel", "load_rules", "make_plan", "parse_version", "valid_tp_sizes"]

RULES_RESOURCE = "data/serve_rules.json"
# Flags the plan sets itself; extra_args may not repeat them.
_PLANNED_FLAGS = (
    "--tensor-parallel-size",
    "-tp",
    "--max-model-len",
    "--max-num-seqs",
    "--gpu-memory-utilization",
    "--quantization",
    "-q",
    "--port",
    "--host",
    "--served-model-name",
    "--swap-space",
)
_VERSION_RE = re.compile(
    r"^v?(\d+)\.(\d+)\.(\d+)(?:\.(\d+))?(?:rc(\d+))?(?:\.?post(\d+))?(?:[.+-]?\w.*)?$"
)


def parse_version(text: str) -> tuple[int, ...]:
    """A sortable key for vllm-ascend versions: v0.9.1rc2 < v0.9.1 < v0.9.1.post1."""
    if not isinstance(text, str):
        raise InputError(f"vllm-ascend version must be a string, got {text!r}")
    m = _VERSION_RE.match(text.strip())
    if not m:
        raise InputError(
            f"vllm-ascend version {text!r} is not a version like v0.13.0 or v0.14.0rc1"
        )
    major, minor, patch, fourth, rc, post = m.groups()
    final = 1 if rc is None else 0
    return (
        int(major),
        int(minor),
        int(patch),
        int(fourth or 0),
        final,
        int(rc or 0),
        int(post or 0),
    )


def load_rules(path: str | None = None) -> dict:
    """The serving rules (``data/serve_rules.json`` inside the package, or ``path``)."""
    where = path or f"ascend_deploy/{RULES_RESOURCE}"
    try:
        with open(path or data_path("serve_rules.json"), "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise InputError(f"{where}: cannot read the serving rules ({exc.strerror})") from None
    try:
        rules = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{where}: serving rules are not valid JSON ({exc})") from None
    if not isinstance(rules, dict) or not all(k in rules for k in ("hardware", "env", "flags")):
        raise InputError(f"{where}: serving rules need 'hardware', 'env' and 'flags'")
    return rules


def rule_applies(when: dict, tp: int, version: tuple | None, hardware: str) -> bool:
    """Whether a rule's ``when`` conditions hold for this deployment."""
    if tp < when.get("tp_min", 1):
        return False
    if "hardware_in" in when and hardware not in when["hardware_in"]:
        return False
    bounds = [k for k in ("version_from", "version_below") if k in when]
    if bounds and version is None:
        return bool(when.get("if_version_unknown", False))
    if "version_from" in when and version < parse_version(when["version_from"]):  # type: ignore[operator]
        return False
    return not ("version_below" in when and version >= parse_version(when["version_below"]))  # type: ignore[operator]


def valid_tp_sizes(heads: int, kv_heads: int) -> list[int]:
    """TP sizes that divide both head counts."""
    g = math.gcd(heads, kv_heads)
    return [d for d in range(1, g + 1) if g % d == 0]


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _resolve_quantization(
    facts: dict, requested: str | None, hw: dict, model_dir: str
) -> str | None:
    """The --quantization value to pass, or CheckFailed for a mismatch (pitfall 7)."""
    method = facts["quant_method"]
    desc = os.path.join(model_dir, MODELSLIM_DESCRIPTION)
    if requested is not None:
        req = requested.strip().lower()
        if req == "ascend" and method != "ascend":
            kind = f"a {method.upper()} checkpoint" if method else "a float (unquantized) model"
            raise CheckFailed(
                f"--quantization ascend needs a ModelSlim checkpoint with {desc}, but "
                f"{model_dir} is {kind}; vLLM-Ascend would refuse it ('ModelSlim Quantization "
                "Config Not Found') or produce garbage. Drop --quantization"
                + (", the FP8 weights are converted to BF16" if method == "fp8" else "")
            )
        if req == "fp8" and not hw["fp8_native"]:
            raise CheckFailed(
                f"--quantization fp8: {hw['name']} has no FP8 compute (vllm-ascend: "
                "'fp8 quantization is currently not supported in npu'); the plan serves the "
                "checkpoint converted to BF16. Drop --quantization, or re-quantize with "
                "ModelSlim (W8A8) and use --quantization ascend"
            )
        if req != (method or ""):
            raise CheckFailed(
                f"--quantization {requested} does not match {model_dir}: its config says "
                f"quant_method {method!r}. A wrong quantization flag gives load errors or "
                "garbage output; drop --quantization or pass the checkpoint's method"
            )
    if method == "ascend":
        return "ascend"
    if method == "fp8":
        return "fp8" if hw["fp8_native"] else None  # converted to BF16 otherwise
    return method  # compressed-tensors etc.: vLLM reads the method from config.json


def _size(
    facts: dict,
    tp: int,
    mm: MemoryModel,
    hbm_total_mb: int,
    hbm_used_mb: int,
    util: float,
    enforce_eager: bool,
    max_model_len: int | None,
    max_num_seqs: int | None,
) -> dict:
    """Context length, concurrency and reasons for one TP size.

    The first budget assumes the default 256 sequences for the sampler's share of the
    profiling peak; the final one uses the planned max_num_seqs, as the engine will.
    """
    budget = mm.budget(facts, hbm_total_mb, hbm_used_mb, util, tp, enforce_eager, max_num_seqs)
    cap = budget["kv_capacity_tokens"]
    max_pos = facts["max_model_len_limit"]  # max_position_embeddings, RoPE scaling applied
    reasons: list[str] = []
    length = max_model_len if max_model_len is not None else max_pos
    seqs = max_num_seqs
    free = budget["free_for_vllm_mb"]
    if budget["weights_per_npu_mb"] > free:
        reasons.append(
            f"weights need {budget['weights_per_npu_mb']} MB per NPU at TP {tp} but only "
            f"{free} MB of HBM are free for vLLM ({hbm_total_mb} MB x {util} - "
            f"{hbm_used_mb} MB in use); use more NPUs (higher TP), free the HBM, or a "
            "smaller or quantized model"
        )
        return {
            "tp": tp,
            "budget": budget,
            "max_model_len": length,
            "max_num_seqs": seqs,
            "reasons": reasons,
        }
    if cap == 0:
        reasons.append(
            f"no HBM left for the KV cache at TP {tp}: {budget['kv_budget_mb']} MB after "
            f"weights {budget['weights_per_npu_mb']} MB, activation {budget['activation_mb']} "
            f"MB, graph capture {budget['graph_capture_mb']} MB, runtime "
            f"{budget['runtime_reserve_mb']} MB and HCCL {budget['hccl_mb']} MB; use more NPUs, "
            "--enforce-eager, free the HBM, or a smaller model"
        )
        return {
            "tp": tp,
            "budget": budget,
            "max_model_len": length,
            "max_num_seqs": seqs,
            "reasons": reasons,
        }
    if max_model_len is None:
        length = min(max_pos, cap)  # cap is a whole number of blocks
    avg = min(length, mm.expected_avg_context_tokens)
    if seqs is None:
        seqs = max(1, min(cap // avg, mm.default_max_num_seqs))
    budget = mm.budget(facts, hbm_total_mb, hbm_used_mb, util, tp, enforce_eager, seqs)
    cap = budget["kv_capacity_tokens"]  # >= the first estimate when seqs <= 256
    if max_model_len is None:
        length = min(max_pos, cap)
        floor = min(mm.min_model_len, max_pos)
        if length < floor:
            reasons.append(
                f"the KV cache holds only {cap} tokens at TP {tp}, less than the minimum "
                f"useful context {floor}; use more NPUs, free the HBM or a smaller model"
            )
    elif max_model_len > cap:
        reasons.append(
            f"--max-model-len {max_model_len} does not fit: the KV cache holds {cap} tokens "
            f"({budget['kv_budget_mb']} MB at {budget['kv_bytes_per_token_per_npu']} bytes per "
            f"token per NPU); lower --max-model-len to {cap} or less, or use more NPUs"
        )
    if max_num_seqs is not None and not reasons and max_num_seqs * avg > cap:
        fit = max(1, min(cap // avg, mm.default_max_num_seqs))
        reasons.append(
            f"--max-num-seqs {max_num_seqs} plans {max_num_seqs} x {avg} = "
            f"{max_num_seqs * avg} tokens of KV (at the assumed average context {avg}) but "
            f"the cache holds {cap}; under load requests would be preempted again and again. "
            f"Use --max-num-seqs {fit} or less"
        )
    return {
        "tp": tp,
        "budget": budget,
        "max_model_len": length,
        "max_num_seqs": seqs,
        "reasons": reasons,
    }


def make_plan(
    model_dir: str,
    hbm_total_mb: int,
    hbm_used_mb: int | None = 0,
    npus: int | None = 1,
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
    rules_path: str | None = None,
) -> dict:
    """The serving plan; see the module docstring.

    Raises InputError for bad arguments or model files, CheckFailed for requests that can
    never work (TP not dividing the heads, a pinned context above the model's limit,
    --quantization mismatches, unknown hardware). Memory shortfalls are returned as
    ``feasible: False`` with ``reasons``.
    """
    mm = memory_model or DEFAULT_MODEL
    notes: list[str] = []
    if hbm_used_mb is None:  # callers that could not read it from npu-smi
        hbm_used_mb = 0
        notes.append("HBM in use unknown: assumed 0 MB; the plan may be optimistic")
    if npus is None:
        npus = 1
    _check_int("hbm_total_mb", hbm_total_mb, 1)
    _check_int("hbm_used_mb", hbm_used_mb, 0)
    _check_int("npus", npus, 1)
    _check_int("port", port, 1)
    if port > 65535:
        raise InputError(f"port must be 1-65535, got {port}")
    if hbm_used_mb >= hbm_total_mb:
        raise InputError(
            f"hbm_used_mb {hbm_used_mb} is not below hbm_total_mb {hbm_total_mb}; check the "
            "npu-smi figures (HBM-Usage used / total, in MB)"
        )
    if (
        isinstance(gpu_memory_utilization, bool)
        or not isinstance(gpu_memory_utilization, (int, float))
        or not 0 < gpu_memory_utilization <= 1
    ):
        raise InputError(
            f"gpu_memory_utilization must be a number in (0, 1], got {gpu_memory_utilization!r}"
        )
    for name, value in (("max_model_len", max_model_len), ("max_num_seqs", max_num_seqs)):
        if value is not None:
            _check_int(name, value, 1)
    if tp is not None:
        _check_int("tp", tp, 1)
    if host_ram_mb is not None:
        _check_int("host_ram_mb", host_ram_mb, 1)
    if not isinstance(host, str) or not host:
        raise InputError(f"host must be a non-empty string, got {host!r}")
    extra = list(extra_args or [])
    for arg in extra:
        if not isinstance(arg, str):
            raise InputError(f"extra_args must be strings, got {arg!r}")
        flag = arg.split("=", 1)[0]
        if flag == "--api-key":
            raise InputError(
                "extra_args must not carry --api-key (it would show in the process table); "
                "use api_key_env and give the container VLLM_API_KEY"
            )
        if flag in _PLANNED_FLAGS:
            raise InputError(
                f"extra argument {flag} conflicts with the value the plan sets; use the "
                "plan's own option for it"
            )

    rules = load_rules(rules_path)
    hw_key = str(hardware).strip().lower()
    hw = rules["hardware"].get(hw_key)
    if hw is None:
        raise CheckFailed(
            f"unknown hardware {hardware!r}; known: {', '.join(rules['hardware'])} "
            "(a2 = Atlas A2 / 910B, a3 = Atlas A3 / 910C, a5 = Ascend 950, 310p = Atlas 300I Duo)"
        )
    version = parse_version(vllm_ascend) if vllm_ascend is not None else None
    if version is not None and version < parse_version(hw["supported_since"]):
        raise CheckFailed(
            f"vllm-ascend {vllm_ascend} does not support {hw['name']}; support starts with "
            f"{hw['supported_since']}"
        )

    facts = inspect_model(model_dir, fp8_native=bool(hw["fp8_native"]))
    if facts["unsized"]:
        archs = "/".join(facts["architectures"]) or "an unnamed architecture"
        raise CheckFailed(
            f"{os.path.join(model_dir, 'config.json')}: the planner cannot size {archs} "
            f"(model_type {facts['model_type']!r}): {facts['unsized']}"
        )
    quant_flag = _resolve_quantization(facts, quantization, hw, model_dir)
    if hw.get("eager_only") and not enforce_eager:
        enforce_eager = True
        notes.append(f"{hw['name']} runs in eager mode only: --enforce-eager added")

    # The model's context limit as vLLM derives it (model_info.context_limit): the position
    # limit, times the RoPE scaling factor (YaRN: original_max_position_embeddings x factor).
    max_pos = facts["max_model_len_limit"]
    if max_model_len is not None and max_model_len > max_pos:
        yarn_hint = (
            "; Qwen3 reaches 131072 with YaRN (rope_scaling rope_type yarn, factor 4.0, "
            "original_max_position_embeddings 32768 in config.json)"
            if facts["rope_scaling"] is None and facts["model_type"] == "qwen3"
            else ""
        )
        raise CheckFailed(
            f"--max-model-len {max_model_len} is larger than the model's limit {max_pos} "
            f"({facts['max_model_len_source']}; {os.path.join(model_dir, 'config.json')}); "
            f"vLLM would refuse it. Use {max_pos} or less{yarn_hint}"
        )

    heads, kv_heads = facts["num_attention_heads"], facts["num_key_value_heads"]
    if facts["mla"]:
        kv_heads = heads  # MLA caches one latent per token, replicated: only heads split
    valid = valid_tp_sizes(heads, kv_heads)
    if tp is not None:
        if tp not in valid:
            raise CheckFailed(
                f"tensor parallel size {tp} does not divide num_attention_heads {heads} and "
                f"num_key_value_heads {kv_heads}; valid sizes: {', '.join(map(str, valid))}"
            )
        if tp > npus:
            raise CheckFailed(f"tensor parallel size {tp} needs {tp} NPUs but --npus is {npus}")
        candidates = [tp]
    else:
        candidates = [t for t in valid if t <= npus]

    def size(t: int) -> dict:
        return _size(
            facts,
            t,
            mm,
            hbm_total_mb,
            hbm_used_mb,
            gpu_memory_utilization,
            enforce_eager,
            max_model_len,
            max_num_seqs,
        )

    attempts = [size(t) for t in candidates]
    feasible = [a for a in attempts if not a["reasons"]]
    if feasible:
        chosen = max(feasible, key=lambda a: (a["max_model_len"], -a["tp"]))
    else:
        chosen = attempts[-1]
        larger = [t for t in valid if t > npus]
        if tp is None and larger:
            # Name the smallest larger TP that would fit: the concrete "use more NPUs".
            fits = None
            for t in larger:
                trial = size(t)
                if not trial["reasons"]:
                    fits = trial
                    break
            chosen["reasons"].append(
                f"no TP up to {npus} NPU(s) fits; valid larger sizes need more NPUs: "
                f"{', '.join(map(str, larger))}"
                + (
                    f" (TP {fits['tp']} on {fits['tp']} NPUs fits: its KV cache holds "
                    f"{fits['budget']['kv_capacity_tokens']} tokens, max_model_len "
                    f"{fits['max_model_len']})"
                    if fits
                    else " (none of them fits either)"
                )
            )
    t = chosen["tp"]
    replicas = npus // t
    if npus % t:
        notes.append(f"{npus % t} NPU(s) stay unused: {npus} is not a multiple of TP {t}")
    if max_model_len is None and chosen["max_model_len"] < max_pos and not chosen["reasons"]:
        notes.append(
            f"max_model_len lowered from the model's {max_pos} to {chosen['max_model_len']} "
            "tokens: that is what the KV cache holds"
        )

    ctx = {"tp": t, "version": version, "hardware": hw_key}
    env: dict[str, str] = {}
    for rule in rules["env"]:
        if rule_applies(rule.get("when", {}), t, version, hw_key):
            env[rule["name"]] = str(rule["value"])

    swap_gib = _swap_space(rules["flags"]["--swap-space"], ctx, host_ram_mb, t * replicas, notes)
    ep_rule = rules["flags"].get("--enable-expert-parallel")
    expert_parallel = bool(
        facts["moe"] and ep_rule and rule_applies(ep_rule.get("when", {}), t, version, hw_key)
    )
    if expert_parallel:
        notes.append(
            f"MoE with {facts['moe']['experts']} experts at TP {t}: --enable-expert-parallel "
            "spreads whole experts over the TP ranks (all experts stay resident)"
        )

    if facts["needs_conversion"]:
        serve_dir = served_model_dir or os.path.normpath(model_dir) + "-bf16"
    else:
        serve_dir = served_model_dir or model_dir
    name = served_model_name or os.path.basename(os.path.normpath(model_dir))
    length, seqs = chosen["max_model_len"], chosen["max_num_seqs"]

    def argv_for(replica_port: int) -> list[str]:
        argv = ["vllm", "serve", serve_dir, "--host", host, "--port", str(replica_port)]
        argv += ["--served-model-name", name, "--tensor-parallel-size", str(t)]
        argv += ["--max-model-len", str(length)]
        if seqs is not None:
            argv += ["--max-num-seqs", str(seqs)]
        argv += ["--gpu-memory-utilization", str(gpu_memory_utilization)]
        if hw.get("dtype"):
            argv += ["--dtype", hw["dtype"]]
        if quant_flag == "ascend":
            argv += ["--quantization", "ascend"]
        if enforce_eager:
            argv.append("--enforce-eager")
        if expert_parallel:
            argv.append("--enable-expert-parallel")
        if swap_gib:
            argv += ["--swap-space", str(swap_gib)]
        return argv + extra

    devices = [list(range(r * t, (r + 1) * t)) for r in range(replicas)]
    launches = []
    hccl = rules.get("hccl_ports", {})
    for r, devs in enumerate(devices):
        renv = dict(env)
        renv["ASCEND_RT_VISIBLE_DEVICES"] = ",".join(map(str, devs))
        if t > 1 and replicas > 1 and hccl:
            renv["HCCL_IF_BASE_PORT"] = str(hccl["base"] + r * hccl["stride_per_replica"])
        launches.append(
            {"devices": devs, "port": port + r, "argv": argv_for(port + r), "env": renv}
        )

    secret_env = []
    if api_key_env:
        secret_env.append(rules.get("api_key_env", {}).get("name", "VLLM_API_KEY"))
        notes.append(
            "API key: give the container VLLM_API_KEY from a secret (env file); vLLM reads it "
            "when --api-key is absent, so the key never appears in argv"
        )
    if facts["needs_conversion"]:
        notes.append(
            f"FP8 weights are converted to BF16 for {hw['name']} (no FP8 compute): "
            f"{facts['weight_bytes_on_disk']:,} bytes on disk become "
            f"{facts['weight_bytes_served']:,} bytes; serving {serve_dir}"
        )
    reasons = chosen["reasons"]
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
        "replicas": replicas,
        "max_model_len": length,
        "max_num_seqs": seqs,
        "gpu_memory_utilization": gpu_memory_utilization,
        "quantization": quant_flag,
        "enforce_eager": enforce_eager,
        "expert_parallel": expert_parallel,
        "swap_space_gib": swap_gib,
        "conversion": {
            "required": facts["needs_conversion"],
            "source": model_dir,
            "target": serve_dir if facts["needs_conversion"] else None,
        },
        "feasible": not reasons,
        "reasons": reasons,
        "notes": notes,
        "argv": launches[0]["argv"],
        "env": launches[0]["env"],
        "secret_env": secret_env,
        "devices_per_replica": devices,
        "replica_launch": launches,
        "command": shlex.join(launches[0]["argv"]),
    }


def _swap_space(
    rule: dict, ctx: dict, host_ram_mb: int | None, ranks: int, notes: list[str]
) -> int | None:
    """GiB for --swap-space, or None when the version lacks it or host RAM does not allow."""
    if host_ram_mb is None:
        return None
    if not rule_applies(rule.get("when", {}), ctx["tp"], ctx["version"], ctx["hardware"]):
        notes.append(
            "--swap-space omitted: removed in vLLM 0.18.0 / unused by the V1 engine"
            + (" (vllm-ascend version unknown)" if ctx["version"] is None else "")
        )
        return None
    limit = int(host_ram_mb * rule.get("max_ram_fraction", 0.4) / 1024 / ranks)
    gib = min(int(rule.get("default_gib", 4)), limit)
    if gib < 1:
        notes.append(
            f"--swap-space omitted: {host_ram_mb} MB host RAM cannot give {ranks} NPU "
            "worker(s) 1 GiB each within 40% of RAM"
        )
        return None
    return gib


def describe(plan: dict) -> str:
    """A human-readable rendering of a plan."""
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
    lines = [
        f"model      {plan['model_dir']} ({m['model_type']}, {m['num_hidden_layers']} layers, "
        f"{attn}, max_position_embeddings {m['max_position_embeddings']})",
        f"context    limit {m['max_model_len_limit']} tokens ({m['max_model_len_source']})",
        f"quant      {m['quant_method'] or 'none'}"
        + (f", block {m['weight_block_size']}" if m["weight_block_size"] else ""),
        f"weights    {m['weight_bytes_on_disk']:,} bytes on disk ({m['tensor_count']} tensors), "
        f"{m['weight_bytes_served']:,} bytes served ({m['served_tensor_count']} tensors)"
        + (", FP8 -> BF16 conversion required" if m["needs_conversion"] else ""),
        f"kv         {plan['kv_bytes_per_token']:,} bytes per token",
        f"memory     per NPU: {mem['hbm_total_mb']} MB x {mem['gpu_memory_utilization']} = "
        f"{mem['usable_mb']} MB, minus in use {mem['used_by_others_mb']}, weights "
        f"{mem['weights_per_npu_mb']}, activation {mem['activation_mb']}, graphs "
        f"{mem['graph_capture_mb']}, runtime {mem['runtime_reserve_mb']}, HCCL {mem['hccl_mb']} "
        f"= KV {mem['kv_budget_mb']} MB",
        f"capacity   {plan['kv_capacity_tokens']:,} KV tokens per replica",
        f"plan       tp {plan['tp']}, replicas {plan['replicas']} "
        f"{plan['devices_per_replica']}, max_model_len {plan['max_model_len']}, max_num_seqs "
        f"{plan['max_num_seqs']}, gpu_memory_utilization {plan['gpu_memory_utilization']}",
        f"feasible   {'yes' if plan['feasible'] else 'NO'}",
    ]
    lines += [f"  reason:  {r}" for r in plan["reasons"]]
    lines += [f"  note:    {n}" for n in plan["notes"]]
    lines.append("env")
    lines += [f"  {k}={v}" for k, v in plan["env"].items()]
    lines += [f"  {k}=<from secret>" for k in plan["secret_env"]]
    lines.append("command")
    lines.append(f"  {plan['command']}")
    return "\n".join(lines)
