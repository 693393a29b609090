"""``ascend-deploy plan``: size a vLLM-Ascend deployment from the model and NPU memory."""

from __future__ import annotations

import argparse
import json

from ..cli import emit
from ..errors import InputError
from ..host.procs import load_npu_info
from ..planning.compat import HARDWARE
from ..planning.plan import describe, make_plan
from ..planning.preflight import hardware_of, npu_memory
from ..planning.rules import load_rules
from .argtypes import non_negative_int, positive_int

# More than any Ascend NPU's memory (Ascend 950: 144 GB): a typo or bytes given as MB.
MAX_NPU_MEMORY_MB = 1 << 20


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    a = parser.add_argument
    a(
        "--model-dir",
        required=True,
        help="Hugging Face model directory: config.json is enough (the weights are then sized "
        "from it and the index's metadata.total_size); with the *.safetensors, their headers",
    )
    a(
        "--npu-smi-file",
        metavar="FILE",
        help="saved `npu-smi info` of the host (- = stdin): HBM per NPU, HBM in use, the "
        "number of NPUs and the hardware come from it (the options below override)",
    )
    a(
        "--hbm-total-mb",
        type=_hbm_mb,
        help="HBM per NPU in MB, as npu-smi's HBM-Usage total (64 GB = 65536); required "
        "without --npu-smi-file",
    )
    a(
        "--hbm-used-mb",
        type=non_negative_int,
        help="HBM already in use on each NPU, MB (npu-smi; the highest of the NPUs); "
        "default 0, or from --npu-smi-file",
    )
    a(
        "--npus",
        type=positive_int,
        help="NPUs to use on this host; default 1, or every NPU of --npu-smi-file",
    )
    a(
        "--hardware",
        type=str.lower,
        choices=HARDWARE,
        help="a2 (910B), a3 (910C), a5 (Ascend 950), 310p; default a2, or from --npu-smi-file",
    )
    a("--vllm-ascend", metavar="VERSION", help="vllm-ascend version, e.g. v0.13.0")
    a("--max-model-len", type=positive_int, help="pin the context length")
    a("--max-num-seqs", type=positive_int, help="pin the number of concurrent sequences")
    a("--tp", type=positive_int, help="pin the tensor parallel size")
    a("--gpu-memory-utilization", type=_fraction, default=0.9, help="default 0.9")
    a("--quantization", help="only 'ascend' for ModelSlim checkpoints; checked against the model")
    a("--enforce-eager", action="store_true", help="disable graph capture")
    a("--host-ram-mb", type=positive_int, help="host RAM, MB; enables --swap-space if it allows")
    a("--port", type=positive_int, default=8000, help="API port of the first replica")
    a("--host", default="0.0.0.0", help="address vLLM binds (default 0.0.0.0)")
    a("--served-model-name", help="model name clients send (default: directory name)")
    a(
        "--api-key-env",
        action="store_true",
        help="require an API key, given to vLLM as VLLM_API_KEY in the environment",
    )
    a("--served-model-dir", help="directory vLLM loads (the BF16 conversion output for FP8)")
    a(
        "--extra-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra vllm serve argument, repeatable (e.g. --extra-arg=--enable-prefix-caching)",
    )
    a(
        "--additional-config",
        type=_json_object,
        metavar="JSON",
        help="vllm-ascend --additional-config keys as a JSON object; merged with the keys the "
        "plan sets (yours win) and passed once",
    )
    a(
        "--extra-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra container environment, repeatable: warned about when the release no "
        "longer reads the variable",
    )
    a(
        "--host-cpus",
        type=positive_int,
        help="CPUs the serving container may use (its cpuset): checked against CPU binding's "
        "need from v0.15.0rc1",
    )
    a("--json", action="store_true", help="print the plan as JSON")


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def _extra_env(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not name:
            raise InputError(f"--extra-env {pair!r}: expected NAME=VALUE")
        env[name] = value
    return env


def _hbm_mb(text: str) -> int:
    value = positive_int(text)
    if value > MAX_NPU_MEMORY_MB:
        raise argparse.ArgumentTypeError(
            f"{value} MB is more memory than any Ascend NPU has; the figure is HBM per NPU in MB"
        )
    return value


def _from_npu_smi(args: argparse.Namespace) -> None:
    """Fill HBM, HBM in use, NPUs and hardware from the saved npu-smi output (options win)."""
    npu_info, _note = load_npu_info(args.npu_smi_file)
    chips = (npu_info or {}).get("chips") or []
    memory = npu_memory(chips)
    if memory is None:
        raise InputError(
            f"--npu-smi-file {args.npu_smi_file}: no HBM or memory figures in it; pass "
            "--hbm-total-mb and --hbm-used-mb"
        )
    if args.hbm_total_mb is None:
        args.hbm_total_mb = memory[0]
    if args.hbm_used_mb is None:
        args.hbm_used_mb = memory[1]
    if args.npus is None:
        args.npus = len(chips)
    if args.hardware is None:
        args.hardware = hardware_of(chips)


def run(args: argparse.Namespace) -> int:
    if args.npu_smi_file is not None:
        _from_npu_smi(args)
    if args.hbm_total_mb is None:
        raise InputError(
            "give --hbm-total-mb N (HBM per NPU in MB, as npu-smi shows it; 64 GB = 65536) "
            "or --npu-smi-file FILE (a saved `npu-smi info` of the host)"
        )
    plan = make_plan(
        args.model_dir,
        hbm_total_mb=args.hbm_total_mb,
        hbm_used_mb=args.hbm_used_mb or 0,
        npus=list(range(args.npus or 1)),
        hardware=args.hardware or "a2",
        vllm_ascend=args.vllm_ascend,
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        tp=args.tp,
        gpu_memory_utilization=args.gpu_memory_utilization,
        quantization=args.quantization,
        enforce_eager=args.enforce_eager,
        host_ram_mb=args.host_ram_mb,
        port=args.port,
        host=args.host,
        served_model_name=args.served_model_name,
        api_key_env=args.api_key_env,
        extra_args=args.extra_arg,
        served_model_dir=args.served_model_dir,
        rules=load_rules(),
        estimate_weights=True,
        additional_config=args.additional_config,
        extra_env=_extra_env(args.extra_env),
        host_cpus=args.host_cpus,
        host_npus=args.npus or 1,
    )
    emit(plan, args.json, describe)
    return 0 if plan["feasible"] else 1
