"""staging: free space first, copy beside the target, switch atomically (issue 16 §4).

The full-disk case runs on a real 1 MiB tmpfs when the test may mount one (root in CI);
the space figures are always checked against the real filesystem of tmp_path.
"""

from __future__ import annotations

import errno
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ascend_deploy.errors import CheckFailed, InputError
from ascend_deploy.model import staging


def model(root: Path, name: str, size: int, fill: bytes) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "model.safetensors").write_bytes(fill * size)
    (d / "config.json").write_text('{"x": 1}')
    return d


@pytest.fixture
def small_fs(tmp_path: Path):
    """A real 1 MiB filesystem (tmpfs), unmounted afterwards."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_space_check_names_both_figures_before_any_copy(tmp_path):
    target = tmp_path / "models" / "qwen3"
    _where, free = staging.free_space(str(target))
    ok = staging.check_space(str(target), 1024)
    assert ok["need_bytes"] == 1024 and ok["free_bytes"] > 1024
    need = free + 5 * 2**30
    with pytest.raises(CheckFailed) as err:
        staging.check_space(str(target), need, replaced=123)
    msg = str(err.value)
    assert f"needs {need:,} bytes" in msg
    assert re.search(r", [\d,]+ bytes \([\d.]+ [GMK]iB\) free on the filesystem of /", msg), msg
    assert "Fix: free at least" in msg and "model_weights_root" in msg
    assert not (tmp_path / "models").exists()  # read-only


def test_full_disk_redeploy_leaves_the_previous_model_and_no_partial_files(small_fs):
    old = model(small_fs, "qwen3", 300_000, b"o")
    before = {p.name: p.read_bytes() for p in old.iterdir()}
    new = model(small_fs.parent, "new-qwen3", 900_000, b"n")
    # The check refuses first, with the figures of this filesystem.
    figures = r"needs 900,\d+ bytes \(87\d\.\d KiB\), [\d,]+ bytes \(.*\) free"
    with pytest.raises(CheckFailed, match=figures):
        staging.check_space(str(old), staging.dir_bytes(str(new)), staging.dir_bytes(str(old)))
    # Had the copy run anyway (another writer filled the disk), it fails in the staging
    # directory; discarding it leaves the previous model exactly as it was.
    with pytest.raises(OSError) as err:
        shutil.copytree(new, staging.staging_dir(str(old)))
    assert err.value.errno == errno.ENOSPC or "No space left" in str(err.value)
    assert staging.discard(str(old)) is True
    assert sorted(p.name for p in small_fs.iterdir()) == ["qwen3"]
    assert {p.name: p.read_bytes() for p in old.iterdir()} == before


def test_commit_switches_the_complete_copy_into_place(tmp_path):
    old = model(tmp_path, "qwen3", 10, b"o")
    tmp = Path(staging.staging_dir(str(old)))
    assert tmp == tmp_path / ".qwen3.staging"
    shutil.copytree(model(tmp_path / "src", "qwen3", 20, b"n"), tmp)
    held = (old / "model.safetensors").open("rb")  # a reader of the old copy (the service)
    staging.commit(str(old))
    assert (old / "model.safetensors").read_bytes() == b"n" * 20
    assert held.read() == b"o" * 10  # the old inode stays readable until closed
    held.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["qwen3", "src"]
    # First staging (no previous copy) and nothing staged.
    fresh = tmp_path / "fresh"
    Path(staging.staging_dir(str(fresh))).mkdir()
    staging.commit(str(fresh))
    assert fresh.is_dir()
    with pytest.raises(CheckFailed, match="nothing staged"):
        staging.commit(str(fresh))
    assert staging.discard(str(fresh)) is False


@pytest.mark.parametrize("bad", ["relative/dir", "/"])
def test_target_must_be_absolute_below_root(bad):
    with pytest.raises(InputError, match="must be an absolute path"):
        staging.staging_dir(bad)
