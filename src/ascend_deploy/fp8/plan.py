"""Inspect a model directory and plan its FP8 -> BF16/FP16 conversion (standard library only).

Validates ``quantization_config`` and every FP8 weight / scale pair, and computes the
output headers, index and sizes without touching tensor data, so the Ansible check mode
can call it on a target without numpy.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from ..errors import InputError, shown
from ..model.files import (
    INDEX_NAME,
    MODELSLIM_DESCRIPTION,
    WeightLayout,
    load_config,
    read_weight_layout,
)
from ..model.safetensors_header import TensorInfo
from .files import other_files
from .numeric import DEFAULT_DTYPE, SCALE_DTYPES, output_dtype
from .safetensors_write import encode_header

SCALE_SUFFIX = "_scale_inv"


@dataclass
class TensorJob:
    """One output tensor: an FP8 weight to dequantize (``scale`` set), a BF16 tensor to
    round to F16 (``cast``, FP16 output only) or a copy."""

    shard: str
    src: TensorInfo
    out_dtype: str
    out_begin: int  # absolute offset in the output file
    out_nbytes: int
    scale: TensorInfo | None = None
    scale_shard: str | None = None

    @property
    def cast(self) -> bool:
        """A BF16 tensor that becomes F16 (FP16 output)."""
        return self.scale is None and self.src.dtype != self.out_dtype


@dataclass
class ShardPlan:
    name: str
    header: bytes  # the output header, length prefix included
    jobs: list[TensorJob]
    out_size: int


@dataclass
class ConversionPlan:
    """Everything needed to write the output; ``needed`` is False for BF16 input.

    ``dtype`` is the output's torch dtype name (bfloat16 or float16), ``out_dtype`` its
    safetensors name (BF16 or F16).
    """

    src_dir: str
    config: dict
    needed: bool
    dtype: str = DEFAULT_DTYPE
    layout: WeightLayout | None = None
    block: tuple[int, int] = (128, 128)
    shards: list[ShardPlan] = field(default_factory=list)
    weight_map: dict[str, str] = field(default_factory=dict)  # output tensor -> shard
    tensors_in: int = 0
    fp8_tensors: int = 0
    total_size: int = 0  # output tensor data bytes (index metadata.total_size)
    other_files: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # in a shard but not in the index

    @property
    def tensors_out(self) -> int:
        return len(self.weight_map)

    @property
    def source_files(self) -> list[str]:
        """Every source file the output depends on (relative names)."""
        names = ["config.json", *self.other_files]
        if self.layout is not None:
            names += self.layout.shards
            if self.layout.index is not None:
                names.append(INDEX_NAME)
        return sorted(set(names))

    @property
    def out_dtype(self) -> str:
        return output_dtype(self.dtype)

    @property
    def output_bytes(self) -> int:
        """Bytes of all output shards (headers included)."""
        return sum(s.out_size for s in self.shards)


def read_block_size(config_path: str, qc: dict) -> tuple[int, int]:
    """Validate ``quantization_config`` and return ``weight_block_size``."""
    method = qc.get("quant_method")
    if method == "compressed-tensors":
        raise InputError(
            f"{config_path}: quant_method 'compressed-tensors' (LLM-Compressor output) is not "
            "converted by this tool; vLLM-Ascend loads compressed-tensors checkpoints "
            "directly (no --quantization flag; W8A8 int8 schemes run on A2/A3, FP8 schemes "
            "need Ascend 950) - serve it as it is or start from the BF16 model"
        )
    if method != "fp8":
        raise InputError(
            f"{config_path}: unsupported quant_method {shown(method)}; this converter handles only "
            "block-wise FP8 (quant_method 'fp8', fmt 'e4m3', weight_block_size); serve other "
            "formats with their own vLLM-Ascend path or start from the BF16 model"
        )
    fmt = qc.get("fmt", "e4m3")
    if fmt != "e4m3":
        raise InputError(
            f"{config_path}: quantization_config fmt {shown(fmt)} is not supported; "
            "only e4m3 (float8_e4m3fn) block-FP8 checkpoints can be converted"
        )
    block = qc.get("weight_block_size")
    if (
        not isinstance(block, list)
        or len(block) != 2
        or not all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)
    ):
        raise InputError(
            f"{config_path}: quantization_config weight_block_size is {shown(block)}; expected two "
            "positive integers such as [128, 128] (per-tensor FP8 is not supported)"
        )
    return int(block[0]), int(block[1])


def plan_conversion(src_dir: str, dtype: str = DEFAULT_DTYPE) -> ConversionPlan:
    """Read config, index and shard headers of ``src_dir`` and plan the output.

    ``dtype``: bfloat16 (FP8 weights become BF16, everything else is copied) or float16
    (FP8 weights and BF16 tensors become F16; F16 and F32 tensors are copied). Raises
    InputError naming the file (and tensor) for every unsupported or broken input.
    """
    out = output_dtype(dtype)
    config = load_config(src_dir)
    config_path = os.path.join(src_dir, "config.json")
    if os.path.exists(os.path.join(src_dir, MODELSLIM_DESCRIPTION)):
        raise InputError(
            f"{os.path.join(src_dir, MODELSLIM_DESCRIPTION)}: this is a ModelSlim-quantized "
            "checkpoint for Ascend; do not convert it - serve it with vllm --quantization "
            "ascend (detected automatically since vllm-ascend v0.17.0rc1)"
        )
    qc = config.get("quantization_config")
    if qc is not None and not isinstance(qc, dict):
        raise InputError(f"{config_path}: quantization_config must be an object, got {shown(qc)}")
    layout = read_weight_layout(src_dir)
    fp8_names = [n for n, s in layout.weight_map.items() if _dtype(layout, n, s).startswith("F8")]
    if not qc:
        if fp8_names:
            raise InputError(
                f"{os.path.join(src_dir, layout.weight_map[fp8_names[0]])}: tensor "
                f"{shown(fp8_names[0])} is FP8 but {config_path} has no quantization_config; "
                "the checkpoint is incomplete - download config.json again"
            )
        return ConversionPlan(src_dir, config, needed=False, layout=layout, dtype=dtype)
    block = read_block_size(config_path, qc)
    if not fp8_names:
        raise InputError(
            f"{config_path}: quantization_config says fp8 but no tensor is F8_E4M3; "
            "the weights do not match the config"
        )
    plan = ConversionPlan(src_dir, config, needed=True, layout=layout, block=block, dtype=dtype)
    plan.tensors_in = len(layout.weight_map)
    scales = _pair_scales(layout, block)
    plan.fp8_tensors = len(scales)
    scale_names = {info.name for info, _ in scales.values()}
    for shard in layout.shards:
        header = layout.headers[shard]
        entries = []
        pending = []
        for info in header.tensors.values():
            if layout.weight_map.get(info.name) != shard:
                plan.ignored.append(f"{shard}:{info.name}")
                continue
            if info.name in scale_names:
                continue
            pair = scales.get(info.name)
            # FP8 weights become the output dtype; so do BF16 tensors of an FP16 output.
            rounded = pair or (out == "F16" and info.dtype == "BF16")
            out_dtype = out if rounded else info.dtype
            entries.append((info.name, out_dtype, info.shape))
            pending.append((info, out_dtype, pair))
        head, offsets = encode_header(entries, header.metadata or {"format": "pt"})
        jobs = []
        for info, out_dtype, pair in pending:
            begin, end = offsets[info.name]
            job = TensorJob(shard, info, out_dtype, len(head) + begin, end - begin)
            if pair:
                job.scale, job.scale_shard = pair
            jobs.append(job)
            plan.total_size += end - begin
        if not jobs:
            continue  # a shard that held only scales: nothing left to write
        size = len(head) + max(e for _, e in offsets.values())
        plan.shards.append(ShardPlan(shard, head, jobs, size))
    for name, shard in layout.weight_map.items():
        if name not in scale_names:
            plan.weight_map[name] = shard
    plan.other_files = other_files(src_dir, layout.shards)
    return plan


def _dtype(layout: WeightLayout, name: str, shard: str) -> str:
    return layout.headers[shard].tensors[name].dtype


def _pair_scales(layout: WeightLayout, block: tuple[int, int]) -> dict[str, tuple[TensorInfo, str]]:
    """Map every FP8 weight to its checked ``<name>_scale_inv`` (info, shard)."""
    pairs: dict[str, tuple[TensorInfo, str]] = {}
    for name, shard in layout.weight_map.items():
        info = layout.headers[shard].tensors[name]
        where = f"{os.path.join(layout.model_dir, shard)}: tensor {shown(name)}"
        if name.endswith(SCALE_SUFFIX):
            base = name[: -len(SCALE_SUFFIX)]
            base_shard = layout.weight_map.get(base)
            if base_shard is None or _dtype(layout, base, base_shard) != "F8_E4M3":
                raise InputError(
                    f"{where}: scale tensor without an F8_E4M3 weight {shown(base)}; "
                    "the checkpoint is inconsistent"
                )
            continue
        if info.dtype == "F8_E5M2":
            raise InputError(f"{where}: dtype F8_E5M2 is not supported (fmt e4m3 expected)")
        if info.dtype != "F8_E4M3":
            continue
        if len(info.shape) != 2:
            raise InputError(
                f"{where}: FP8 weight of shape {list(info.shape)}; block dequantization "
                "needs a 2-D [out, in] matrix"
            )
        scale_name = name + SCALE_SUFFIX
        scale_shard = layout.weight_map.get(scale_name)
        if scale_shard is None:
            raise InputError(
                f"{where}: FP8 weight has no scale tensor {shown(scale_name)}; refusing to convert "
                "(raw FP8 values without their scales give garbage) - download the model again"
            )
        scale = layout.headers[scale_shard].tensors[scale_name]
        swhere = f"{os.path.join(layout.model_dir, scale_shard)}: tensor {shown(scale_name)}"
        if scale.dtype not in SCALE_DTYPES:
            raise InputError(
                f"{swhere}: scale dtype {scale.dtype} is not supported "
                f"(expected one of {', '.join(SCALE_DTYPES)})"
            )
        rows, cols = info.shape
        grid = (math.ceil(rows / block[0]), math.ceil(cols / block[1]))
        if tuple(scale.shape) != grid:
            raise InputError(
                f"{swhere}: scale shape {list(scale.shape)} does not match weight shape "
                f"{[rows, cols]} with weight_block_size {list(block)} (expected {list(grid)})"
            )
        pairs[name] = (scale, scale_shard)
    return pairs
