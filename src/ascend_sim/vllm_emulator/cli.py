"""``vllm`` command line of the emulator: ``vllm serve MODEL [options]`` and ``vllm --version``.

The top of the emulator's layers: parse the arguments (``args``), run the start-up checks
(``startup``), then serve HTTP (``server``). Nothing below imports this module.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ascend_deploy.errors import AscendDeployError, InputError

from .args import build_parser, normalise
from .versions import load_row


def serve(args: argparse.Namespace) -> int:
    """``vllm serve``: start up, then serve until stopped. Returns the exit code."""
    # imported here so that `vllm --version` stays quick (the HTTP server costs ~0.15 s)
    from .server import run_server
    from .startup import StartupFailed, run_startup

    try:
        dep = run_startup(args)
    except StartupFailed as exc:
        return exc.exit_code
    except AscendDeployError as exc:
        print(f"vllm serve: error: {exc}", file=sys.stderr)
        return exc.exit_code if isinstance(exc, InputError) else 1
    try:
        return run_server(dep)
    except AscendDeployError as exc:
        print(f"vllm serve: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, InputError) else 1
    except KeyboardInterrupt:
        return 0


def main(argv: Sequence[str] | None = None) -> int:
    args_list = normalise(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(args_list)
    if args.version:
        try:
            print(load_row()["vllm"].lstrip("v"))
        except Exception as exc:  # the row file is an InputError with the path
            print(f"vllm: error: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.subcommand != "serve":
        parser.print_help()
        return 2
    model = args.model or args.model_tag
    if not model:
        parser.error("serve: the following arguments are required: model_tag")
    args.model = model
    return serve(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
