"""Roles talk through their result facts only (issue 14 §3).

A static check over every Jinja expression of roles/ and the playbooks (deploy.yml, playbooks/,
playbooks/tasks/): a role reads no variable of another role except that role's ``<role>_result``;
its defaults may also default an input to another role's input (the same setting, given once,
such as ``ascend_runtime_hardware``). Playbooks wire roles together: they may read roles' inputs
(argument specs) and result facts, never a fact a role sets for itself (``vllm_service_plan``).
Names inside string literals of a role (fix messages name other roles' inputs) may be inputs or
results too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import REPO

ROLES_DIR = REPO / "roles"
ROLES = sorted(p.name for p in ROLES_DIR.iterdir() if (p / "meta" / "argument_specs.yml").is_file())
PLAYBOOKS = [
    REPO / "deploy.yml",
    *sorted((REPO / "playbooks").glob("*.yml")),
    *sorted((REPO / "playbooks" / "tasks").glob("*.yml")),
]
# Keys whose whole value is a Jinja expression without braces.
BARE = {"when", "that", "changed_when", "failed_when", "until"}
JINJA = re.compile(r"\{\{(.*?)\}\}|\{%(.*?)%\}", re.S)
COMMENT = re.compile(r"\{#.*?#\}", re.S)
LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
NAME = re.compile(r"(?<![\w])_*([a-z][a-z0-9_]*)")


def inputs(role: str) -> set[str]:
    """Every option of every entry point of the role's argument specs."""
    specs = yaml.safe_load((ROLES_DIR / role / "meta" / "argument_specs.yml").read_text())
    return {
        name for entry in specs["argument_specs"].values() for name in (entry.get("options") or {})
    }


INPUTS = {role: inputs(role) for role in ROLES}


def owner(name: str) -> str | None:
    """The role whose prefix ``name`` carries (the longest match)."""
    found = [r for r in ROLES if name.startswith(f"{r}_")]
    return max(found, key=len) if found else None


def expressions(node: object, key: str = "") -> Iterator[str]:
    """The Jinja expressions of a loaded YAML document."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from expressions(v, str(k))
    elif isinstance(node, list):
        for v in node:
            yield from expressions(v, key)
    elif isinstance(node, str):
        if key in BARE and "{{" not in node:
            yield node
        else:
            yield from template_expressions(node)
    elif isinstance(node, bool) or node is None:
        return


def template_expressions(text: str) -> Iterator[str]:
    for match in JINJA.finditer(COMMENT.sub("", text)):
        yield match.group(1) if match.group(1) is not None else match.group(2)


def variables(code: str) -> set[str]:
    """Variable names of an expression: bare names and attributes of hostvars (``hostvars[h].x``,
    ``hv.x``); other attributes (``item.name``, ``a.ascend_runtime_dir``) are keys."""
    out = set()
    for m in NAME.finditer(code):
        before = code[: m.start()].rstrip()
        if before.endswith(".") and not re.search(r"(\]|\bhv)\s*\.$", before):
            continue
        out.add(m.group(1))
    return out


def names(expr: str) -> tuple[set[str], set[str]]:
    """Variable names outside string literals, and the names inside them."""
    literals = " ".join(m.group(0)[1:-1] for m in LITERAL.finditer(expr))
    code = LITERAL.sub("''", expr)
    return variables(code), set(NAME.findall(literals))


def file_expressions(path: Path) -> list[str]:
    text = path.read_text()
    if path.suffix == ".j2":
        return list(template_expressions(text))
    return [e for doc in yaml.safe_load_all(text) for e in expressions(doc)]


def bad_names(path: Path, role: str | None) -> list[str]:
    """Variables of other roles that ``path`` (of ``role``; None: a playbook) may not read."""
    in_defaults = role is not None and path.parts[-2:] == ("defaults", "main.yml")
    out = set()
    for expr in file_expressions(path):
        code, literal = names(expr)
        for name, quoted in [(n, False) for n in code] + [(n, True) for n in literal]:
            other = owner(name)
            if other is None or other == role or name == f"{other}_result":
                continue
            if (role is None or quoted or in_defaults) and name in INPUTS[other]:
                continue
            out.add(name)
    return sorted(out)


def violations(path: Path, role: str | None) -> list[str]:
    return [f"{path.relative_to(REPO)}: {name}" for name in bad_names(path, role)]


def role_files(role: str) -> list[Path]:
    base = ROLES_DIR / role
    return sorted(
        p
        for sub in ("tasks", "handlers", "vars", "defaults", "templates")
        for p in (base / sub).rglob("*")
        if p.suffix in (".yml", ".yaml", ".j2")
    )


@pytest.mark.parametrize("role", ROLES)
def test_a_role_reads_only_the_result_facts_of_other_roles(role):
    found = [v for path in role_files(role) for v in violations(path, role)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("playbook", PLAYBOOKS, ids=lambda p: str(p.relative_to(REPO)))
def test_a_playbook_reads_roles_inputs_and_result_facts_only(playbook):
    found = violations(playbook, None)
    assert not found, "\n".join(found)


def test_the_check_finds_a_read_of_another_roles_fact(tmp_path):
    tasks = tmp_path / "roles" / "deploy_verify" / "tasks"
    tasks.mkdir(parents=True)
    bad = tasks / "main.yml"
    bad.write_text(
        "- name: Reads vllm_service's internal facts\n"
        "  ansible.builtin.debug:\n"
        '    msg: "{{ vllm_service_plan.tp }} {{ hostvars[h].vllm_service_replicas | length }}"\n'
        "  when: vllm_service_selected_npus | length > 0 and vllm_service_result.tp is defined\n"
    )
    found = bad_names(bad, "deploy_verify")
    assert found == ["vllm_service_plan", "vllm_service_replicas", "vllm_service_selected_npus"]


def test_the_check_allows_results_and_inputs_where_the_rules_say(tmp_path):
    defaults = tmp_path / "roles" / "model_weights" / "defaults" / "main.yml"
    defaults.parent.mkdir(parents=True)
    defaults.write_text(
        "model_weights_hardware: \"{{ ascend_runtime_hardware | default('a2') }}\"\n"
        'model_weights_image: "{{ (ascend_runtime_result | default({})).image }}"\n'
    )
    assert bad_names(defaults, "model_weights") == []
    tasks = defaults.parent.parent / "tasks" / "main.yml"
    tasks.parent.mkdir()
    # An input of another role read by a task is not allowed; named in a message it is.
    tasks.write_text(
        "- name: x\n"
        "  ansible.builtin.debug:\n"
        "    msg: \"{{ 'set ascend_runtime_mode: host' }} {{ ascend_runtime_mode }}\"\n"
    )
    assert bad_names(tasks, "model_weights") == ["ascend_runtime_mode"]


def test_the_configuration_directory_is_one_variable():
    """/etc/ascend-deploy is written out only as the default of ascend_deploy_config_dir, in the
    defaults of the roles that keep state there; tasks, templates and playbooks use the variable."""
    files = [p for role in ROLES for p in role_files(role)] + PLAYBOOKS
    found = {
        f"{path.relative_to(REPO)}:{n}": line.strip()
        for path in files
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "/etc/ascend-deploy" in line
    }
    fallback = "{{ ascend_deploy_config_dir | default('/etc/ascend-deploy') }}"
    assert all(
        fallback in line and "/defaults/main.yml:" in where for where, line in found.items()
    ), found
    assert sorted(where.split("/")[1] for where in found) == ["ascend_runtime", "vllm_service"]
