"""ascend_deploy.fp8.convert and ``ascend-deploy convert``: output, idempotency, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")

from test_fp8_fixtures import (  # noqa: E402
    OTHER_FILES,
    bf16_template,
    copy_model,
    fp8_template,
    read_tensors,
    rewrite_shard,
)

from ascend_deploy.cli import main  # noqa: E402
from ascend_deploy.errors import CheckFailed, InputError  # noqa: E402
from ascend_deploy.fp8.convert import conversion_status, convert_checkpoint  # noqa: E402
from ascend_deploy.fp8.dequant import reference_dequantize  # noqa: E402
from ascend_deploy.fp8.files import MANIFEST_NAME  # noqa: E402
from ascend_deploy.fp8.plan import plan_conversion  # noqa: E402
from ascend_deploy.fp8.verify import verify_output  # noqa: E402
from ascend_deploy.model.safetensors_header import read_header  # noqa: E402

INDEX = "model.safetensors.index.json"


def load_json(path: str) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def snapshot(model_dir) -> dict[str, tuple[int, int, bytes]]:
    """(size, mtime_ns, content) of every file, to prove a directory was not touched."""
    out = {}
    for root, _, names in os.walk(model_dir):
        for name in names:
            path = os.path.join(root, name)
            st = os.stat(path)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, model_dir)] = (st.st_size, st.st_mtime_ns, fh.read())
    return out


@pytest.mark.parametrize("scale_dtype", ["BF16", "F16", "F32"])
def test_converted_model_is_exact_and_complete(tmp_path, scale_dtype):
    src = fp8_template(scale_dtype)
    before = snapshot(src)
    dst = tmp_path / "bf16"
    result = convert_checkpoint(src, str(dst), workers=2, verify=True)
    assert snapshot(src) == before  # SRC never written
    fp8 = read_tensors(src)
    out = read_tensors(str(dst))
    scales = [n for n in fp8 if n.endswith("_scale_inv")]
    assert result["status"] == "converted" and result["verified"]
    assert result["tensors_in"] == len(fp8) == 39
    assert result["tensors_out"] == len(out) == 39 - len(scales) == 25
    assert set(out) == set(fp8) - set(scales)
    for name, (dtype, shape, raw) in out.items():
        src_dtype, src_shape, src_raw = fp8[name]
        assert shape == src_shape
        if src_dtype == "F8_E4M3":
            s_dtype, s_shape, s_raw = fp8[name + "_scale_inv"]
            assert s_dtype == scale_dtype and dtype == "BF16"
            scale = np.frombuffer(s_raw, _np_dtype(s_dtype)).reshape(s_shape).astype(np.float32)
            codes = np.frombuffer(src_raw, np.uint8).reshape(shape)
            want = reference_dequantize(codes, scale, (128, 128))
            assert np.frombuffer(raw, "<u2").reshape(shape).tobytes() == want.tobytes(), name
        else:
            assert (dtype, raw) == (src_dtype, src_raw), name  # copied bit for bit
    # same shard names and tensor order (minus scales)
    for shard in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        src_order = [n for n in read_header(os.path.join(src, shard)).tensors if n not in scales]
        assert list(read_header(str(dst / shard)).tensors) == src_order
    index = json.loads((dst / INDEX).read_text())
    assert index["metadata"]["total_size"] == sum(len(v[2]) for v in out.values())
    assert index["metadata"]["total_size"] == result["total_size"]
    assert list(index["weight_map"]) == [
        n for n in load_json(os.path.join(src, INDEX))["weight_map"] if n not in scales
    ]
    config = json.loads((dst / "config.json").read_text())
    src_config = load_json(os.path.join(src, "config.json"))
    assert "quantization_config" not in config and config["torch_dtype"] == "bfloat16"
    src_config.pop("quantization_config")
    assert config == src_config  # nothing else changed
    for rel, text in OTHER_FILES.items():
        assert (dst / rel).read_text() == text
    assert not [p for p in os.listdir(tmp_path) if p != "bf16"]  # no temporary left


def _np_dtype(name):
    return {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16}[name]


def test_single_file_model_and_dtype_keys(tmp_path):
    src = copy_model(fp8_template(shards=1), str(tmp_path / "fp8"))
    config = load_json(os.path.join(src, "config.json"))
    config["dtype"] = "float8"  # transformers 5 writes "dtype" too
    config["torch_dtype"] = "float8"
    (tmp_path / "fp8" / "config.json").write_text(json.dumps(config))
    result = convert_checkpoint(src, str(tmp_path / "out"))
    assert result["status"] == "converted"
    assert sorted(os.listdir(tmp_path / "out")) == sorted(
        [*os.listdir(src), MANIFEST_NAME]
    )  # no index invented for a single-file model
    out_config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert out_config["dtype"] == out_config["torch_dtype"] == "bfloat16"


def test_workers_do_not_change_the_output(tmp_path):
    src = fp8_template("BF16")
    convert_checkpoint(src, str(tmp_path / "w1"), workers=1)
    convert_checkpoint(src, str(tmp_path / "w4"), workers=4)
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", INDEX):
        assert (tmp_path / "w1" / name).read_bytes() == (tmp_path / "w4" / name).read_bytes()


def test_copy_without_copy_file_range_gives_the_same_output(tmp_path, monkeypatch):
    import ascend_deploy.fp8.convert as convert_mod

    src = fp8_template("BF16")
    convert_checkpoint(src, str(tmp_path / "kernel"))
    monkeypatch.setattr(convert_mod, "_copy_file_range_ok", False)
    monkeypatch.setattr(convert_mod, "READ_STEP", 4096)  # many small reads
    convert_checkpoint(src, str(tmp_path / "userspace"))
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        assert (tmp_path / "kernel" / name).read_bytes() == (
            tmp_path / "userspace" / name
        ).read_bytes()


def test_small_chunks_without_early_writeback_give_the_same_output(tmp_path, monkeypatch):
    import ascend_deploy.fp8.convert as convert_mod
    import ascend_deploy.fp8.dequant as dequant

    src = fp8_template("BF16")
    convert_checkpoint(src, str(tmp_path / "default"))
    monkeypatch.setattr(dequant, "CHUNK_ELEMENTS", 1000)  # 3-row chunks, across tile rows
    monkeypatch.setattr(convert_mod, "_writeback", None)  # no sync_file_range
    convert_checkpoint(src, str(tmp_path / "small"), verify=True)
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        want = (tmp_path / "default" / name).read_bytes()
        assert (tmp_path / "small" / name).read_bytes() == want


def test_every_tensor_byte_is_handed_to_writeback_early(tmp_path, monkeypatch):
    import ascend_deploy.fp8.convert as convert_mod

    if convert_mod._writeback is None:
        pytest.skip("no sync_file_range here")
    ranges: dict[str, list[tuple[int, int]]] = {}

    def record(fd, offset, nbytes, flags):
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        ranges.setdefault(name, []).append((offset, offset + nbytes))
        return 0

    monkeypatch.setattr(convert_mod, "_writeback", record)
    convert_checkpoint(fp8_template(), str(tmp_path / "bf16"))
    for sp in plan_conversion(fp8_template()).shards:
        end = len(sp.header)  # the header is written (and fsynced) separately
        for begin, stop in sorted(ranges[sp.name]):
            assert begin <= end, (sp.name, begin, end)
            end = max(end, stop)
        assert end == sp.out_size == os.path.getsize(tmp_path / "bf16" / sp.name)


def test_source_hashes_run_between_the_tensors(tmp_path):
    import threading

    from ascend_deploy.fp8.convert import _hash, _schedule, _Stopped

    src = copy_model(fp8_template(), str(tmp_path / "fp8"))
    plan = plan_conversion(src)
    tasks = _schedule(plan, {n: os.path.getsize(os.path.join(src, n)) for n in plan.source_files})
    jobs = [t for t in tasks if not isinstance(t, str)]
    assert jobs == [job for sp in plan.shards for job in sp.jobs]  # file order kept
    assert sorted(t for t in tasks if isinstance(t, str)) == plan.source_files
    shards = [tasks.index(name) for name in plan.layout.shards]
    assert min(shards) > 0 and max(shards) < len(tasks) - 1  # neither first nor last
    stop = threading.Event()
    stop.set()
    with pytest.raises(_Stopped):  # an interrupted run does not finish a big hash
        _hash(src, plan.layout.shards[0], stop)


def test_second_run_changes_nothing_and_changed_source_is_reconverted(tmp_path):
    src = copy_model(fp8_template(), str(tmp_path / "fp8"))
    dst = str(tmp_path / "bf16")
    assert conversion_status(src, dst) == "needed"
    first = convert_checkpoint(src, dst)
    assert first["status"] == "converted"
    assert conversion_status(src, dst) == "up-to-date"
    out_before = snapshot(dst)
    again = convert_checkpoint(src, dst)
    assert again["status"] == "up-to-date" and again["bytes_written"] == 0
    assert "nothing changed" in again["message"]
    assert snapshot(dst) == out_before
    # touching a file (new mtime, same bytes) re-hashes it and still changes nothing
    os.utime(os.path.join(src, "tokenizer.json"), ns=(1, 1))
    assert convert_checkpoint(src, dst)["status"] == "up-to-date"
    assert snapshot(dst) == out_before

    # change one weight in the source: converted again, output follows
    def bump(tensors):
        for t in tensors:
            if t[0] == "model.embed_tokens.weight":
                t[3] = bytes([t[3][0] ^ 1]) + t[3][1:]

    rewrite_shard(
        src,
        load_json(os.path.join(src, INDEX))["weight_map"]["model.embed_tokens.weight"],
        bump,
    )
    assert conversion_status(src, dst) == "needed"
    third = convert_checkpoint(src, dst)
    assert third["status"] == "converted" and third["replaced"] == "stale"
    assert (
        read_tensors(dst)["model.embed_tokens.weight"][2]
        == read_tensors(src)["model.embed_tokens.weight"][2]
    )
    # a changed tokenizer file is a changed source too
    with open(os.path.join(src, "tokenizer_config.json"), "a") as fh:
        fh.write(" ")
    assert conversion_status(src, dst) == "needed"


def test_damaged_output_is_reconverted(tmp_path):
    src = fp8_template()
    dst = tmp_path / "bf16"
    convert_checkpoint(src, str(dst))
    shard = dst / "model-00002-of-00002.safetensors"
    os.truncate(shard, shard.stat().st_size - 10)
    assert conversion_status(src, str(dst)) == "needed"
    assert convert_checkpoint(src, str(dst))["status"] == "converted"
    assert conversion_status(src, str(dst)) == "up-to-date"


def test_already_bf16_needs_no_conversion(tmp_path):
    src = bf16_template()
    dst = tmp_path / "out"
    assert conversion_status(src, str(dst)) == "not-needed"
    result = convert_checkpoint(src, str(dst))
    assert result["status"] == "not-needed" and "nothing to convert" in result["message"]
    assert result["tensors_in"] == result["tensors_out"] == 25
    assert not dst.exists()


def test_foreign_dst_refused_unless_force(tmp_path):
    src = fp8_template()
    dst = tmp_path / "models"
    dst.mkdir()
    (dst / "precious.txt").write_text("someone else's data")
    with pytest.raises(InputError, match=r"not an earlier conversion .* --force"):
        convert_checkpoint(src, str(dst))
    assert (dst / "precious.txt").read_text() == "someone else's data"
    assert conversion_status(src, str(dst)) == "needed"
    result = convert_checkpoint(src, str(dst), force=True)
    assert result["replaced"] == "foreign"
    assert not (dst / "precious.txt").exists()
    assert conversion_status(src, str(dst)) == "up-to-date"
    # the output of another source is foreign too
    other = convert_checkpoint(fp8_template("F32"), str(tmp_path / "other"))
    assert other["status"] == "converted"
    with pytest.raises(InputError, match="not an earlier conversion"):
        convert_checkpoint(src, str(tmp_path / "other"))


def test_empty_existing_dst_is_used(tmp_path):
    (tmp_path / "empty").mkdir()
    assert convert_checkpoint(fp8_template(), str(tmp_path / "empty"))["status"] == "converted"


def test_dst_must_not_be_src_or_inside_it(tmp_path):
    src = copy_model(fp8_template(), str(tmp_path / "fp8"))
    before = snapshot(src)
    for dst in (src, os.path.join(src, "bf16"), str(tmp_path)):
        with pytest.raises(InputError, match="output directory"):
            convert_checkpoint(src, dst, force=True)
    assert snapshot(src) == before


def test_verify_detects_a_corrupt_tile(tmp_path):
    src = fp8_template()
    dst = tmp_path / "bf16"
    convert_checkpoint(src, str(dst))
    plan = plan_conversion(src)
    assert verify_output(plan, str(dst))["tiles"] > 0
    header = read_header(str(dst / "model-00001-of-00002.safetensors"))
    name = next(n for n in header.tensors if n.endswith("down_proj.weight"))
    info = header.tensors[name]
    with open(dst / "model-00001-of-00002.safetensors", "r+b") as fh:
        fh.seek(header.data_offset + info.begin + 3)  # first tile is always checked
        byte = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([byte[0] ^ 0x01]))
    with pytest.raises(CheckFailed, match=f"{name}.*tile \\(0, 0\\)"):
        verify_output(plan, str(dst))


def test_verify_detects_missing_and_wrong_tensors(tmp_path):
    src = fp8_template()
    dst = tmp_path / "bf16"
    convert_checkpoint(src, str(dst))
    plan = plan_conversion(src)

    def drop_norm(tensors):
        tensors[:] = [t for t in tensors if t[0] != "model.norm.weight"]

    shard = json.loads((dst / INDEX).read_text())["weight_map"]["model.norm.weight"]
    rewrite_shard(str(dst), shard, drop_norm)
    with pytest.raises(CheckFailed, match=r"model\.norm\.weight"):
        verify_output(plan, str(dst))


def test_qwen3_4b_layout_counts():
    """The exact Qwen3-4B-FP8 layout (sparse files): 650 tensors in, 398 out, 8,044,936,192."""
    checkpoints = pytest.importorskip("ascend_sim.checkpoints")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        checkpoints.write_checkpoint(tmp + "/fp8", "qwen3-4b", data="sparse")
        plan = plan_conversion(tmp + "/fp8")
        assert plan.tensors_in == 650
        assert plan.tensors_out == 398
        assert plan.fp8_tensors == 252
        assert plan.total_size == 8_044_936_192
        assert conversion_status(tmp + "/fp8", tmp + "/out") == "needed"


def test_status_needs_only_the_standard_library(tmp_path):
    """conversion_status (Ansible check mode) works where numpy cannot be imported."""
    src = fp8_template()
    convert_checkpoint(src, str(tmp_path / "done"))
    code = (
        "import sys\n"
        "sys.modules['numpy'] = None\n"
        "sys.modules['ml_dtypes'] = None\n"
        "from ascend_deploy.fp8.convert import conversion_status, convert_checkpoint\n"
        "print(conversion_status(sys.argv[1], sys.argv[2]))\n"
        "print(conversion_status(sys.argv[1], sys.argv[3]))\n"
        "print(conversion_status(sys.argv[4], sys.argv[3]))\n"
        "try:\n"
        "    convert_checkpoint(sys.argv[1], sys.argv[3])\n"
        "except Exception as exc:\n"
        "    print(exc)\n"
    )
    args = [src, str(tmp_path / "done"), str(tmp_path / "new"), bf16_template()]
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:3] == ["up-to-date", "needed", "not-needed"]
    assert "pip install 'ascend-deploy[convert]'" in lines[3]
    assert not (tmp_path / "new").exists()


# CLI


def test_cli_json_result_and_progress_on_stderr(tmp_path, capsys):
    rc = main(["convert", fp8_template(), str(tmp_path / "out"), "--json", "--verify"])
    captured = capsys.readouterr()
    assert rc == 0
    doc = json.loads(captured.out)  # stdout is JSON only
    assert doc["status"] == "converted" and doc["tensors_out"] == 25 and doc["verified"]
    assert "convert: 100%" in captured.err  # periodic line (stderr is not a terminal)
    rc = main(["convert", fp8_template(), str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert rc == 0 and "already the BF16 conversion" in captured.out


def test_cli_human_output(tmp_path, capsys):
    rc = main(["convert", fp8_template(), str(tmp_path / "out"), "--no-progress", "--workers", "1"])
    captured = capsys.readouterr()
    assert rc == 0 and captured.err == ""
    assert "tensors: 39 in, 25 out (14 FP8 weights dequantized to BF16" in captured.out


def test_cli_errors_are_one_line_with_exit_2(tmp_path):
    cases = [
        [str(tmp_path / "missing"), str(tmp_path / "out")],
        [fp8_template(), str(tmp_path / "out"), "--workers", "0"],
    ]
    for args in cases:
        proc = subprocess.run(
            [sys.executable, "-m", "ascend_deploy.cli", "convert", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert proc.stderr.startswith("ascend-deploy convert: error: ")


def test_progress_lines_are_periodic(tmp_path):
    import io

    from ascend_deploy.fp8.progress import ProgressDisplay

    stream = io.StringIO()
    display = ProgressDisplay(stream=stream, tty=False, interval=0.0)
    display(0, 100)
    display(50, 100)
    display(100, 100)
    display(100, 100)  # after completion nothing more
    lines = stream.getvalue().splitlines()
    assert [line.split()[1] for line in lines] == ["0%", "50%", "100%"]
    stream = io.StringIO()
    display = ProgressDisplay(stream=stream, tty=True)
    display(25, 100)
    time.sleep(0.25)
    display(100, 100)
    text = stream.getvalue()
    assert text.startswith("\rconvert [") and "100.0%" in text and text.endswith("\n")
    # a small model in its own unit, not "0.00 GB of 0.00 GB" (issue 24)
    stream = io.StringIO()
    ProgressDisplay(stream=stream, tty=False, interval=0.0)(315_000, 630_702)
    assert "(315.00 kB of 630.70 kB," in stream.getvalue()


PEAK_RSS = """
import sys
from ascend_deploy.fp8.convert import convert_checkpoint
convert_checkpoint(sys.argv[1], sys.argv[2], workers=2)
with open("/proc/self/status") as fh:
    print(next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:")))
"""


def test_peak_memory_does_not_grow_with_model_size(tmp_path):
    """5x more layers (and FP8 bytes) must not raise the converter's peak RSS."""
    checkpoints = pytest.importorskip("ascend_sim.checkpoints")
    arch = dict(checkpoints.QWEN3_ARCHS["qwen3-0.6b"], vocab_size=1000)
    peaks = {}
    for layers in (2, 10):
        src = str(tmp_path / f"fp8-{layers}")
        checkpoints.write_checkpoint(src, arch, layers=layers, fp8=True, data="random")
        proc = subprocess.run(
            [sys.executable, "-c", PEAK_RSS, src, str(tmp_path / f"out-{layers}")],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        peaks[layers] = int(proc.stdout.strip()) * 1024
    plan = plan_conversion(str(tmp_path / "fp8-10"))
    out_bytes = sum(j.out_nbytes for s in plan.shards for j in s.jobs if j.scale is not None)
    assert out_bytes > 200 * 2**20  # the larger model writes > 200 MiB of dequantized BF16
    assert peaks[10] - peaks[2] < 16 * 2**20, peaks
    assert peaks[10] < 256 * 2**20, peaks  # interpreter + numpy + one tile row per worker
