"""Checks of a planning request that come before any sizing (standard library only).

InputError: a malformed argument (a bad number, an NPU list with duplicates, an extra
argument that repeats a planned flag). CheckFailed: a request that can never work on this
hardware or model (unknown hardware, a release without support for it, a quantization flag
that does not match the checkpoint, a pinned context above the model's limit).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..errors import CheckFailed, InputError
from ..model.files import MODELSLIM_DESCRIPTION
from ..versioning import version_key

# Below this, a memory figure is not an NPU's (a 310 chip reports about 3.5 GB of DDR, 910B
# cards 32 or 64 GB): most likely GB given as MB (64 for a 64 GB card).
MIN_NPU_MEMORY_MB = 1024
# Flags the plan sets itself; extra_args may not repeat them.
PLANNED_FLAGS = (
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


def check_int(name: str, value: object, minimum: int) -> int:
    """``value`` when it is an integer >= ``minimum`` (bools are not), else InputError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def npu_ids(npus: int | Sequence[int] | None) -> list[int]:
    """The NPU ids the service gets: a count ``n`` means NPUs 0..n-1 (None: one NPU)."""
    if npus is None:
        return [0]
    if isinstance(npus, (str, bytes)) or not isinstance(npus, (int, Sequence)):
        raise InputError(f"npus must be a count or a list of NPU ids, got {npus!r}")
    if isinstance(npus, int):
        return list(range(check_int("npus", npus, 1)))
    ids = [check_int("NPU id", n, 0) for n in npus]
    if not ids:
        raise InputError("npus is an empty list; give the ids of the NPUs the service may use")
    if len(set(ids)) != len(ids):
        raise InputError(f"npus {ids} names an NPU twice; list each NPU id once")
    return ids


def vllm_ascend_version(text: object) -> tuple:
    """The ``version_key`` of a vllm-ascend release (``v0.13.0``, ``0.14.0rc1``)."""
    if not isinstance(text, str):
        raise InputError(f"vllm-ascend version must be a string, got {text!r}")
    try:
        return version_key(text.strip())
    except ValueError:
        raise InputError(
            f"vllm-ascend version {text!r} is not a version like v0.13.0 or v0.14.0rc1"
        ) from None


def check_request(
    hbm_total_mb: int,
    hbm_used_mb: int,
    port: int,
    gpu_memory_utilization: float,
    max_model_len: int | None,
    max_num_seqs: int | None,
    tp: int | None,
    host_ram_mb: int | None,
    host: str,
    service: str = "vllm",
) -> None:
    """InputError for a number or address the planner cannot use."""
    check_int("hbm_total_mb", hbm_total_mb, 1)
    if hbm_total_mb < MIN_NPU_MEMORY_MB:
        raise InputError(
            f"hbm_total_mb {hbm_total_mb} MB is less than any Ascend NPU has (the smallest, "
            "a 310 chip, reports about 3.5 GB); the figure is in MB, as npu-smi's HBM-Usage "
            "total: a 64 GB card is 65536. Did you give GB?"
        )
    check_int("hbm_used_mb", hbm_used_mb, 0)
    check_int("port", port, 1)
    if port > 65535:
        raise InputError(f"port must be 1-65535, got {port}")
    if hbm_used_mb >= hbm_total_mb:
        raise InputError(
            f"hbm_used_mb {hbm_used_mb} is not below hbm_total_mb {hbm_total_mb}; check the "
            "npu-smi figures (HBM-Usage used / total, in MB)"
        )
    util = gpu_memory_utilization
    if isinstance(util, bool) or not isinstance(util, (int, float)) or not 0 < util <= 1:
        raise InputError(f"gpu_memory_utilization must be a number in (0, 1], got {util!r}")
    for name, value in (
        ("max_model_len", max_model_len),
        ("max_num_seqs", max_num_seqs),
        ("tp", tp),
        ("host_ram_mb", host_ram_mb),
    ):
        if value is not None:
            check_int(name, value, 1)
    if not isinstance(host, str) or not host:
        raise InputError(f"host must be a non-empty string, got {host!r}")
    if not isinstance(service, str) or not service:
        raise InputError(
            f"service must be a non-empty name (containers are <service>-<i>), got {service!r}"
        )


