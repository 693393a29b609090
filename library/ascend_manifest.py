#!/usr/bin/python
"""Ansible module: verify a model directory against a sha256 manifest (SHA256SUMS format)."""

# ruff: noqa: E402  (Ansible modules put DOCUMENTATION before the imports)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_manifest
short_description: Verify model files against a sha256 manifest
description:
  - The manifest has one C(<sha256>  <relative path>) line per file (the output of
    C(sha256sum) run inside the model directory; C(*) binary markers are accepted).
  - Files whose size and mtime match an earlier successful verification (recorded in
    C(<dir>/.ascend-deploy-verified.json)) are not hashed again, so a second deploy run is fast.
  - Read-only apart from that record; supports check mode (nothing is written then).
options:
  path:
    description: Model directory.
    type: path
    required: true
  manifest:
    description: Manifest file; relative paths are taken inside C(path).
    type: path
    default: SHA256SUMS
  use_cache:
    description: Trust the record of an earlier verification for unchanged files.
    type: bool
    default: true
  list_only:
    description: Only parse the manifest and return C(entries) (for downloads); hash nothing.
    type: bool
    default: false
author: ascend-deploy
"""

EXAMPLES = r"""
- name: Verify weights
  ascend_manifest:
    path: /srv/models/qwen3-4b-fp8
"""

RETURN = r"""
files:
  description: Number of files in the manifest.
  returned: always
  type: int
hashed:
  description: Files hashed in this run (the rest matched the record).
  returned: always
  type: int
bytes:
  description: Total size of the files in the manifest.
  returned: unless list_only
  type: int
entries:
  description: Relative path -> sha256 from the manifest.
  returned: with list_only
  type: dict
"""

import hashlib
import json
import os
import re

from ansible.module_utils.basic import AnsibleModule

RECORD = ".ascend-deploy-verified.json"
LINE = re.compile(r"^([0-9a-fA-F]{64}) [ *](.+)$")


def parse_manifest(path: str) -> dict[str, str]:
    """Map relative path -> sha256; raise ValueError naming the line on garbage."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise ValueError(
            f"manifest {path} not found; create it in the model directory with "
            "'sha256sum * > SHA256SUMS' (or set model_weights_manifest)"
        ) from None
    except OSError as exc:
        raise ValueError(f"manifest {path}: cannot read: {exc.strerror}") from None
    try:
        if b"\x00" in raw:
            raise UnicodeDecodeError("utf-8", raw, 0, 1, "NUL byte")
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"manifest {path} is not text (binary content); regenerate it") from None
    entries: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        match = LINE.match(line.strip())
        if not match:
            raise ValueError(
                f"manifest {path} line {number} is not '<sha256>  <file>': {line[:60]!r}; "
                "regenerate it with sha256sum"
            )
        rel = os.path.normpath(match.group(2))
        if rel.startswith("..") or os.path.isabs(rel):
            raise ValueError(f"manifest {path} line {number}: path {rel!r} leaves the directory")
        entries[rel] = match.group(1).lower()
    if not entries:
        raise ValueError(f"manifest {path} is empty; regenerate it with sha256sum")
    return entries


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(root: str, manifest: str, use_cache: bool) -> tuple[dict, list[str], int, int]:
    """Return (new record, problems, hashed, bytes)."""
    entries = parse_manifest(manifest)
    record: dict = {}
    record_path = os.path.join(root, RECORD)
    if use_cache:
        try:
            with open(record_path, encoding="utf-8") as fh:
                record = json.load(fh)
        except (OSError, ValueError):
            record = {}
    new_record: dict = {}
    problems: list[str] = []
    hashed = total = 0
    for rel, want in sorted(entries.items()):
        full = os.path.join(root, rel)
        try:
            st = os.stat(full)
        except FileNotFoundError:
            problems.append(f"{full}: missing")
            continue
        total += st.st_size
        stamp = [want, st.st_size, st.st_mtime_ns]
        if use_cache and record.get(rel) == stamp:
            new_record[rel] = stamp
            continue
        got = sha256_file(full)
        hashed += 1
        if got != want:
            problems.append(f"{full}: sha256 {got[:16]}... != manifest {want[:16]}...")
        else:
            new_record[rel] = stamp
    return new_record, problems, hashed, total


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "manifest": {"type": "path", "default": "SHA256SUMS"},
            "use_cache": {"type": "bool", "default": True},
            "list_only": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    root = module.params["path"]
    manifest = module.params["manifest"]
    if not os.path.isabs(manifest):
        manifest = os.path.join(root, manifest)
    if module.params["list_only"]:
        try:
            entries = parse_manifest(manifest)
        except ValueError as exc:
            module.fail_json(msg=str(exc))
        module.exit_json(changed=False, entries=entries, files=len(entries))
    if not os.path.isdir(root):
        module.fail_json(msg=f"model directory {root} does not exist; stage the weights first")
    try:
        record, problems, hashed, total = verify(root, manifest, module.params["use_cache"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    if problems:
        module.fail_json(
            msg=f"{len(problems)} file(s) in {root} do not match {manifest}: "
            + "; ".join(problems[:5])
            + ". Fix: re-stage the model (delete the bad files and re-run) or fix the manifest",
            problems=problems,
        )
    if hashed and not module.check_mode:
        try:
            with open(os.path.join(root, RECORD), "w", encoding="utf-8") as fh:
                json.dump(record, fh, sort_keys=True)
        except OSError:
            module.warn(f"could not record the verification in {root}; next run hashes again")
    module.exit_json(changed=False, files=len(record), hashed=hashed, bytes=total)


if __name__ == "__main__":
    main()
