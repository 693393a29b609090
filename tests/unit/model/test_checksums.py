"""A model directory against its SHA256SUMS (what ``ascend_manifest`` runs), on real files.

The model is the trained tiny Qwen3 FP8 checkpoint and its BF16 conversion by the converter;
the manifests are written by coreutils ``sha256sum``, as an operator would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import DATA

from ascend_deploy.errors import InputError
from ascend_deploy.fp8.convert import _hash, _Stopped, convert_checkpoint
from ascend_deploy.fp8.files import MANIFEST_NAME
from ascend_deploy.model.checksums import (
    RECORD,
    ChecksumMismatch,
    read_sums,
    sha256_file,
    verify_dir,
)

TINY = DATA / "tiny-qwen3-fp8"
SHARD = "model-00001-of-00002.safetensors"

pytestmark = pytest.mark.skipif(not shutil.which("sha256sum"), reason="needs coreutils sha256sum")


def sha256sum(model: Path, *flags: str) -> None:
    """``sha256sum [flags] <every file> > SHA256SUMS`` inside ``model`` (subdirectories too)."""
    names = sorted(
        str(p.relative_to(model))
        for p in model.rglob("*")
        if p.is_file() and p.name not in ("SHA256SUMS", RECORD)
    )
    done = subprocess.run(
        ["sha256sum", *flags, *names], cwd=model, capture_output=True, check=True, text=True
    )
    (model / "SHA256SUMS").write_text(done.stdout)


@pytest.fixture
def model(tmp_path) -> Path:
    out = tmp_path / "tiny"
    shutil.copytree(TINY, out)
    sha256sum(out)
    return out


def test_a_good_directory_passes_and_the_second_check_hashes_nothing(model):
    files = [p for p in model.iterdir() if p.name != "SHA256SUMS"]
    first = verify_dir(str(model))
    assert first == {
        "files": len(files),
        "hashed": len(files),
        "bytes": sum(p.stat().st_size for p in files),
        "warnings": [],
    }
    assert set(json.loads((model / RECORD).read_text())) == {p.name for p in files}
    second = verify_dir(str(model))
    assert second["hashed"] == 0 and second["files"] == len(files)
    # without the cache every file is hashed again
    assert verify_dir(str(model), use_cache=False)["hashed"] == len(files)
    # a new mtime (same bytes) is hashed again and still passes
    os.utime(model / "config.json", ns=(1, 1))
    assert verify_dir(str(model))["hashed"] == 1


def test_a_flipped_byte_is_named(model):
    verify_dir(str(model))  # recorded as good first: the record must not hide the change
    shard = model / SHARD
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    with pytest.raises(ChecksumMismatch) as err:
        verify_dir(str(model))
    assert err.value.problems == [
        f"{shard}: sha256 {sha256_file(str(shard))[:16]}... != manifest "
        f"{read_sums(str(model / 'SHA256SUMS'))[SHARD][:16]}..."
    ]
    message = str(err.value)
    assert message.startswith(f"1 file(s) in {model} do not match {model / 'SHA256SUMS'}: ")
    assert "Fix: re-stage the model" in message and "\n" not in message
    # the bad file is not recorded as good: it is hashed (and named) again
    with pytest.raises(ChecksumMismatch):
        verify_dir(str(model))


def test_a_missing_file_is_named_with_the_others_still_checked(model):
    (model / "tokenizer.json").unlink()
    config = model / "config.json"
    config.write_text(config.read_text() + " ")
    with pytest.raises(ChecksumMismatch) as err:
        verify_dir(str(model))
    assert err.value.problems[0].startswith(f"{config}: sha256 ")
    assert err.value.problems[1] == f"{model / 'tokenizer.json'}: missing"
    assert not (model / RECORD).exists()


def test_binary_markers_subdirectories_and_an_absolute_manifest(tmp_path, model):
    (model / "extra").mkdir()
    (model / "extra" / "merges.txt").write_text("a b\n")
    sha256sum(model, "-b")  # '<sha256> *<file>' lines
    assert " *extra/merges.txt" in (model / "SHA256SUMS").read_text()
    moved = tmp_path / "sums"
    shutil.move(model / "SHA256SUMS", moved)
    result = verify_dir(str(model), str(moved), record=False)
    assert result["files"] == len(read_sums(str(moved))) and result["hashed"] == result["files"]
    assert not (model / RECORD).exists()  # check mode writes nothing


def test_a_missing_directory_or_manifest_names_the_fix(tmp_path):
    with pytest.raises(InputError, match="does not exist; stage the weights first"):
        verify_dir(str(tmp_path / "none"))
    with pytest.raises(InputError, match=r"'sha256sum \* > SHA256SUMS'"):
        verify_dir(str(tmp_path))


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        (b"", "is empty"),
        (b"# only a comment\n", "is empty"),
        (b"\x00\x01\x02binary", "is not text"),
        (b"not a manifest line\n", "line 1 is not '<sha256>  <file>'"),
        (b"0" * 64 + b"  ../../etc/passwd\n", "leaves the directory"),
    ],
)
def test_bad_manifests_are_refused_with_one_line(tmp_path, content, expect):
    (tmp_path / "SHA256SUMS").write_bytes(content)
    with pytest.raises(InputError, match=expect) as err:
        read_sums(str(tmp_path / "SHA256SUMS"))
    assert "\n" not in str(err.value)


def test_the_converter_hashes_with_the_same_function(tmp_path):
    """The converter records its sources' sha256 with sha256_file: equal to coreutils', and a
    sha256sum manifest of its BF16 output checks clean."""
    dst = tmp_path / "bf16"
    assert convert_checkpoint(str(TINY), str(dst))["status"] == "converted"
    recorded = json.loads((dst / MANIFEST_NAME).read_text())["source_files"]
    done = subprocess.run(
        ["sha256sum", *sorted(recorded)], cwd=TINY, capture_output=True, check=True, text=True
    )
    coreutils = {
        name: digest for digest, name in (line.split() for line in done.stdout.split("\n") if line)
    }
    assert {name: entry["sha256"] for name, entry in recorded.items()} == coreutils
    assert all(sha256_file(str(TINY / n)) == d for n, d in coreutils.items())
    sha256sum(dst)
    assert verify_dir(str(dst), record=False)["files"] == len(list(dst.iterdir())) - 1
    stop = threading.Event()
    stop.set()
    with pytest.raises(_Stopped):  # the converter's stop flag ends a hash between blocks
        _hash(str(TINY), SHARD, stop)
    assert sha256_file(str(TINY / SHARD), block=1000) == coreutils[SHARD]
