"""Every ``ascend-deploy ...`` command a message or fix suggests exists, as written (issue 24).

The suggestions are collected from what operators read: the string literals of the library
(docstrings left out), the shipped data (diagnose rules: fixes and the commands that settle a
guess), the roles' and playbooks' messages, the example inventory, the README and docs/. Each
is read as an argv against the CLI's real parsers: the subcommand and action exist, every
option is one of that command's, a positional is only given where the command takes one; then
its ``--help`` runs. Before, fixes said ``ascend-deploy compat --check`` (no such option) and
``ascend-deploy plan MODEL_DIR`` (plan takes no positional).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from ascend_deploy.cli import COMMANDS, build_parser, main

CODE = sorted((REPO / "src" / "ascend_deploy").rglob("*.py"))
DATA = sorted((REPO / "src" / "ascend_deploy" / "data").glob("*.json"))
YAML = sorted(
    p
    for part in ("roles", "playbooks", "inventory/production.example")
    for p in (REPO / part).rglob("*.yml")
)
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
DOCS += sorted((REPO / "roles").glob("*/README.md"))
MENTION = re.compile(r"ascend-deploy ([^\n]*)")
JINJA = re.compile(r"\{\{.*?\}\}|\{[^{}]*\}")
# Words after "ascend-deploy " that name no command: an author, the converter's manifest kinds,
# the CLI's own error prefix (its subcommand is a placeholder), the usage line's COMMAND, prose
# ("the ascend-deploy CLI", "the ascend-deploy wheel").
NOT_COMMANDS = {"maintainers", "fp8-to-bf16", "fp8-to-fp16", "X", "X:", "COMMAND", "CLI", "wheel"}
STOP = re.compile(r"[`'\"(),;|\]]|\s-\s|\s->\s")


def _literals(path: Path) -> list[str]:
    """String constants and f-strings of a module, docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                out.append(node.value)
        elif isinstance(node, ast.JoinedStr):
            out.append(
                "".join(v.value if isinstance(v, ast.Constant) else "{X}" for v in node.values)
            )
    return out


def _strings(doc: object) -> list[str]:
    if isinstance(doc, str):
        return [doc]
    if isinstance(doc, dict):
        return [s for v in doc.values() for s in _strings(v)]
    if isinstance(doc, list):
        return [s for v in doc for s in _strings(v)]
    return []


def _texts() -> list[tuple[str, str]]:
    out = [(str(p.relative_to(REPO)), s) for p in CODE for s in _literals(p)]
    for p in DATA:
        out += [(str(p.relative_to(REPO)), s) for s in _strings(json.loads(p.read_text()))]
    for p in YAML:
        for doc in yaml.safe_load_all(p.read_text()):
            out += [(str(p.relative_to(REPO)), s) for s in _strings(doc)]
        # commented instructions (the example inventory's header, vault.yml) count too
        out += [(str(p.relative_to(REPO)), line) for line in p.read_text().splitlines()]
    for p in DOCS:
        out += [(str(p.relative_to(REPO)), line) for line in p.read_text().splitlines()]
    return out


def suggestions() -> list[tuple[str, str]]:
    found = set()
    for where, text in _texts():
        for match in MENTION.finditer(JINJA.sub("X", text)):
            argv = STOP.split(match.group(1), 1)[0].split()
            # "ascend-deploy diagnose: ..." is a message's prefix, not a suggestion
            if argv and argv[0] not in NOT_COMMANDS and not argv[0].endswith(":"):
                found.add((where, " ".join(argv)))
    return sorted(found)


def _looks_like_argument(token: str) -> bool:
    return token in ("X", "-") or bool(re.search(r"[/.{}=0-9]|^[A-Z][A-Z_]+$", token))


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def check_argv(argv: list[str]) -> tuple[list[str], str | None]:
    """(the command path to run --help on, the problem or None) for one suggestion."""
    name = argv[0]
    if name not in COMMANDS:
        return [], f"no command {name!r} (commands: {', '.join(COMMANDS)})"
    parser = _subparsers(build_parser(name)).choices[name]  # type: ignore[union-attr]
    path, rest = [name], argv[1:]
    actions = _subparsers(parser)
    if actions is not None:
        if not rest or rest[0] not in actions.choices:
            return path, f"{name} needs an action: {', '.join(actions.choices)}"
        parser = actions.choices[rest[0]]
        path.append(rest.pop(0))
    options = {s: a for a in parser._actions for s in a.option_strings}
    positionals = [a for a in parser._actions if not a.option_strings]
    room = sum(99 if a.nargs in ("*", "+") else 1 for a in positionals)
    while rest:
        token = rest.pop(0)
        if token.startswith("--"):
            flag, _, value = token.partition("=")
            if flag not in options:
                return path, f"{' '.join(path)} has no option {flag}"
            takes = options[flag].nargs != 0 and not isinstance(
                options[flag], (argparse._StoreTrueAction, argparse._HelpAction)
            )
            if takes and not value and rest:
                rest.pop(0)
        elif _looks_like_argument(token):
            if room == 0:
                return path, f"{' '.join(path)} takes no (further) positional, got {token!r}"
            room -= 1
        else:
            break  # prose after the command
    return path, None


SUGGESTED = suggestions()


def test_the_scan_finds_the_suggestions_it_should():
    commands = {s.split()[0] for _, s in SUGGESTED}
    assert {"compat", "plan", "procs", "diagnose", "verify", "manifest", "convert"} <= commands


@pytest.mark.parametrize(("where", "suggested"), SUGGESTED, ids=[f"{w}: {s}" for w, s in SUGGESTED])
def test_every_suggested_command_exists(where, suggested, capsys):
    path, problem = check_argv(suggested.split())
    assert problem is None, f"{where} suggests `ascend-deploy {suggested}`: {problem}"
    with pytest.raises(SystemExit) as done:
        main([*path, "--help"])
    assert done.value.code == 0
    capsys.readouterr()


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        ("compat --check", "compat needs an action"),
        ("plan MODEL_DIR", "plan takes no (further) positional, got 'MODEL_DIR'"),
        ("compat", "compat needs an action"),
        ("plan --model-dir X --bogus", "plan has no option --bogus"),
        ("frobnicate", "no command 'frobnicate'"),
    ],
)
def test_the_check_refuses_what_the_review_found(argv, problem):
    assert problem in (check_argv(argv.split())[1] or "")
