"""Hub downloads to SHA256SUMS (model.hub) and ``ascend-deploy manifest`` (issue 24).

The tiny trained model (real safetensors) laid out as each hub client leaves it
(hub_layouts.py); every manifest is checked against sha256 of the real bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

import pytest
from conftest import DATA

from ascend_deploy.cli import main
from ascend_deploy.errors import CheckFailed, InputError
from ascend_deploy.model.checksums import read_sums, verify_dir
from ascend_deploy.model.hub import controller_manifest, manifest_entries, resolve

sys.path.insert(0, str(Path(__file__).parent))
import hub_layouts

TINY = DATA / "tiny-qwen3-fp8"
TRUTH = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in TINY.iterdir()}
LFS = sum(hub_layouts.is_lfs(n) for n in TRUTH)


def layouts(tmp_path: Path) -> dict[str, Path]:
    return {
        "huggingface-cache": hub_layouts.hf_cache(TINY, tmp_path / "hub"),
        "huggingface-local-dir": hub_layouts.hf_local_dir(TINY, tmp_path / "local"),
        "modelscope": hub_layouts.modelscope_dir(TINY, tmp_path / "ms"),
    }


@pytest.mark.parametrize("layout", ["huggingface-cache", "huggingface-local-dir", "modelscope"])
def test_each_layout_gives_the_true_sha256_of_every_model_file(tmp_path, layout):
    path = layouts(tmp_path)[layout]
    source = resolve(str(path))
    assert source.layout == layout
    made = manifest_entries(source)
    assert made["entries"] == TRUTH  # hub metadata files are not part of the model
    from_hub = 0 if layout == "modelscope" else LFS
    assert (made["from_hub"], made["hashed"]) == (from_hub, len(TRUTH) - from_hub)
    if layout == "modelscope":
        assert "ModelScope keeps no checksums on disk" in made["origin"]
    else:
        assert f"{LFS} sha256 from the hub's metadata on disk" in made["origin"]


def test_the_cache_repository_resolves_through_refs_main(tmp_path):
    repo = hub_layouts.hf_cache(TINY, tmp_path / "hub")
    source = resolve(str(repo))
    assert source.dir == str(repo / "snapshots" / hub_layouts.COMMIT)
    assert source.revision == hub_layouts.COMMIT
    assert resolve(source.dir).dir == source.dir  # the snapshot itself
    (repo / "refs" / "main").unlink()
    (repo / "snapshots" / ("f" * 40)).mkdir()
    with pytest.raises(InputError, match="2 snapshots and no usable refs/main"):
        resolve(str(repo))


def test_a_file_changed_after_the_download_is_hashed_not_trusted(tmp_path):
    local = hub_layouts.hf_local_dir(TINY, tmp_path / "local")
    shard = local / "model-00001-of-00002.safetensors"
    later = time.time() + 3600  # modified after its metadata was written
    os.utime(shard, (later, later))
    made = manifest_entries(resolve(str(local)))
    assert made["from_hub"] == LFS - 1 and made["entries"] == TRUTH


def test_a_small_file_that_differs_from_the_hub_is_refused(tmp_path):
    repo = hub_layouts.hf_cache(TINY, tmp_path / "hub")
    config = repo / "snapshots" / hub_layouts.COMMIT / "config.json"
    Path(os.path.realpath(config)).write_text("{}")  # the blob no longer matches its git id
    with pytest.raises(CheckFailed, match="differs from the hub's copy"):
        manifest_entries(resolve(str(repo)))


def test_controller_manifest_records_hashes_and_never_writes_the_source(tmp_path):
    ms = hub_layouts.modelscope_dir(TINY, tmp_path / "ms")
    before = sorted(os.listdir(ms))
    dest = tmp_path / "cache" / "tiny" / "SHA256SUMS"
    first = controller_manifest(str(ms), "SHA256SUMS", str(dest))
    assert first["made"] and read_sums(str(dest)) == TRUTH
    assert sorted(os.listdir(ms)) == before
    record = json.loads(Path(f"{dest}.record.json").read_text())
    assert set(record["files"]) == set(TRUTH)
    again = manifest_entries(resolve(str(ms)), record=f"{dest}.record.json")
    assert again["hashed"] == 0  # unchanged files are hashed once
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "config.json").write_text("{}")
    (plain / "SHA256SUMS").write_text(hashlib.sha256(b"{}").hexdigest() + "  config.json\n")
    own = controller_manifest(str(plain), "SHA256SUMS", str(tmp_path / "unused"))
    assert own["made"] is False and own["manifest"] == str(plain / "SHA256SUMS")


def test_cli_writes_then_checks_the_manifest(tmp_path, capsys):
    local = hub_layouts.hf_local_dir(TINY, tmp_path / "local")
    assert main(["manifest", str(local)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"wrote {local}/SHA256SUMS: {len(TRUTH)} file(s)")
    assert "a Hugging Face --local-dir download at 0123456789ab" in out
    assert read_sums(str(local / "SHA256SUMS")) == TRUTH
    assert verify_dir(str(local), record=False)["files"] == len(TRUTH)
    # An existing manifest is checked, not rewritten.
    assert main(["manifest", str(local)]) == 0
    assert f"all {len(TRUTH)} file(s) match" in capsys.readouterr().out
    (local / "README.md").write_text("changed")
    assert main(["manifest", str(local), "--check"]) == 1
    err = capsys.readouterr().err
    assert "README.md: sha256" in err and "do not match" in err


def test_cli_check_without_a_manifest_and_json(tmp_path, capsys):
    ms = hub_layouts.modelscope_dir(TINY, tmp_path / "ms")
    assert main(["manifest", str(ms), "--check"]) == 2
    assert "SHA256SUMS not found; write it with `ascend-deploy manifest" in capsys.readouterr().err
    out_file = tmp_path / "sums"
    assert main(["manifest", str(ms), "--output", str(out_file), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["layout"] == "modelscope" and doc["from_hub"] == 0 and doc["files"] == len(TRUTH)
    assert not (ms / "SHA256SUMS").exists()
