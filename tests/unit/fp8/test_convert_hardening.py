"""Converter and parser faults found by attacking them: overlapping tensors, a shard cut short
while converting (was SIGBUS), deeply nested JSON (was a RecursionError traceback)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("ml_dtypes")

from test_fp8_fixtures import copy_model, fp8_template, rewrite_shard  # noqa: E402

from ascend_deploy.cli import main  # noqa: E402
from ascend_deploy.errors import InputError  # noqa: E402
from ascend_deploy.model.safetensors_header import read_header  # noqa: E402

SHARD1 = "model-00001-of-00002.safetensors"
INDEX = "model.safetensors.index.json"
DEEP = "[" * 100000 + "]" * 100000


def edit_header(path: str, edit) -> None:
    """Rewrite a shard's JSON header through ``edit(doc)``; the data bytes stay as they are."""
    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        doc = json.loads(fh.read(n))
        data = fh.read()
    edit(doc)
    raw = json.dumps(doc).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw + data)


def same_size_pair(doc: dict) -> tuple[str, str]:
    """Two tensors of equal byte size, the first one earlier in the data."""
    names = sorted((k for k in doc if k != "__metadata__"), key=lambda k: doc[k]["data_offsets"])
    for i, a in enumerate(names):
        sa = doc[a]["data_offsets"]
        for b in names[i + 1 :]:
            sb = doc[b]["data_offsets"]
            if sa[1] - sa[0] == sb[1] - sb[0] > 0:
                return a, b
    raise AssertionError("no two tensors of the same size")


def overlap(doc: dict) -> None:
    a, b = same_size_pair(doc)
    doc[b]["data_offsets"] = list(doc[a]["data_offsets"])  # b reads a's bytes


def convert(model: str, dst: str, *extra: str, capsys) -> tuple[int, str]:
    rc = main(["convert", model, dst, "--no-progress", *extra])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("verify", [[], ["--verify"]], ids=["plain", "verify"])
def test_overlapping_tensors_are_refused_like_the_safetensors_library(tmp_path, capsys, verify):
    model = copy_model(fp8_template(), str(tmp_path / "fp8"))
    path = os.path.join(model, SHARD1)
    edit_header(path, overlap)
    safetensors = pytest.importorskip("safetensors")
    with pytest.raises(Exception) as lib, safetensors.safe_open(path, "np"):
        pass
    assert "offset" in str(lib.value).lower()
    rc, err = convert(model, str(tmp_path / "out"), *verify, capsys=capsys)
    assert rc == 2, err
    assert SHARD1 in err and "overlap" in err and err.count("\n") == 1
    assert sorted(os.listdir(tmp_path)) == ["fp8"]


def test_gaps_and_trailing_bytes_are_refused(tmp_path):
    model = copy_model(fp8_template(), str(tmp_path / "fp8"))
    path = os.path.join(model, SHARD1)
    with open(path, "ab") as fh:
        fh.write(b"\0" * 16)
    with pytest.raises(InputError, match="16 data bytes after the last tensor"):
        read_header(path)

    def gap(doc):  # drop the first tensor: its bytes belong to nothing
        del doc[min((k for k in doc if k != "__metadata__"), key=lambda k: doc[k]["data_offsets"])]

    model2 = copy_model(fp8_template(), str(tmp_path / "fp8b"))
    edit_header(os.path.join(model2, SHARD1), gap)
    with pytest.raises(InputError, match="belong to no tensor"):
        read_header(os.path.join(model2, SHARD1))


def test_real_checkpoints_tile_their_data_exactly(tmp_path):
    for name in os.listdir(fp8_template()):
        if name.endswith(".safetensors"):
            header = read_header(os.path.join(fp8_template(), name))
            assert sum(t.nbytes for t in header.tensors.values()) == header.data_size


