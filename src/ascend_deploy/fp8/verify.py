"""Re-read a converted checkpoint and check it against its FP8 source.

Structure: every expected tensor is present with the source shape and the expected dtype
(BF16 - or F16 for an FP16 output - for dequantized weights; F16 for BF16 tensors of an
FP16 output; unchanged otherwise), no FP8 or scale tensor remains, the index matches the
shard headers and ``total_size``, and ``config.json`` has no ``quantization_config`` and
names the output dtype. Data: a sample of tiles of every FP8 weight (first, last edge
tile and a few random ones) is dequantized again with the straightforward path
(``reference_dequantize``: float32 product rounded to BF16, or the exact float64 product
rounded once to F16; independent of the converter's table path) and compared bit for
bit; sampled byte ranges of every copied tensor are compared with the source, and of
every BF16 tensor rounded to F16 with the source rounded again.
"""

from __future__ import annotations

import math
import os
import random
from typing import Any

from ..errors import CheckFailed, InputError, shown
from ..model.files import INDEX_NAME, load_config, read_weight_layout
from .dequant import bf16_to_f16_bits, reference_dequantize, scales_to_f32
from .numeric import numpy_modules
from .plan import SCALE_SUFFIX, ConversionPlan, TensorJob

COPY_WINDOW = 64 << 10  # bytes compared per sampled range of a copied tensor


def verify_output(plan: ConversionPlan, out_dir: str, tiles: int = 3, seed: int = 0) -> dict:
    """Check ``out_dir`` against ``plan``; CheckFailed names the file, tensor and problem.

    ``tiles`` random tiles per FP8 weight are checked besides the first and the last.
    Returns counts of what was checked.
    """
    np, _ = numpy_modules()
    try:
        out = read_weight_layout(out_dir)
        config = load_config(out_dir)
    except InputError as exc:
        raise CheckFailed(f"verification failed: {exc}") from None
    config_path = os.path.join(out_dir, "config.json")
    if "quantization_config" in config:
        raise CheckFailed(f"{config_path}: still has quantization_config")
    for key in ("torch_dtype", "dtype"):
        if key in config and config[key] != plan.dtype:
            raise CheckFailed(
                f"{config_path}: {key} is {shown(config[key])}, expected {shown(plan.dtype)}"
            )
    expected = {j.src.name: j for s in plan.shards for j in s.jobs}
    found = dict(out.weight_map)
    for shard, header in out.headers.items():
        for name in header.tensors:
            if out.weight_map.get(name) != shard:
                raise CheckFailed(
                    f"{os.path.join(out_dir, shard)}: tensor {shown(name)} is not mapped to this "
                    f"shard in {INDEX_NAME}"
                )
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    if missing or extra:
        raise CheckFailed(
            f"{out_dir}: tensor names differ from the source: missing {missing[:5]}, "
            f"unexpected {extra[:5]}"
        )
    if out.index is not None:
        total = (out.index.get("metadata") or {}).get("total_size")
        if total != out.total_bytes:
            raise CheckFailed(
                f"{os.path.join(out_dir, INDEX_NAME)}: metadata.total_size is {total}, "
                f"the shards hold {out.total_bytes} tensor bytes"
            )
    rng = random.Random(seed)
    counts = {"tensors": 0, "tiles": 0, "copied_ranges": 0}
    for name, job in expected.items():
        info = out.tensor(name)
        where = f"{os.path.join(out_dir, out.weight_map[name])}: tensor {shown(name)}"
        if info.shape != job.src.shape or info.dtype != job.out_dtype:
            raise CheckFailed(
                f"{where}: is {info.dtype} {list(info.shape)}, expected "
                f"{job.out_dtype} {list(job.src.shape)}"
            )
        if info.dtype.startswith("F8") or name.endswith(SCALE_SUFFIX):
            raise CheckFailed(f"{where}: FP8 or scale tensor left in the output")
        out_path = os.path.join(out_dir, out.weight_map[name])
        out_off = out.headers[out.weight_map[name]].data_offset + info.begin
        if job.cast:
            counts["copied_ranges"] += _check_cast(plan, job, out_path, out_off, rng, where, np)
        elif job.scale is None:
            counts["copied_ranges"] += _check_copy(plan, job, out_path, out_off, rng, where)
        else:
            counts["tiles"] += _check_tiles(plan, job, out_path, out_off, tiles, rng, where, np)
        counts["tensors"] += 1
    return counts


def _read(path: str, offset: int, n: int) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read(n)
    if len(data) != n:
        raise CheckFailed(f"{path}: truncated (cannot read {n} bytes at {offset})")
    return data


