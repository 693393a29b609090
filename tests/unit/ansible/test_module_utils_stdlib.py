"""The library code Ansible ships to a target with the modules is standard-library only
(apart from optional extras imported inside the function that needs them).

Static: from every ``...module_utils.ascend_deploy...`` import of plugins/modules/*.py, follow
the imports (function-level ones too, and the packages' ``__init__`` files) through
src/ascend_deploy with ``ast``; every other import must name a module of the Python standard
library.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from conftest import REPO, import_statements

SRC = REPO / "src"
PREFIX = "ansible_collections.ascend_vllm.serving.plugins.module_utils."
STDLIB = set(sys.stdlib_module_names) | {"__future__"}
# Optional extras, imported inside the one function that needs them, which says what to install
# (FP8 conversion: numpy, ml_dtypes; a verification suite not written as JSON: PyYAML) or skips
# its check (the CPU precision reference: torch, transformers).
EXTRAS = {"numpy", "ml_dtypes", "yaml", "torch", "transformers"}


def source_of(module: str) -> Path | None:
    """The file of an ascend_deploy module or package, or None when it is a name, not a module."""
    base = SRC.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def lazy_imports(tree: ast.AST) -> set[int]:
    """Imports inside functions: they run only when that function is called."""
    return {
        id(n)
        for fn in ast.walk(tree)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        for n in ast.walk(fn)
        if isinstance(n, (ast.Import, ast.ImportFrom))
    }


def imports(path: Path, module: str) -> tuple[set[str], set[str]]:
    """(ascend_deploy modules, other top-level names) that the file imports."""
    ours: set[str] = set()
    other: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    lazy = lazy_imports(tree)
    for node, base, names in import_statements(tree, module, path.name == "__init__.py"):
        if base:  # from base import a, b: a and b may be modules of base
            names = [f"{base}.{name}" for name in names] + [base]
        for name in names:
            if name.startswith(PREFIX + "ascend_deploy"):
                name = name.removeprefix(PREFIX)
            top = name.split(".")[0]
            if top == "ascend_deploy":
                ours.add(name)
            elif top == "ansible":  # the module side (AnsibleModule) is Ansible's own
                continue
            elif not (id(node) in lazy and top in EXTRAS):
                other.add(top)
    return ours, other


def shipped(entry: Path) -> dict[str, set[str]]:
    """ascend_deploy module -> the non-ascend_deploy names it imports, for everything ``entry``
    (a module in plugins/modules/) loads."""
    todo, _ = imports(entry, "library_module")
    seen: dict[str, set[str]] = {}
    while todo:
        name = todo.pop()
        parts = name.split(".")
        # importing a.b.c runs a/__init__, a/b/__init__ too
        for i in range(1, len(parts) + 1):
            module = ".".join(parts[:i])
            path = source_of(module)
            if path is None or module in seen:
                continue
            ours, other = imports(path, module)
            seen[module] = other
            todo |= ours - set(seen)
    return seen


def test_every_module_ships_only_standard_library_code():
    modules = sorted((REPO / "plugins" / "modules").glob("*.py"))
    assert modules
    reached: set[str] = set()
    for entry in modules:
        _, direct = imports(entry, "library_module")
        assert direct <= STDLIB, f"{entry.name} imports {sorted(direct - STDLIB)}"
        for module, names in shipped(entry).items():
            reached.add(module)
            assert names <= STDLIB, f"{entry.name} ships {module}, which imports {names - STDLIB}"
    for module in (
        "ascend_deploy.reporting.tables",
        "ascend_deploy.model.checksums",
        "ascend_deploy.verification.health_wait",
        "ascend_deploy.diagnosis.engine",
        "ascend_deploy.host.service_holders",
        "ascend_deploy.diagnosis.report",
    ):
        assert module in reached


def test_the_check_sees_a_third_party_import_in_a_shipped_function(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        f"from {PREFIX}ascend_deploy.errors import InputError\n"
        "import numpy\n"
        "def f():\n"
        "    import requests, torch\n"
        "    from .x import y\n"
    )
    ours, other = imports(module, "ascend_deploy.pkg.m")
    assert other == {"requests", "numpy"}  # torch is an extra imported when f() needs it
    assert {"ascend_deploy.errors", "ascend_deploy.pkg.x"} <= ours
