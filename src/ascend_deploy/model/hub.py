"""A model as a hub download left it, and the ``SHA256SUMS`` manifest the bundle checks.

Hub downloads come without ``SHA256SUMS``. Three layouts are recognised (docs/sources.md):

* **Hugging Face cache** (``huggingface-cli download ORG/NAME``, ``HF_HUB_OFFLINE`` use):
  ``models--ORG--NAME/`` with ``refs/<branch>`` (the commit), ``snapshots/<commit>/`` (links)
  and ``blobs/``. A blob is named by the file's sha256 for LFS files (the weights) and by its
  git blob id (sha1) for the others. Either the repository directory or a snapshot directory
  may be given; the repository resolves to ``refs/main``'s snapshot.
* **Hugging Face local directory** (``huggingface-cli download ... --local-dir DIR``):
  ``DIR/.cache/huggingface/download/<file>.metadata`` holds the commit, the etag (sha256 for
  LFS files, the git blob id otherwise) and the time it was valid; a file changed after that
  time is hashed instead, as huggingface_hub itself does.
* **ModelScope** (``modelscope download``): ``.msc`` / ``.mdl`` / ``.mv`` files beside the model
  (a pickle of paths and revisions, which is never loaded: it holds no checksum).

Each file's sha256 comes from the hub's metadata where it is on disk, else it is computed
here; a file whose git blob id is known is checked against it while hashing. Hub metadata
files are not part of the model. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import CheckFailed, InputError
from .checksums import BLOCK, RECORD

MANIFEST = "SHA256SUMS"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_SHA1 = re.compile(r"^[0-9a-f]{40}$")
_MODELSCOPE_META = (".msc", ".mdl", ".mv", "._____temp")
# Never part of a model: the manifest itself, the verification record, hub bookkeeping.
_NOT_MODEL = {MANIFEST, RECORD, ".gitattributes.lock"}


@dataclass
class ModelSource:
    """Where a model's files are and how they got there."""

    given: str
    dir: str  # the directory holding the model's files (a snapshot for the HF cache)
    layout: str  # plain | huggingface-cache | huggingface-local-dir | modelscope
    revision: str | None = None
    hub: dict[str, tuple[str, str]] = field(default_factory=dict)  # rel -> (kind, digest)

    def describe(self) -> str:
        rev = f" at {self.revision[:12]}" if self.revision else ""
        names = {
            "plain": "a plain directory",
            "huggingface-cache": "a Hugging Face cache snapshot",
            "huggingface-local-dir": "a Hugging Face --local-dir download",
            "modelscope": "a ModelScope download",
        }
        return f"{self.dir} ({names[self.layout]}{rev})"


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _hf_repo(path: str) -> str | None:
    """The ``models--ORG--NAME`` directory ``path`` is (or a snapshot of), or None."""
    path = os.path.abspath(path)
    for candidate in (path, os.path.dirname(os.path.dirname(path))):
        base = os.path.basename(candidate)
        if base.startswith(("models--", "datasets--")) and os.path.isdir(
            os.path.join(candidate, "snapshots")
        ):
            return candidate
    return None


def _snapshot_of(repo: str, given: str) -> tuple[str, str]:
    """The snapshot directory and commit to use for the HF cache repository ``repo``."""
    snapshots = os.path.join(repo, "snapshots")
    if os.path.dirname(os.path.abspath(given)) == snapshots:
        return os.path.abspath(given), os.path.basename(os.path.abspath(given))
    commit = _read_text(os.path.join(repo, "refs", "main"))
    present = sorted(os.listdir(snapshots))
    if commit and commit in present:
        return os.path.join(snapshots, commit), commit
    if len(present) == 1:
        return os.path.join(snapshots, present[0]), present[0]
    raise InputError(
        f"{repo}: a Hugging Face cache with {len(present)} snapshots and no usable refs/main; "
        f"pass the snapshot directory itself ({os.path.join(snapshots, '<commit>')}; "
        f"present: {', '.join(present) or 'none'})"
    )


def resolve(path: str) -> ModelSource:
    """Recognise the layout of the model directory ``path`` (see the module docstring)."""
    if os.path.isfile(path):
        raise InputError(f"{path}: is a file; pass the model directory that holds it")
    if not os.path.isdir(path):
        raise InputError(f"{path}: model directory not found")
    repo = _hf_repo(path)
    if repo:
        snap, commit = _snapshot_of(repo, path)
        source = ModelSource(path, snap, "huggingface-cache", commit)
        blobs = os.path.realpath(os.path.join(repo, "blobs"))
        for rel in model_files(snap):
            target = os.path.realpath(os.path.join(snap, rel))
            name = os.path.basename(target)
            if os.path.dirname(target) == blobs:
                if _SHA256.match(name):
                    source.hub[rel] = ("sha256", name)
                elif _SHA1.match(name):
                    source.hub[rel] = ("git-blob", name)
        return source
    meta = os.path.join(path, ".cache", "huggingface", "download")
    if os.path.isdir(meta):
        source = ModelSource(path, os.path.abspath(path), "huggingface-local-dir")
        for rel in model_files(source.dir):
            entry = _local_dir_metadata(source.dir, meta, rel)
            if entry is not None:
                source.revision = source.revision or entry[2]
                source.hub[rel] = entry[:2]
        return source
    if any(os.path.exists(os.path.join(path, name)) for name in _MODELSCOPE_META):
        return ModelSource(path, os.path.abspath(path), "modelscope")
    return ModelSource(path, os.path.abspath(path), "plain")