def check_extra_args(extra_args: list[str] | None) -> list[str]:
    """The extra ``vllm serve`` arguments, refused when they repeat a planned flag or a key."""
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
        if flag == "--additional-config":
            raise InputError(
                "extra_args must not carry --additional-config: vLLM takes one such object and "
                "the plan builds it; give its keys in vllm_service_additional_config (CLI: "
                "ascend-deploy plan --additional-config JSON), they are merged with the planned "
                "keys and win over them"
            )
        if flag in PLANNED_FLAGS:
            raise InputError(
                f"extra argument {flag} conflicts with the value the plan sets; use the "
                "plan's own option for it"
            )
    return extra


def hardware_entry(rules: dict, hardware: str, vllm_ascend: str | None) -> tuple[str, dict]:
    """The rules' entry for ``hardware``; CheckFailed when unknown or the release lacks it."""
    key = str(hardware).strip().lower()
    hw = rules["hardware"].get(key)
    if hw is None:
        raise CheckFailed(
            f"unknown hardware {hardware!r}; known: {', '.join(rules['hardware'])} "
            "(a2 = Atlas A2 / 910B, a3 = Atlas A3 / 910C, a5 = Ascend 950, 310p = Atlas 300I Duo)"
        )
    if vllm_ascend is not None and vllm_ascend_version(vllm_ascend) < version_key(
        hw["supported_since"]
    ):
        raise CheckFailed(
            f"vllm-ascend {vllm_ascend} does not support {hw['name']}; support starts with "
            f"{hw['supported_since']}"
        )
    return key, hw


def check_model(facts: dict, model_dir: str, max_model_len: int | None) -> None:
    """CheckFailed when the planner cannot size the model or a pinned context exceeds it."""
    config = os.path.join(model_dir, "config.json")
    if facts["unsized"]:
        archs = "/".join(facts["architectures"]) or "an unnamed architecture"
        raise CheckFailed(
            f"{config}: the planner cannot size {archs} "
            f"(model_type {facts['model_type']!r}): {facts['unsized']}"
        )
    # The model's context limit as vLLM derives it (model.info.context_limit): the position
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
            f"({facts['max_model_len_source']}; {config}); "
            f"vLLM would refuse it. Use {max_pos} or less{yarn_hint}"
        )


def resolve_quantization(
    facts: dict, requested: str | None, model_dir: str, fp8_refusal: str
) -> str | None:
    """The --quantization value to pass, or CheckFailed for a mismatch (pitfall 7).

    ``fp8_refusal``: why this release cannot serve block-FP8 as it is on this hardware
    (``rules.block_fp8_native``); empty when it can.
    """
    fp8_native = not fp8_refusal
    method = facts["quant_method"]
    desc = os.path.join(model_dir, MODELSLIM_DESCRIPTION)
    if requested is not None:
        req = requested.strip().lower()
        if req == "ascend" and method != "ascend":
            kind = f"a {method.upper()} checkpoint" if method else "a float (unquantized) model"
            raise CheckFailed(
                f"--quantization ascend needs a ModelSlim checkpoint with {desc}, but "
                f"{model_dir} is {kind}; vLLM-Ascend refuses it at start ('Cannot find the config "
                "file for ascend' up to v0.14.0rc1 and at v0.16.0rc1, 'ModelSlim Quantization "
                "Config Not Found' at v0.15.0rc1 and from v0.17.0rc1). Drop --quantization"
                + (", the FP8 weights are converted to BF16" if method == "fp8" else "")
            )
        if req == "fp8" and not fp8_native:
            raise CheckFailed(
                f"--quantization fp8 cannot be served: {fp8_refusal}; the plan serves the "
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
        return "fp8" if fp8_native else None  # converted to BF16 otherwise
    return method  # compressed-tensors etc.: vLLM reads the method from config.json