def test_shard_cut_short_while_converting_is_named_not_sigbus(tmp_path):
    """The shard is truncated after its header was read (a re-copy over it, NFS): every read
    of its data then hits the end of the file. A memory map died with SIGBUS (exit 135)."""
    model = copy_model(fp8_template(), str(tmp_path / "fp8"))

    def scales_first(tensors):  # then the FP8 weights: the first job reads a weight
        tensors.sort(key=lambda t: (not t[0].endswith("_scale_inv"), t[1] != "F8_E4M3"))

    rewrite_shard(model, SHARD1, scales_first)
    header = read_header(os.path.join(model, SHARD1))
    first = next(t for t in header.tensors.values() if t.dtype == "F8_E4M3")
    assert first.nbytes > 8 * 4096  # many pages: a map of it reaches past the new end
    cut = header.data_offset + first.begin + 100
    dst = tmp_path / "out"
    script = textwrap.dedent(
        f"""
        import os, sys
        from ascend_deploy.fp8 import convert as c
        from ascend_deploy.cli import main
        plan_conversion = c.plan_conversion

        def cut_after_planning(src, *args):
            plan = plan_conversion(src, *args)
            os.truncate(os.path.join(src, {SHARD1!r}), {cut})
            return plan

        c.plan_conversion = cut_after_planning
        sys.exit(main(["convert", {model!r}, {str(dst)!r}, "--no-progress", "--workers", "1"]))
        """
    )
    res = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert SHARD1 in res.stderr and "cut short during conversion" in res.stderr
    assert res.stderr.count("\n") == 1, res.stderr
    assert not dst.exists()
    assert sorted(os.listdir(tmp_path)) == ["fp8"]  # the partial output was removed


# -- deeply nested JSON: exit 2 and one line from every parser ---------------------------------
def deep_header(model: str) -> None:
    raw = DEEP.encode()
    with open(os.path.join(model, SHARD1), "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)


def deep_file(name: str):
    def mutate(model: str) -> None:
        with open(os.path.join(model, name), "w") as fh:
            fh.write('{"a": ' + DEEP + "}")

    return mutate


@pytest.mark.parametrize(
    "mutate, where",
    [(deep_header, SHARD1), (deep_file("config.json"), "config.json"), (deep_file(INDEX), INDEX)],
    ids=["safetensors-header", "config", "index"],
)
@pytest.mark.parametrize("command", ["convert", "plan"])
def test_deeply_nested_json_is_one_line_and_exit_2(tmp_path, capsys, mutate, where, command):
    model = copy_model(fp8_template(), str(tmp_path / "fp8"))
    mutate(model)
    if command == "convert":
        argv = ["convert", model, str(tmp_path / "out"), "--no-progress"]
    else:
        argv = ["plan", "--model-dir", model, "--hbm-total-mb", "65536"]
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and where in err and "nested too deeply" in err, err


def test_deeply_nested_suite_is_one_line_and_exit_2(tmp_path, capsys):
    suite = tmp_path / "suite.json"
    suite.write_text('{"cases": ' + DEEP + "}")
    rc = main(["verify", "--url", "http://127.0.0.1:1", "--suite", str(suite)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "nested too deeply" in err, err


def test_a_suite_that_is_a_fifo_is_refused_at_once(tmp_path, capsys):
    fifo = tmp_path / "suite.json"
    os.mkfifo(fifo)
    rc = main(["verify", "--url", "http://127.0.0.1:1", "--suite", str(fifo)])
    err = capsys.readouterr().err
    assert rc == 2 and "not a regular file" in err, err


def test_messages_quote_huge_header_values_cut_short(tmp_path):
    model = copy_model(fp8_template(), str(tmp_path / "fp8"))
    path = os.path.join(model, SHARD1)

    def huge_name(doc):
        name = next(k for k in doc if k != "__metadata__")
        doc["x" * 900_000] = dict(doc.pop(name), dtype="Q" * 900_000)

    edit_header(path, huge_name)
    with pytest.raises(InputError) as exc:
        read_header(path)
    assert len(str(exc.value)) < 400 + len(path) and "..." in str(exc.value)


def test_npu_smi_messages_quote_huge_cells_cut_short():
    from ascend_deploy.host.npu_smi import parse

    text = (
        "| NPU   Name   | Health | Power(W) Temp(C) Hugepages-Usage(page) |\n"
        "| Chip         | Bus-Id | AICore(%) Memory-Usage(MB) HBM-Usage(MB) |\n"
        f"| {'z' * 900_000} 910B3 | OK | 90.1 40 0 / 0 |\n"
        "| 0            | 0000:C1:00.0 | 0 0 / 0 3000 / 65536 |\n"
    )
    with pytest.raises(InputError) as exc:
        parse(text, kind="info")
    assert len(str(exc.value)) < 400 and "..." in str(exc.value)
