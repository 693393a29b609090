"""Print how to call the service `make demo` deployed: published port and API key.

Reads inventory/sim/hosts.yml (written by ``ascend_sim.fleet up``) and the key from
inventory/sim/group_vars/all/service.yml.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def _hosts(group: dict) -> dict:
    found = dict(group.get("hosts") or {})
    for child in (group.get("children") or {}).values():
        found.update(_hosts(child or {}))
    return found


def main() -> int:
    service = yaml.safe_load((REPO / "inventory/sim/group_vars/all/service.yml").read_text())
    key, port = service["vllm_service_api_key"], int(service.get("vllm_service_port", 8000))
    inventory = yaml.safe_load((REPO / "inventory/sim/hosts.yml").read_text()) or {}
    for name, host in sorted(_hosts(inventory.get("all") or {}).items()):
        published = (host or {}).get("sim_published_ports") or {}
        if port in published:
            base = f"http://127.0.0.1:{published[port]}"
            print(f"{name}: the API needs its key (inventory/sim: vllm_service_api_key). Try:")
            print(f"  curl -s -H 'Authorization: Bearer {key}' {base}/v1/models")
            print(f"  VLLM_API_KEY={key} .venv/bin/ascend-deploy verify --url {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
