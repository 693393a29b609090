"""``ascend-deploy plan-group``: plan one deployment over several hosts (DP x TP x EP)."""

from __future__ import annotations

import argparse
import json

from ..cli import emit
from ..errors import InputError, describe_path
from ..planning.multinode import (
    BACKENDS,
    DEFAULT_RPC_PORT,
    describe_group,
    load_members,
    plan_group,
)
from ..planning.rules import load_rules
from .argtypes import positive_int
from .plan import _fraction


def add_arguments(parser: argparse.ArgumentParser) -> None:
    a = parser.add_argument
    a("--model-dir", required=True, help="Hugging Face model directory (config.json is enough)")
    a(
        "--members",
        required=True,
        metavar="FILE",
        help='JSON (or YAML, with PyYAML installed) file: {"leader": name, "members": [{"name", '
        '"address", "nic", "npus", "hbm_total_mb", "hbm_used_mb"}]} (docs/multinode.md)',
    )
    a(
        "--leader",
        help="member that serves the API and the DP RPC (default: the file's, or the first)",
    )
    a(
        "--backend",
        choices=BACKENDS,
        default="mp",
        help="mp: native DP with --headless; ray: TP x PP",
    )
    a("--tp", type=positive_int, help="pin the tensor parallel size")
    a("--dp", type=positive_int, help="pin the data parallel size")
    a("--pp", type=positive_int, help="pin the pipeline parallel size (ray only)")
    a("--hardware", type=str.lower, help="a2, a3, ... (default: the members', else a2)")
    a("--vllm-ascend", metavar="VERSION", help="vllm-ascend version, e.g. v0.13.0")
    a("--max-model-len", type=positive_int, help="pin the context length")
    a("--max-num-seqs", type=positive_int, help="pin the number of concurrent sequences")
    a("--gpu-memory-utilization", type=_fraction, default=0.9, help="default 0.9")
    a("--enforce-eager", action="store_true", help="disable graph capture")
    a("--port", type=positive_int, default=8000, help="API port on the leader")
    a("--rpc-port", type=positive_int, default=DEFAULT_RPC_PORT, help="--data-parallel-rpc-port")
    a("--hccl-buffsize-mb", type=positive_int, default=200, help="HCCL_BUFFSIZE per member")
    a("--served-model-name", help="model name clients send (default: directory name)")
    a("--extra-arg", action="append", default=[], metavar="ARG", help="extra vllm serve argument")
    a("--json", action="store_true", help="print the plan as JSON")


def read_members_file(path: str) -> object:
    """The parsed members file (JSON; YAML when PyYAML is importable)."""
    where = describe_path(path)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--members {where}: cannot read it ({exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        json_error = exc
    try:
        import yaml  # optional: only for YAML members files
    except ImportError:
        raise InputError(
            f"--members {where}: not valid JSON (line {json_error.lineno}: {json_error.msg}); "
            "YAML needs PyYAML installed"
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"--members {where}: neither JSON nor YAML ({exc})") from None


def run(args: argparse.Namespace) -> int:
    members, leader = load_members(read_members_file(args.members), f"--members {args.members}")
    plan = plan_group(
        args.model_dir,
        members,
        leader=args.leader or leader,
        backend=args.backend,
        tp=args.tp,
        dp=args.dp,
        pp=args.pp,
        hardware=args.hardware,
        vllm_ascend=args.vllm_ascend,
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        gpu_memory_utilization=args.gpu_memory_utilization,
        enforce_eager=args.enforce_eager,
        port=args.port,
        rpc_port=args.rpc_port,
        hccl_buffsize_mb=args.hccl_buffsize_mb,
        served_model_name=args.served_model_name,
        extra_args=args.extra_arg,
        rules=load_rules(),
    )
    emit(plan, args.json, describe_group)
    return 0 if plan["feasible"] else 1
