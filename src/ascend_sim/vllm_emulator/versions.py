"""The image's compat-matrix row and per-version behaviour, as data.

The row (vllm-ascend, vllm, torch, torch_npu, CANN, hardware) comes from the image build
arguments, written to ``/opt/ascend-sim/row.json`` at build time (``ASCEND_SIM_ROW``
overrides the path). Behaviour that changed between vllm-ascend releases is looked up in
``BEHAVIOUR`` by version, never decided by scattered ifs.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from ascend_deploy import versioning
from ascend_deploy.errors import InputError

DEFAULT_ROW_PATH = "/opt/ascend-sim/row.json"
ROW_KEYS = ("vllm_ascend", "vllm", "torch", "torch_npu", "cann", "hardware")


def version_key(text: str) -> tuple:
    """``versioning.version_key`` of a row cell; a paired cell (``v0.10.1/v0.10.1.1``) by its
    first release. ValueError when it is not a version."""
    return versioning.version_key(text.split("/", 1)[0])


def at_least(version: str, minimum: str) -> bool:
    return version_key(version) >= version_key(minimum)


@dataclass(frozen=True)
class Behaviour:
    """What one vllm-ascend release does in the situations the emulator reproduces."""

    # NPUPlatform.supported_quantization: anything else (from --quantization or the
    # checkpoint's quantization_config) fails verify_quantization with
    # "<method> quantization is currently not supported in npu." On releases that accept
    # "fp8", a generic block-FP8 checkpoint fails later, in the DeepSeek-V4 scheme (o_groups).
    supported_quantization: tuple[str, ...]
    # quant_model_description.json picked up without --quantization ascend.
    quant_autodetect: bool
    # --quantization ascend on a float model, refused at start by every release:
    # "config_not_found" (vLLM's get_quant_config: "Cannot find the config file for ascend")
    # or "modelslim_error" (vllm-ascend's boxed ValueError from maybe_update_config).
    ascend_flag_on_float: str
    # vllm-ascend sets PYTORCH_NPU_ALLOC_CONF=expandable_segments:True itself.
    sets_alloc_conf: bool
    # vLLM's memory profiling (v0.15.0rc1+, vllm-ascend #6625): the start is refused when free
    # memory < device total x util, and the KV cache is requested - (weights + peak + non-torch)
    # without subtracting other processes or the graph pool (memory.kv_budget ``profiling``).
    memory_profiling: bool = False


_Q0 = ("ascend",)
_Q12 = ("ascend", "compressed-tensors")
_Q21 = ("ascend", "compressed-tensors", "fp8", "deepseek_v4_fp8")

# (first vllm-ascend version the entry applies to, behaviour); sorted ascending.
# Sources (vllm-ascend at each tag; docs/sources.md):
# - supported_quantization: §4.1 table (v0.7.3-v0.11.0 ["ascend"]; v0.12.0rc1-v0.20.2rc1 adds
#   "compressed-tensors"; v0.21.0rc1-v0.23.0 adds "fp8", "deepseek_v4_fp8") and §4.2
#   (issue #14467: a Qwen3-style FP8 checkpoint then fails on o_groups).
# - quant_autodetect: maybe_auto_detect_quantization, called from NPUPlatform.
#   check_and_update_config, exists at v0.15.0rc1 (PR #6645), is reverted at v0.16.0rc1
#   (#6873) and back from v0.17.0rc1 (#7111): vllm_ascend/quantization/utils.py@v0.15.0rc1,
#   @v0.17.0rc1 (https://github.com/vllm-project/vllm-ascend/blob/v0.15.0rc1/vllm_ascend/quantization/utils.py).
# - ascend_flag_on_float: the same PRs make the ModelSlim config's get_config_filenames()
#   return [] and raise the boxed "ModelSlim Quantization Config Not Found" instead; before
#   (v0.7.3 - v0.14.0rc1) and at v0.16.0rc1 it returns ["quant_model_description.json"], so
#   vLLM's get_quant_config raises "Cannot find the config file for ascend"
#   (quant_config.py@v0.11.0, modelslim_config.py@v0.16.0rc1; issue #6790). No release
#   loads a float model through the W8A8 path, so none answers garbage for this input.
# - memory_profiling: worker/worker.py from v0.15.0rc1 (#6625; _init_device and
#   determine_available_memory at https://github.com/vllm-project/vllm-ascend/blob/v0.23.0/vllm_ascend/worker/worker.py).
# - sets_alloc_conf: §3.1 "Since v0.14.0rc1 ... vllm-ascend sets expandable_segments:True itself".
BEHAVIOUR: list[tuple[str, Behaviour]] = [
    ("v0.7.0", Behaviour(_Q0, False, "config_not_found", False)),
    ("v0.12.0rc1", Behaviour(_Q12, False, "config_not_found", False)),
    ("v0.14.0rc1", Behaviour(_Q12, False, "config_not_found", True)),
    ("v0.15.0rc1", Behaviour(_Q12, True, "modelslim_error", True, True)),
    ("v0.16.0rc1", Behaviour(_Q12, False, "config_not_found", True, True)),
    ("v0.17.0rc1", Behaviour(_Q12, True, "modelslim_error", True, True)),
    ("v0.21.0rc1", Behaviour(_Q21, True, "modelslim_error", True, True)),
]


def behaviour_for(vllm_ascend: str) -> Behaviour:
    """The behaviour of the newest table entry not newer than ``vllm_ascend``."""
    chosen = BEHAVIOUR[0][1]
    for first, beh in BEHAVIOUR:
        if at_least(vllm_ascend, first):
            chosen = beh
    return chosen


def kv_usage_metric_names(vllm: str) -> list[str]:
    """Prometheus names for KV-cache usage that this vLLM exports.

    ``vllm:gpu_cache_usage_perc`` is the historical name (docs.vllm.ai v0.4 - v0.9 metrics
    pages); vLLM 0.10 added ``vllm:kv_cache_usage_perc`` and deprecated the old one, which is
    hidden from 0.12 on (docs.vllm.ai/en/stable/usage/metrics). Exact cut-over releases are
    approximate.
    """
    names = []
    if not at_least(vllm, "0.12.0"):
        names.append("vllm:gpu_cache_usage_perc")
    if at_least(vllm, "0.10.0"):
        names.append("vllm:kv_cache_usage_perc")
    return names


def log_has_process_prefix(vllm: str) -> bool:
    """vLLM >= 0.10.1 prefixes log lines with ``(APIServer pid=N)`` (see messages.py)."""
    return at_least(vllm, "0.10.1")


def load_row(path: str | None = None) -> dict:
    """The image's compat row; InputError names the file when it is missing or broken."""
    p = path or os.environ.get("ASCEND_SIM_ROW") or DEFAULT_ROW_PATH
    try:
        with open(p, encoding="utf-8") as fh:
            row = json.load(fh)
    except FileNotFoundError:
        raise InputError(
            f"{p}: image row file not found; build the image with docker/vllm-ascend/Dockerfile "
            "or set ASCEND_SIM_ROW to a row.json"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{p}: unreadable image row file ({exc})") from None
    if not isinstance(row, dict):
        raise InputError(f"{p}: image row file must be a JSON object")
    missing = [k for k in ROW_KEYS if not isinstance(row.get(k), str) or not row.get(k)]
    if missing:
        raise InputError(f"{p}: image row file lacks {', '.join(missing)}")
    try:
        version_key(row["vllm_ascend"])
        version_key(row["vllm"])
    except ValueError as exc:
        raise InputError(f"{p}: {exc}") from None
    return row
