"""``ascend-deploy plan``: size a vLLM-Ascend deployment from the model and NPU memory."""

from __future__ import annotations

import argparse

from ..cli import emit
from ..planning.plan import describe, make_plan
from ..planning.rules import load_rules


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


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
    a("--model-dir", required=True, help="Hugging Face model directory (config.json + safetensors)")
    a("--hbm-total-mb", required=True, type=_positive_int, help="HBM per NPU, MB (npu-smi)")
    a(
        "--hbm-used-mb",
        type=_non_negative_int,
        default=0,
        help="HBM already in use on each NPU, MB (npu-smi; the highest of the NPUs)",
    )
    a("--npus", type=_positive_int, default=1, help="NPUs to use on this host (default 1)")
    a("--hardware", default="a2", help="a2 (910B), a3 (910C), a5 (Ascend 950), 310p")
    a("--vllm-ascend", metavar="VERSION", help="vllm-ascend version, e.g. v0.13.0")
    a("--max-model-len", type=_positive_int, help="pin the context length")
    a("--max-num-seqs", type=_positive_int, help="pin the number of concurrent sequences")
    a("--tp", type=_positive_int, help="pin the tensor parallel size")
    a("--gpu-memory-utilization", type=_fraction, default=0.9, help="default 0.9")
    a("--quantization", help="only 'ascend' for ModelSlim checkpoints; checked against the model")
    a("--enforce-eager", action="store_true", help="disable graph capture")
    a("--host-ram-mb", type=_positive_int, help="host RAM, MB; enables --swap-space if it allows")
    a("--port", type=_positive_int, default=8000, help="API port of the first replica")
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
    a("--json", action="store_true", help="print the plan as JSON")


def run(args: argparse.Namespace) -> int:
    plan = make_plan(
        args.model_dir,
        hbm_total_mb=args.hbm_total_mb,
        hbm_used_mb=args.hbm_used_mb,
        npus=list(range(args.npus)),
        hardware=args.hardware,
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
    )
    emit(plan, args.json, describe)
    return 0 if plan["feasible"] else 1
