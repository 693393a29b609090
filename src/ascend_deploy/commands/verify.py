"""``ascend-deploy verify --url URL``: prove a deployment answers correctly (exit 0 only if so)."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys

from ..cli import emit
from ..errors import InputError
from .argtypes import positive_float, positive_int

KEY_ENV = "VLLM_API_KEY"
MAX_KEY = 4096


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", required=True, help="base URL of the service (http://HOST:PORT)")
    key = parser.add_mutually_exclusive_group()
    key.add_argument(
        "--api-key-file",
        metavar="FILE",
        help="file holding the service's bearer key (one line). Without this option or "
        f"--api-key the key is read from ${KEY_ENV}, the preferred way",
    )
    key.add_argument(
        "--api-key",
        metavar="KEY",
        help=f"the bearer key itself; avoid it: argv is visible to every user in ps (use "
        f"${KEY_ENV} or --api-key-file)",
    )
    parser.add_argument("--model", help="served model name (default: the first one listed)")
    parser.add_argument("--suite", metavar="FILE", help="YAML/JSON suite (default: shipped suite)")
    parser.add_argument(
        "--concurrency", type=positive_int, default=4, metavar="N", help="concurrent requests"
    )
    parser.add_argument(
        "--burst-tokens",
        type=positive_int,
        default=128,
        metavar="N",
        help="output tokens of each concurrent request",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=600.0,
        metavar="S",
        help="seconds to wait for readiness",
    )
    parser.add_argument(
        "--request-timeout",
        type=positive_float,
        default=300.0,
        metavar="S",
        help="deadline of each request, connect to last byte (default 300)",
    )
    parser.add_argument(
        "--expect-max-model-len",
        type=positive_int,
        metavar="N",
        help="fail unless the service runs with this max_model_len (the plan's)",
    )
    parser.add_argument(
        "--no-max-len-probe",
        action="store_true",
        help="do not send a request that fills max_model_len",
    )
    parser.add_argument(
        "--reference-model",
        metavar="DIR",
        help="BF16 model directory: compare served logprobs with a CPU reference (torch)",
    )
    parser.add_argument(
        "--precision-tolerance",
        type=positive_float,
        default=None,
        metavar="X",
        help="largest logprob difference accepted (default: derived from BF16 per prompt; the "
        "KL tolerance is then X^2/2)",
    )
    parser.add_argument("--report", metavar="DIR", help="write verify.json and verify.md here")
    parser.add_argument("--json", action="store_true", help="print the JSON report")


def valid_key(key: str, where: str) -> str:
    """``key`` if it can travel in an HTTP header; InputError naming ``where`` otherwise."""
    if not key:
        raise InputError(f"{where}: the API key is empty")
    if len(key) > MAX_KEY or any(not ("!" <= ch <= "~") for ch in key):
        raise InputError(
            f"{where}: the API key must be one line of at most {MAX_KEY} visible ASCII "
            "characters (no spaces or control characters)"
        )
    return key


def read_key_file(path: str) -> str:
    """The key in ``path`` (trailing newline removed); InputError for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise InputError(f"--api-key-file {path}: cannot open ({exc.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f"--api-key-file {path}: not a regular file")
        raw = os.read(fd, MAX_KEY + 2)
    except OSError as exc:
        raise InputError(f"--api-key-file {path}: cannot read ({exc.strerror})") from None
    finally:
        os.close(fd)
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise InputError(f"--api-key-file {path}: not an ASCII key") from None
    return valid_key(text.removesuffix("\n").removesuffix("\r"), f"--api-key-file {path}")


def api_key(args: argparse.Namespace) -> str | None:
    """--api-key-file, else --api-key, else $VLLM_API_KEY, else None."""
    if args.api_key_file:
        return read_key_file(args.api_key_file)
    if args.api_key is not None:
        return valid_key(args.api_key, "--api-key")
    env = os.environ.get(KEY_ENV)
    return valid_key(env, f"${KEY_ENV}") if env else None


def write_report(report: dict, directory: str) -> list[str]:
    from ..verification.verifier import render_markdown

    try:
        os.makedirs(directory, exist_ok=True)
        paths = [os.path.join(directory, "verify.json"), os.path.join(directory, "verify.md")]
        with open(paths[0], "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2, ensure_ascii=False)
            fh.write("\n")
        with open(paths[1], "w", encoding="utf-8") as fh:
            fh.write(render_markdown(report))
    except OSError as exc:
        raise InputError(f"{directory}: cannot write the report ({exc.strerror})") from None
    return paths


def run(args: argparse.Namespace) -> int:
    from ..verification.verifier import Options, render_human, run_verify

    key = api_key(args)
    try:
        opts = Options(
            url=args.url,
            api_key=key,
            model=args.model,
            suite=args.suite,
            concurrency=args.concurrency,
            ready_timeout=args.timeout,
            request_timeout=args.request_timeout,
            burst_tokens=args.burst_tokens,
            max_len_probe=not args.no_max_len_probe,
            expect_max_model_len=args.expect_max_model_len,
            reference_model=args.reference_model,
            precision_tolerance=args.precision_tolerance,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
        report = run_verify(opts)
    except ValueError as exc:  # the URL
        raise InputError(f"--url {args.url!r}: {exc}") from None
    if args.report:
        write_report(report, args.report)
    emit(report, args.json, render_human)
    return 0 if report["ok"] else 1
