"""docs/reference/cli.md documents every command and option `ascend-deploy --help` has.

The parser is the CLI's own (``ascend_deploy.cli.build_parser``), walked into nested
subcommands (``compat resolve``, ``npu-smi parse``); a command's section is every line from one
starting with ``ascend-deploy COMMAND`` up to the next command's line or ``## `` heading. The
pasted ``plan-group --help`` and example run are compared with the real ones.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_deploy.cli import COMMANDS, build_parser

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "docs" / "reference" / "cli.md"
CLI = [sys.executable, "-m", "ascend_deploy.cli"]


def sections(text: str) -> dict[str, str]:
    """Reference text per command (see the module docstring)."""
    names = "|".join(re.escape(n) for n in sorted(COMMANDS, key=len, reverse=True))
    start = re.compile(rf"^\s*(?:\$ |`)?ascend-deploy ({names})(?![\w-])")
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        m = start.match(line)
        if m:
            current = m.group(1)
        elif line.startswith("## "):
            current = None
        if current:
            out.setdefault(current, []).append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def options(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(subcommand path, option strings) of every optional argument but --help, recursively."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), None
                yield from options(sub, (*path, name))
        elif action.option_strings and "--help" not in action.option_strings:
            yield path, action.option_strings


def command_parser(name: str) -> argparse.ArgumentParser:
    top = build_parser(name)
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def missing_from(text: str) -> list[str]:
    """Commands and options of the CLI that ``text`` (a CLI reference) does not mention."""
    found = sections(text)
    missing = []
    for name in COMMANDS:
        section = found.get(name)
        if section is None:
            missing.append(f"ascend-deploy {name}")
            continue
        for path, opts in options(command_parser(name)):
            if opts is None:
                if not re.search(rf"(?<![\w-]){re.escape(path[-1])}(?![\w-])", section):
                    missing.append(f"ascend-deploy {name} {' '.join(path)}")
            elif not any(re.search(rf"{re.escape(o)}(?![\w-])", section) for o in opts):
                where = " ".join((name, *path))
                missing.append(f"ascend-deploy {where} {'/'.join(opts)}")
    return missing


def test_every_command_and_option_is_in_the_reference():
    assert missing_from(REFERENCE.read_text(encoding="utf-8")) == []


def test_the_check_fails_when_a_command_or_an_option_is_dropped():
    text = REFERENCE.read_text(encoding="utf-8")
    no_group = re.sub(r"ascend-deploy plan-group", "ascend-deploy plan_group", text)
    assert "ascend-deploy plan-group" in missing_from(no_group)
    no_rpc = text.replace("--rpc-port", "--rpc-prt")
    assert missing_from(no_rpc) == ["ascend-deploy plan-group --rpc-port"]
    no_npus = text.replace("--npus IDS", "IDS").replace("--npus 7", "7").replace("--npus 3", "3")
    no_npus = no_npus.replace("--npus`", "`").replace("[--npus K]", "").replace("--npus", "")
    assert "ascend-deploy preflight --npus" in missing_from(no_npus)


def _indented_block_after(text: str, marker: str) -> str:
    """The 4-space indented block that follows the paragraph containing ``marker``."""
    after = text[text.index(marker) :]
    block = re.search(r"\n\n((?:    .*\n|\n)+?)\n(?! {4})", after)
    assert block, marker
    return "\n".join(line[4:] for line in block.group(1).rstrip("\n").splitlines())


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "100", "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([*CLI, *args], cwd=REPO, env=env, capture_output=True, text=True)


@pytest.mark.parametrize("command", ["plan-group", "preflight"])
def test_pasted_help_is_the_real_help(command):
    text = REFERENCE.read_text(encoding="utf-8")
    pasted = _indented_block_after(text, f"`ascend-deploy {command} --help` (at 100 columns)")
    assert pasted == _run(command, "--help").stdout.rstrip("\n")


def test_pasted_plan_group_example_is_a_real_run():
    text = REFERENCE.read_text(encoding="utf-8")
    pasted = _indented_block_after(text, "--vllm-ascend v0.23.0 --tp 8`), exit 0:")
    args = ["--model-dir", "tests/data/models/Qwen3-235B-A22B"]
    args += ["--members", "tests/data/multinode/two-a2-64g.json", "--vllm-ascend", "v0.23.0"]
    res = _run("plan-group", *args, "--tp", "8")
    assert res.returncode == 0 and pasted == res.stdout.rstrip("\n")
    refused = _run("plan-group", *args, "--tp", "6")
    assert refused.returncode == 2
    assert _indented_block_after(text, "The same with `--tp 6`, exit 2:") == refused.stderr.strip()


def test_pasted_preflight_npus_example_is_a_real_run(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "build_tree", REPO / "tests" / "data" / "hosts" / "build_tree.py"
    )
    build_tree = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_tree)
    root = build_tree.build("a2-toolkit-8.2", tmp_path / "a2-host")
    sample = "tests/data/samples/npu-smi-info_with_processes_910B1_elided_3.txt"
    res = _run("preflight", "--root", str(root), "--npu-smi-file", sample, "--npus", "7")
    assert res.returncode == 0
    text = REFERENCE.read_text(encoding="utf-8")
    pasted = _indented_block_after(text, "--npus 7`),\nexit 0:")

    def rows(table: str) -> list[tuple[str, str]]:
        cells = [line.split("|") for line in table.splitlines() if line.count("|") >= 4]
        return [(c[0].strip(), c[2].strip()) for c in cells if c[0].strip()]

    assert rows(pasted) == rows(res.stdout)
    assert "2441454 (59802 MB)" in pasted and "2441447" not in pasted
    assert pasted.splitlines()[-1] == res.stdout.rstrip("\n").splitlines()[-1]
