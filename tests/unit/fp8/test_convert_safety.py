"""Safety: atomic output, interruption (SIGTERM, Ctrl-C), disk space, leftovers."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections import namedtuple

import pytest

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")

from test_fp8_fixtures import copy_model, fp8_template, rewrite_shard  # noqa: E402

import ascend_deploy.fp8.convert as convert_mod  # noqa: E402
from ascend_deploy.cli import main  # noqa: E402
from ascend_deploy.fp8.convert import conversion_status, convert_checkpoint  # noqa: E402

# Runs the real CLI; the progress display (called from the main thread while workers
# convert) announces itself and then blocks, so the test can signal a run in progress.
BLOCKING_CLI = textwrap.dedent(
    """
    import signal, sys, time
    import ascend_deploy.fp8.progress as progress

    # Ctrl-C as in a terminal: a job started in the background by a shell without job control
    # (`cmd &` in a script, as some CI runners start their jobs) inherits SIGINT ignored, and
    # Python then installs no KeyboardInterrupt handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def announce_and_block(self, done, total):
        print("in progress", flush=True)
        # Short sleeps, as the converter's own 0.25 s waits (Python runs a signal's handler in
        # the main thread when it wakes up).
        for _ in range(1200):
            time.sleep(0.1)

    progress.ProgressDisplay.__call__ = announce_and_block
    from ascend_deploy.cli import main
    sys.exit(main(["convert", sys.argv[1], sys.argv[2]]))
    """
)


def tree(path):
    out = {}
    for root, _, names in os.walk(path):
        for name in names:
            full = os.path.join(root, name)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, path)] = fh.read()
    return out


def run_and_signal(src, dst, sig):
    """Start the CLI, wait until it is converting, send ``sig``; (rc, stderr, tmp seen)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", BLOCKING_CLI, src, dst],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.strip() == "in progress", proc.stderr.read()
        parent = os.path.dirname(dst)
        tmp_seen = [n for n in os.listdir(parent) if ".fp8conv-tmp-" in n]
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err, tmp_seen


@pytest.mark.parametrize(
    ("sig", "rc", "text"),
    [(signal.SIGTERM, 143, "interrupted by SIGTERM"), (signal.SIGINT, 130, "interrupted")],
)
def test_interrupt_removes_partial_output(tmp_path, sig, rc, text):
    src = copy_model(fp8_template(), str(tmp_path / "fp8"))
    before = tree(src)
    dst = str(tmp_path / "bf16")
    code, err, tmp_seen = run_and_signal(src, dst, sig)
    assert tmp_seen, "the output is written to a temporary sibling first"
    assert code == rc, err
    assert text in err and "Traceback" not in err and err.count("\n") == 1, err
    assert sorted(os.listdir(tmp_path)) == ["fp8"]  # no DST, no temporary directory
    assert tree(src) == before


def test_interrupted_reconversion_keeps_the_previous_output(tmp_path):
    src = copy_model(fp8_template(), str(tmp_path / "fp8"))
    dst = str(tmp_path / "bf16")
    convert_checkpoint(src, dst)
    previous = tree(dst)

    def bump(tensors):
        tensors[0][3] = bytes([tensors[0][3][0] ^ 1]) + tensors[0][3][1:]

    rewrite_shard(src, "model-00002-of-00002.safetensors", bump)
    assert conversion_status(src, dst) == "needed"
    code, err, _ = run_and_signal(src, dst, signal.SIGTERM)
    assert code == 143, err
    assert tree(dst) == previous  # untouched until a complete replacement is ready
    assert sorted(os.listdir(tmp_path)) == ["bf16", "fp8"]


def test_disk_space_shortfall_fails_at_once_with_both_numbers(tmp_path, monkeypatch, capsys):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(convert_mod.shutil, "disk_usage", lambda p: usage(10**9, 0, 123_456))
    dst = tmp_path / "bf16"
    rc = main(["convert", fp8_template(), str(dst), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "not enough free disk space" in err and "123456 bytes" in err
    need = int(err.split("need ")[1].split(" bytes")[0])
    assert need > 2 * 700_000  # about twice the FP8 weight bytes
    assert not dst.exists() and os.listdir(tmp_path) == []


def test_write_errors_become_operator_errors(tmp_path, monkeypatch):
    def full_disk(fd, data, offset):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(convert_mod.os, "pwrite", full_disk)
    from ascend_deploy.errors import CheckFailed

    with pytest.raises(CheckFailed, match="disk full while writing the BF16 output"):
        convert_checkpoint(fp8_template(), str(tmp_path / "bf16"))
    assert os.listdir(tmp_path) == []


def test_abandoned_temporary_directories_are_removed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    stale = tmp_path / f".bf16.fp8conv-tmp-{dead.pid}-abcdef.{host}"
    stale.mkdir()
    (stale / "model-00001-of-00002.safetensors").write_bytes(b"partial")
    old = tmp_path / f".bf16.fp8conv-old-{dead.pid}-abcdef.{host}"
    old.mkdir()
    live = tmp_path / f".bf16.fp8conv-tmp-{os.getpid()}-123456.{host}"  # running here
    live.mkdir()
    remote = tmp_path / f".bf16.fp8conv-tmp-{dead.pid}-abcdef.other-host.example"
    remote.mkdir()  # another host's conversion into a shared directory
    result = convert_checkpoint(fp8_template(), str(tmp_path / "bf16"))
    assert result["status"] == "converted"
    assert not stale.exists() and not old.exists()
    assert live.exists() and remote.exists()


def test_manifest_records_sources_and_version(tmp_path):
    src = fp8_template()
    convert_checkpoint(src, str(tmp_path / "bf16"))
    with open(tmp_path / "bf16" / "ascend-deploy-fp8-manifest.json") as fh:
        manifest = json.load(fh)
    import hashlib

    with open(os.path.join(src, "model-00001-of-00002.safetensors"), "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    entry = manifest["source_files"]["model-00001-of-00002.safetensors"]
    assert entry["sha256"] == digest
    assert entry["size"] == os.path.getsize(os.path.join(src, "model-00001-of-00002.safetensors"))
    assert set(manifest["source_files"]) >= {"config.json", "tokenizer.json", "extra/notes.txt"}
    assert manifest["converter_version"] and manifest["source_dir"] == os.path.realpath(src)
    assert manifest["tensors_out"] == 25
