"""Action plugin: every role variable set for a host checked against its role's argument spec.

Runs on the controller (no module, nothing on the host). For each role of ``roles`` it reads
``roles/<role>/meta/argument_specs.yml`` and the ``meta/value_bounds.yml`` sidecar, takes the
role's variables this host has (inventory, play vars, -e; not the role defaults), renders each
once and hands them to ``ascend_deploy.host.role_vars.check_values`` (the one copy of the rule).
A value that is not a valid template (a key holding ``{{`` given in a plain file or with -e) is
refused naming the variable; vaulted and ``!unsafe`` values are data and never rendered. A value
that needs a variable this play does not know yet (a fact gathered later) is left to the role's
own argument spec check and listed in ``deferred``.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from ansible.errors import AnsibleTemplateError, AnsibleUndefinedVariable
from ansible.plugins.action import ActionBase
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.errors import (
    AscendDeployError,
)
from ansible_collections.ascend_vllm.serving.plugins.module_utils.ascend_deploy.host import (
    role_vars,
)

ROLES = Path(__file__).resolve().parents[2] / "roles"
FIX_HINT = " (the role's variables: roles/{role}/README.md, docs/reference/variables.md)"
TEMPLATE_FIX = (
    "{name} holds '{{{{' or '{{%' and is read as a template, which it is not ({error}). Fix: if it"
    " is data (a key), vault it (ansible-vault encrypt_string --name {name} VALUE: vaulted values"
    " are never rendered) or write it as !unsafe in a vars file; if it is a template, correct it"
)


def _load(path: Path) -> dict:
    if not path.is_file():
        return {}
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


def role_spec(role: str, entry_point: str = "main") -> tuple[dict, dict]:
    """(options, bounds) of ``role``'s entry point; the sidecar checked against the spec."""
    specs = _load(ROLES / role / "meta" / "argument_specs.yml").get("argument_specs", {})
    options = (specs.get(entry_point) or {}).get("options") or {}
    bounds = _load(ROLES / role / "meta" / "value_bounds.yml")
    role_vars.check_bounds(options, bounds, f"roles/{role}/meta/value_bounds.yml")
    return options, bounds


class ActionModule(ActionBase):
    """Fail the host, naming every variable whose value its role's spec refuses."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"roles"})

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        roles = self._task.args.get("roles") or []
        templar = self._templar.copy_with_new_env(available_variables=task_vars)
        problems: list[str] = []
        deferred: list[str] = []
        checked = 0
        for role in roles:
            try:
                options, bounds = role_spec(str(role))
            except AscendDeployError as exc:
                return {**result, "failed": True, "msg": str(exc)}
            values = {}
            for name in options:
                if name not in task_vars:
                    continue
                try:
                    values[name] = templar.template(task_vars[name])
                except AnsibleUndefinedVariable:
                    deferred.append(name)
                except AnsibleTemplateError as exc:
                    error = str(exc.message).splitlines()[0] if exc.message else type(exc).__name__
                    problems.append(TEMPLATE_FIX.format(name=name, error=error))
            checked += len(values)
            problems += role_vars.check_values(options, bounds, values, FIX_HINT.format(role=role))
        host = task_vars.get("inventory_hostname", "?")
        result.update(changed=False, checked=checked, deferred=sorted(set(deferred)))
        if problems:
            result["failed"] = True
            result["problems"] = problems
            result["msg"] = f"{host}: " + f"; {host}: ".join(problems)
        return result
