"""The ``ascend-deploy`` command line.

Each subcommand lives in ``ascend_deploy.commands.<module>`` and provides
``add_arguments(parser)`` and ``run(args) -> int``. Only the chosen subcommand's module
is imported, so a missing optional dependency of one command never breaks another.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from . import __version__
from .errors import AscendDeployError

# name -> (module under ascend_deploy.commands, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "npu-smi": ("npu_smi", "parse npu-smi output or show this host's NPUs"),
    "versions": ("versions", "read driver, firmware, CANN and Python package versions"),
    "compat": ("compat", "resolve or check a matching vllm-ascend / torch_npu / CANN set"),
    "plan": ("plan", "plan vllm serve arguments from the model and NPU memory"),
    "plan-group": ("plan_group", "plan one vllm serve per member of a multi-host group (DP x TP)"),
    "procs": ("procs", "find (and end) processes holding the port or NPU memory"),
    "preflight": ("preflight", "run every host check and report what would fail"),
    "convert": ("convert", "convert a block-FP8 checkpoint to BF16"),
    "manifest": ("manifest", "write (or check) the SHA256SUMS of a model or hub download"),
    "verify": ("verify", "prove a running deployment answers correctly"),
    "diagnose": ("diagnose", "name the root cause of a failed vLLM-Ascend start from its log"),
}


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """``--help`` shows each option's default (unless its help already names it)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or default in (None, False, [], argparse.SUPPRESS)
            or action.option_strings == []
        ):
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


class OneLineParser(argparse.ArgumentParser):
    """Usage errors are one line on stderr naming the command and ``--help`` (exit 2); with
    ``--json`` anywhere on the command line, also an error object on stdout."""

    def error(self, message: str) -> NoReturn:
        report_error(self.prog, f"{message} (see {self.prog} --help)", 2, _JSON_REQUESTED[0])
        raise SystemExit(2)


# Whether the command line main() parses asks for --json (argparse errors come before any
# parsed namespace).
_JSON_REQUESTED = [False]


def report_error(prog: str, message: str, exit_code: int, as_json: bool) -> None:
    """One line on stderr; with ``as_json`` an ``{"error", "exit_code"}`` object on stdout."""
    if as_json:
        print(json.dumps({"error": message, "exit_code": exit_code, "command": prog}))
    print(f"{prog}: error: {message}", file=sys.stderr)


def build_parser(chosen: str | None) -> argparse.ArgumentParser:
    """Top-level parser; only ``chosen`` gets its full argument set."""
    parser = OneLineParser(
        prog="ascend-deploy",
        description="Deploy and verify vLLM-Ascend serving on Ascend NPU hosts.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for name, (module_name, help_text) in COMMANDS.items():
        sp = sub.add_parser(
            name, help=help_text, description=help_text, formatter_class=DefaultsHelpFormatter
        )
        if name == chosen:
            module = importlib.import_module(f"{__package__}.commands.{module_name}")
            module.add_arguments(sp)
            sp.set_defaults(_run=module.run)
    return parser


def emit(result: Any, as_json: bool, human: Callable[[Any], str]) -> None:
    """Print ``result`` as indented JSON or as the human rendering."""
    if as_json:
        print(json.dumps(result, indent=2, sort_keys=False))
    else:
        print(human(result))


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    _JSON_REQUESTED[0] = "--json" in args_list
    chosen = next((a for a in args_list if not a.startswith("-")), None)
    parser = build_parser(chosen if chosen in COMMANDS else None)
    args = parser.parse_args(args_list)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except AscendDeployError as exc:
        as_json = bool(getattr(args, "json", False))
        report_error(f"ascend-deploy {args.command}", str(exc), exc.exit_code, as_json)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"ascend-deploy {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
