"""Build a fake host root from a layout in this directory (see README.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parent / "samples"


def sample_body(name: str) -> str:
    """A sample's text without its ``# source:`` header line."""
    text = (SAMPLES / name).read_text(encoding="utf-8")
    first, _, rest = text.partition("\n")
    assert first.startswith("# source:"), name
    return rest


def build(layout: str, root: Path) -> Path:
    spec = json.loads((HERE / f"{layout}.json").read_text(encoding="utf-8"))
    for rel, source in spec.get("files", {}).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        body = sample_body(source["sample"]) if "sample" in source else source["text"]
        path.write_text(body, encoding="utf-8")
    for rel in spec.get("dirs", []):
        (root / rel).mkdir(parents=True, exist_ok=True)
    for rel, target in spec.get("links", {}).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, path)
    for rel in spec.get("devices", []):
        path = root / "dev" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    return root
