"""The packages' import graph has no cycle, and the deployment tool never imports the simulator.

Static: every ``import`` and ``from ... import`` of every module under src/ascend_deploy and
src/ascend_sim (function-level ones too) is resolved to a module of these packages with ``ast``;
a cycle is reported as the chain of modules that closes it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO, import_statements

SRC = REPO / "src"
PACKAGES = ("ascend_deploy", "ascend_sim")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``path`` (module ``name``) imports."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for _, base, names in import_statements(tree, name, path.name == "__init__.py"):
        if base:
            # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod
            targets = [f"{base}.{a}" if f"{base}.{a}" in known else base for a in names]
        else:
            targets = names
        for target in targets:
            # `import a.b.c` of a name that is not a module: its nearest enclosing module
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    files = {module_name(p, root): p for pkg in packages for p in (root / pkg).rglob("*.py")}
    known = set(files)
    return {name: imports_of(path, name, known) for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None when the graph is acyclic."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_packages_have_no_import_cycle():
    graph = import_graph(SRC, PACKAGES)
    assert len(graph) > 100  # every module was read
    assert "ascend_sim.vllm_emulator.startup" in graph["ascend_sim.vllm_emulator.cli"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_deployment_tool_never_imports_the_simulator():
    graph = import_graph(SRC, PACKAGES)
    wrong = {
        (mod, dep)
        for mod, deps in graph.items()
        if mod.startswith("ascend_deploy")
        for dep in deps
        if dep.startswith("ascend_sim")
    }
    assert not wrong, f"ascend_deploy imports the simulator (not in the wheel): {sorted(wrong)}"


def test_a_cycle_through_a_function_level_relative_import_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("import os\nfrom ..c import helper\n")
    (pkg / "c.py").write_text("def helper():\n    from pkg import a\n    return a\n")
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.c"}
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]
    (pkg / "c.py").write_text("def helper():\n    return 1\n")
    assert find_cycle(import_graph(tmp_path, ("pkg",))) is None
