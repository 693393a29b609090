"""Build the ascend_vllm.serving collection tarball (``make collection``).

The checkout holds one copy of the library, ``src/ascend_deploy``; in the checkout
``plugins/module_utils/ascend_deploy`` is a link to it. ``ansible-galaxy collection build`` keeps
links as links, so this script stages the collection's own files in a temporary directory with
the package copied in place of the link, then builds from there. The tarball holds no links and
nothing outside the collection (no src/, tests/, molecule/).

    python tools/build_collection.py [--output-path DIR]    # prints the tarball's path
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# What the collection is, relative to the checkout (galaxy.yml's build_ignore covers the rest).
PARTS = [
    "galaxy.yml",
    "LICENSE",
    "CHANGELOG.md",
    "requirements.yml",
    "meta",
    "roles",
    "playbooks",
    "plugins/modules",
    "plugins/action",
    "plugins/doc_fragments",
    "docs",
    "inventory/production.example",
]
PACKAGE = "plugins/module_utils/ascend_deploy"
# The collection's own README (galaxy.yml: readme): what an installed copy holds and how to use
# it, staged as README.md; the checkout's README.md is about the whole bundle.
COLLECTION_README = "docs/collection.md"
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "sim_model.yml")


def stage(dest: Path) -> None:
    """Copy the collection's files into ``dest``, the package itself in place of its link."""
    for part in PARTS:
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, dest / part, ignore=SKIP, symlinks=False)
        elif src.is_file():
            (dest / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / part)
        else:
            raise SystemExit(f"build_collection: {src} is missing; run from a complete checkout")
    shutil.copytree(REPO / "src" / "ascend_deploy", dest / PACKAGE, ignore=SKIP)
    shutil.copy2(REPO / COLLECTION_README, dest / "README.md")


def build(output: Path) -> Path:
    galaxy = Path(sys.executable).with_name("ansible-galaxy")
    cmd = [str(galaxy) if galaxy.exists() else "ansible-galaxy", "collection", "build"]
    output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="collection-") as tmp:
        root = Path(tmp) / "collection"
        stage(root)
        done = subprocess.run(
            [*cmd, str(root), "--output-path", str(output), "--force"],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode:
        raise SystemExit(f"build_collection: ansible-galaxy failed:\n{done.stdout}{done.stderr}")
    (tarball,) = (line.rsplit(" at ", 1)[1] for line in done.stdout.splitlines() if " at " in line)
    return Path(tarball.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-path", type=Path, default=REPO / "dist")
    print(build(parser.parse_args().output_path))


if __name__ == "__main__":
    main()