def _local_dir_metadata(root: str, meta: str, rel: str) -> tuple[str, str, str] | None:
    """(kind, digest, commit) from ``<rel>.metadata`` while the file is unchanged since."""
    text = _read_text(os.path.join(meta, rel + ".metadata"))
    if not text:
        return None
    lines = text.splitlines()
    if len(lines) < 3:
        return None
    commit, etag, stamp = (line.strip() for line in lines[:3])
    try:
        valid_at = float(stamp)
        changed = os.stat(os.path.join(root, rel)).st_mtime - 1 > valid_at
    except (OSError, ValueError):
        return None
    if changed:
        return None
    if _SHA256.match(etag):
        return "sha256", etag, commit
    if _SHA1.match(etag):
        return "git-blob", etag, commit
    return None


def model_files(root: str) -> list[str]:
    """The model's files below ``root`` (relative, sorted): hub metadata and hidden
    directories left out, links to files followed."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if name in _NOT_MODEL or name in _MODELSCOPE_META:
                continue
            full = os.path.join(dirpath, name)
            if os.path.isfile(full):  # follows a snapshot's links to its blobs
                out.append(os.path.relpath(full, root))
    return sorted(out)


def _hash(path: str, check: Callable[[], None] | None = None) -> tuple[str, str]:
    """(sha256, git blob id) of one file, read once."""
    size = os.stat(path).st_size
    sha256 = hashlib.sha256()
    sha1 = hashlib.sha1(f"blob {size}\0".encode(), usedforsecurity=False)
    with open(path, "rb") as fh:
        while chunk := fh.read(BLOCK):
            if check is not None:
                check()
            sha256.update(chunk)
            sha1.update(chunk)
    return sha256.hexdigest(), sha1.hexdigest()


def _read_record(path: str | None, directory: str) -> dict:
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("dir") != directory:
        return {}
    files = doc.get("files")
    return files if isinstance(files, dict) else {}


def manifest_entries(
    source: ModelSource,
    record: str | None = None,
    on_hash: Callable[[str, int], None] | None = None,
) -> dict:
    """sha256 of every file of ``source``: ``{"entries", "from_hub", "hashed", "bytes",
    "origin"}``. Files are hashed unless the hub's metadata gives their sha256; ``record``
    (a JSON file) keeps what was hashed, by size and mtime, so an unchanged file is hashed
    once. ``on_hash(rel, size)`` is called before each file is hashed (progress). A file
    whose content differs from the hub's git blob id is CheckFailed."""
    files = model_files(source.dir)
    if not files:
        raise InputError(f"{source.dir}: holds no files; download the model first")
    known = _read_record(record, source.dir)
    entries: dict[str, str] = {}
    kept: dict[str, list] = {}
    from_hub = hashed = total = 0
    for rel in files:
        full = os.path.join(source.dir, rel)
        st = os.stat(full)
        total += st.st_size
        kind, digest = source.hub.get(rel, ("", ""))
        if kind == "sha256":
            entries[rel] = digest
            from_hub += 1
            continue
        stamp = known.get(rel)
        if isinstance(stamp, list) and stamp[1:] == [st.st_size, st.st_mtime_ns]:
            entries[rel] = stamp[0]
        else:
            if on_hash is not None:
                on_hash(rel, st.st_size)
            entries[rel], blob = _hash(full)
            hashed += 1
            if kind == "git-blob" and blob != digest:
                raise CheckFailed(
                    f"{full}: differs from the hub's copy (git blob {blob[:12]}, the hub's "
                    f"metadata says {digest[:12]}); download it again"
                )
        kept[rel] = [entries[rel], st.st_size, st.st_mtime_ns]
    if record:
        _write_atomic(record, json.dumps({"dir": source.dir, "files": kept}, sort_keys=True))
    return {
        "entries": entries,
        "from_hub": from_hub,
        "hashed": hashed,
        "bytes": total,
        "origin": _origin(source, from_hub, len(files) - from_hub),
    }


def _origin(source: ModelSource, from_hub: int, here: int) -> str:
    """Where the checksums of a manifest came from, for the operator."""
    parts = []
    if from_hub:
        parts.append(f"{from_hub} sha256 from the hub's metadata on disk")
    if here:
        parts.append(f"{here} computed on this machine")
    note = " (ModelScope keeps no checksums on disk)" if source.layout == "modelscope" else ""
    return f"{source.describe()}: " + ", ".join(parts) + note


def render_sums(entries: dict[str, str]) -> str:
    """The manifest text ``sha256sum`` would write (two spaces, sorted by path)."""
    return "".join(f"{entries[rel]}  {rel}\n" for rel in sorted(entries))


def _write_atomic(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_manifest(path: str, entries: dict[str, str]) -> str:
    """Write ``entries`` as a SHA256SUMS file at ``path`` (atomically); returns the path."""
    _write_atomic(path, render_sums(entries))
    return path


def controller_manifest(path: str, manifest: str, dest: str) -> dict:
    """What staging from the controller copies and checks: ``{"dir", "manifest", "layout",
    "revision", "files", "made", "origin"}``. A directory with its own ``manifest`` keeps it;
    otherwise (a hub download) the manifest is made at ``dest`` (hashes recorded beside it in
    ``dest.record.json``, so an unchanged file is hashed once) and the source is left as it is.
    """
    source = resolve(path)
    own = os.path.join(source.dir, manifest)
    if os.path.isfile(own):
        return {
            "dir": source.dir,
            "manifest": own,
            "layout": source.layout,
            "revision": source.revision,
            "files": None,
            "made": False,
            "origin": f"{source.describe()}: its own {manifest}",
        }
    made = manifest_entries(source, record=f"{dest}.record.json")
    write_manifest(dest, made["entries"])
    return {
        "dir": source.dir,
        "manifest": dest,
        "layout": source.layout,
        "revision": source.revision,
        "files": len(made["entries"]),
        "made": True,
        "origin": made["origin"],
    }
