"""Print how to call the service `make demo` deployed, as commands that work when pasted.

The inventory is read through ``ansible-inventory --list`` (Ansible's own merge of hosts.yml,
groups.yml and group_vars: a host listed in several groups keeps all of its variables). For
every host with a published API port (``sim_published_ports``, written by
``python -m ascend_sim.fleet up``) it prints a curl call with the key, ``ascend-deploy verify``
and the official openai client, each against 127.0.0.1 and the published port.

    python tools/demo_usage.py [--inventory inventory/sim]
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def hostvars(inventory: Path) -> dict[str, dict]:
    """Every host's variables as Ansible resolves them (group_vars included)."""
    tool = BIN / "ansible-inventory"
    done = subprocess.run(
        [str(tool if tool.exists() else "ansible-inventory"), "-i", str(inventory), "--list"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        env={"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "PATH": str(BIN) + ":/usr/bin:/bin"},
    )
    if done.returncode:
        raise SystemExit(f"demo_usage: ansible-inventory -i {inventory} failed: {done.stderr}")
    return json.loads(done.stdout).get("_meta", {}).get("hostvars", {})


def commands(name: str, hv: dict) -> list[str]:
    """What to paste for one simulated host (empty when its API port is not published)."""
    port = int(hv.get("vllm_service_port", 8000))
    published = {int(k): int(v) for k, v in (hv.get("sim_published_ports") or {}).items()}
    if port not in published:
        return []
    key = str(hv.get("vllm_service_api_key", ""))
    model = str(hv.get("vllm_service_served_model_name") or hv.get("vllm_service_name", ""))
    base = f"http://127.0.0.1:{published[port]}"
    body = json.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": "What is the capital of France?"}],
            "max_tokens": 64,
            # Qwen3 thinks first unless told not to (vLLM passes these to the chat template)
            "chat_template_kwargs": {"enable_thinking": False},
        }
    )
    q = json.dumps  # double-quoted Python literals: the shell line needs no escapes
    client = (
        "import openai; "
        f"c = openai.OpenAI(base_url={q(base + '/v1')}, api_key={q(key)}); "
        f"r = c.chat.completions.create(model={q(model)}, messages=[{{"
        '"role": "user", "content": "What is the capital of France?"}], max_tokens=64, '
        'extra_body={"chat_template_kwargs": {"enable_thinking": False}}); '
        "print(r.choices[0].message.content)"
    )
    lines = [
        f"# {name}: replica 0 (port {port} on the host) is {base}; the API needs its key",
        f"curl -s -H {shlex.quote('Authorization: Bearer ' + key)} {base}/v1/models",
        f"curl -s -H {shlex.quote('Authorization: Bearer ' + key)} "
        f"-H 'Content-Type: application/json' -d {shlex.quote(body)} {base}/v1/chat/completions",
        f"VLLM_API_KEY={shlex.quote(key)} .venv/bin/ascend-deploy verify --url {base}",
        f".venv/bin/python -c {shlex.quote(client)}",
    ]
    others = [f"{p} -> {published[p]}" for p in sorted(published) if p != port]
    if others:
        lines.append(f"# the other replicas' ports on 127.0.0.1: {', '.join(others)}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inventory", type=Path, default=REPO / "inventory" / "sim")
    args = parser.parse_args()
    printed = False
    for name, hv in sorted(hostvars(args.inventory).items()):
        lines = commands(name, hv)
        if lines:
            print("\n".join(lines))
            printed = True
    if not printed:
        print(
            f"demo_usage: no host of {args.inventory} publishes its API port "
            "(sim_published_ports); was `make demo` run?",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