def _src_offset(plan: ConversionPlan, shard: str, begin: int) -> int:
    return plan.layout.headers[shard].data_offset + begin


def _sample_starts(n: int, width: int, rng: random.Random) -> tuple[list[int], int]:
    """Where to compare ``width`` units of an ``n``-unit range: all of it when short, else the
    start, the end and one random place; returns the starts and the width actually read."""
    if n <= 3 * width:
        return [0], n
    return [0, n - width, rng.randrange(0, n - width)], width


def _check_copy(
    plan: ConversionPlan,
    job: TensorJob,
    out_path: str,
    out_off: int,
    rng: random.Random,
    where: str,
) -> int:
    n = job.src.nbytes
    src_path = os.path.join(plan.src_dir, job.shard)
    src_off = _src_offset(plan, job.shard, job.src.begin)
    starts, width = _sample_starts(n, COPY_WINDOW, rng)
    for start in starts:
        if _read(src_path, src_off + start, width) != _read(out_path, out_off + start, width):
            raise CheckFailed(
                f"{where}: bytes {start}-{start + width} differ from the source; "
                "the output is corrupt - convert again"
            )
    return len(starts)


def _check_cast(
    plan: ConversionPlan,
    job: TensorJob,
    out_path: str,
    out_off: int,
    rng: random.Random,
    where: str,
    np: Any,
) -> int:
    """Sampled ranges of a BF16 tensor rounded to F16: equal to the source rounded again."""
    n = job.src.numel
    src_path = os.path.join(plan.src_dir, job.shard)
    src_off = _src_offset(plan, job.shard, job.src.begin)
    starts, width = _sample_starts(n, COPY_WINDOW // 2, rng)  # elements
    for start in starts:
        src = np.frombuffer(_read(src_path, src_off + start * 2, width * 2), np.dtype("<u2"))
        got = np.frombuffer(_read(out_path, out_off + start * 2, width * 2), np.dtype("<u2"))
        if not np.array_equal(bf16_to_f16_bits(src), got):
            raise CheckFailed(
                f"{where}: elements {start}-{start + width} differ from the source rounded to "
                "float16; the output is corrupt - convert again"
            )
    return len(starts)


def _check_tiles(
    plan: ConversionPlan,
    job: TensorJob,
    out_path: str,
    out_off: int,
    tiles: int,
    rng: random.Random,
    where: str,
    np: Any,
) -> int:
    bm, bn = plan.block
    rows, cols = job.src.shape
    gr, gc = math.ceil(rows / bm), math.ceil(cols / bn)
    scale = job.scale
    scale_raw = _read(
        os.path.join(plan.src_dir, job.scale_shard),
        _src_offset(plan, job.scale_shard, scale.begin),
        scale.nbytes,
    )
    scales = scales_to_f32(scale_raw, scale.dtype, scale.shape)
    chosen = {(0, 0), (gr - 1, gc - 1)}
    chosen.update((rng.randrange(gr), rng.randrange(gc)) for _ in range(tiles))
    src_path = os.path.join(plan.src_dir, job.shard)
    src_off = _src_offset(plan, job.shard, job.src.begin)
    with open(src_path, "rb") as fsrc, open(out_path, "rb") as fout:
        for i, j in sorted(chosen):
            r0, r1 = i * bm, min(rows, (i + 1) * bm)
            c0, c1 = j * bn, min(cols, (j + 1) * bn)
            width = c1 - c0
            codes = np.empty((r1 - r0, width), dtype=np.uint8)
            got = np.empty((r1 - r0, width), dtype=np.uint16)
            for r in range(r0, r1):
                raw = os.pread(fsrc.fileno(), width, src_off + r * cols + c0)
                out = os.pread(fout.fileno(), width * 2, out_off + (r * cols + c0) * 2)
                if len(raw) != width or len(out) != width * 2:
                    raise CheckFailed(f"{where}: data ends early (row {r}); the file is truncated")
                codes[r - r0] = np.frombuffer(raw, np.uint8)
                got[r - r0] = np.frombuffer(out, np.dtype("<u2"))
            want = reference_dequantize(
                codes, scales[i : i + 1, j : j + 1], (bm, bn), plan.out_dtype
            )
            if not np.array_equal(want, got):
                bad = int(np.count_nonzero(want != got))
                raise CheckFailed(
                    f"{where}: tile ({i}, {j}) has {bad} values that differ from the source "
                    "dequantized independently; the output is corrupt - convert again"
                )
            exponent = 0x7C00 if plan.out_dtype == "F16" else 0x7F80
            if np.any((got & exponent) == exponent):
                raise CheckFailed(f"{where}: tile ({i}, {j}) contains NaN or infinity")
    return len(chosen)
