"""Arguments of the emulated ``vllm serve`` (the parser the command line and start-up share).

Argument names and defaults follow vLLM's engine and frontend arguments
(https://docs.vllm.ai/en/stable/cli/serve.html). Like vLLM's FlexibleArgumentParser,
``--max_model_len`` is accepted as ``--max-model-len``; an unknown option is an argparse
error (exit 2). Options that only tune real hardware are accepted and ignored.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence


def _json_arg(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _bool_opt(
    p: argparse.ArgumentParser, name: str, default: bool | None = None, help: str = ""
) -> None:
    p.add_argument(name, action=argparse.BooleanOptionalAction, default=default, help=help)


# Every option below was checked against vLLM's `vllm serve --help` (names and defaults);
# the ones marked "accepted" have no effect in the emulator.
def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model_tag", nargs="?", help="model directory")
    p.add_argument("--model", dest="model", default=None)
    # Frontend
    p.add_argument("--host", default=None)
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key", default=None)
    p.add_argument("--served-model-name", nargs="+", default=None)
    p.add_argument("--uvicorn-log-level", default="info")
    p.add_argument("--root-path", default=None)  # accepted
    p.add_argument("--allowed-origins", default=None)  # accepted
    p.add_argument("--chat-template", default=None)  # accepted
    p.add_argument("--response-role", default="assistant")
    p.add_argument("--reasoning-parser", default=None)
    _bool_opt(p, "--enable-reasoning", None)  # accepted (older releases)
    p.add_argument("--tool-call-parser", default=None)  # accepted
    p.add_argument("--enable-auto-tool-choice", action="store_true")  # accepted
    p.add_argument("--disable-log-stats", action="store_true")
    p.add_argument("--disable-log-requests", action="store_true")
    p.add_argument("--enable-log-requests", action="store_true")
    p.add_argument("--disable-fastapi-docs", action="store_true")  # accepted
    p.add_argument("--max-log-len", type=int, default=None)  # accepted
    # Model
    p.add_argument("--tokenizer", default=None)  # accepted
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", "half", "float16", "bfloat16", "float", "float32"],
    )
    p.add_argument("--max-model-len", type=_positive, default=None)
    p.add_argument("--quantization", "-q", default=None)
    p.add_argument("--load-format", default="auto")  # accepted
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--generation-config", default="auto")
    p.add_argument("--max-logprobs", type=int, default=20)
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument("--revision", default=None)  # accepted
    p.add_argument("--download-dir", default=None)  # accepted
    # Parallelism
    p.add_argument("--tensor-parallel-size", "-tp", type=_positive, default=1)
    p.add_argument("--pipeline-parallel-size", "-pp", type=_positive, default=1)
    p.add_argument("--data-parallel-size", "-dp", type=_positive, default=1)
    p.add_argument("--distributed-executor-backend", default=None)  # accepted
    _bool_opt(p, "--enable-expert-parallel", False)  # accepted
    # Cache
    p.add_argument("--gpu-memory-utilization", type=_fraction, default=0.9)
    p.add_argument("--swap-space", type=float, default=4)
    p.add_argument("--block-size", type=int, default=None)
    p.add_argument("--kv-cache-dtype", default="auto")
    _bool_opt(p, "--enable-prefix-caching", None)  # accepted
    # Scheduler
    p.add_argument("--max-num-seqs", type=_positive, default=None)
    p.add_argument("--max-num-batched-tokens", type=_positive, default=None)
    _bool_opt(p, "--enable-chunked-prefill", None)  # accepted
    # vLLM SchedulerConfig.async_scheduling (vllm/config/scheduler.py, vLLM >= 0.10.1), passed
    # by vllm-ascend's Qwen3-Dense tutorials from v0.12.0rc1
    _bool_opt(p, "--async-scheduling", None)  # accepted
    # Compilation / platform
    p.add_argument("--compilation-config", "-O", type=_json_arg, default=None)
    p.add_argument("--additional-config", type=_json_arg, default=None)
    p.add_argument("--speculative-config", type=_json_arg, default=None)  # accepted
    p.add_argument("--model-loader-extra-config", type=_json_arg, default=None)  # accepted


def normalise(argv: Sequence[str]) -> list[str]:
    """``--max_model_len=8`` -> ``--max-model-len=8`` (vLLM FlexibleArgumentParser)."""
    out = []
    for arg in argv:
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            arg = name.replace("_", "-") + eq + value
        out.append(arg)
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vllm", description="vLLM CLI (vLLM-Ascend emulator)")
    parser.add_argument("-v", "--version", action="store_true", help="show the vLLM version")
    sub = parser.add_subparsers(dest="subcommand")
    serve = sub.add_parser(
        "serve", help="start the OpenAI-compatible server", usage="vllm serve [model_tag] [options]"
    )
    add_serve_arguments(serve)
    return parser


def parse_serve_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse ``vllm serve ...`` arguments (without the leading ``serve``)."""
    return build_parser().parse_args(["serve", *normalise(argv)])
