"""Lazy access to numpy and ml_dtypes (the ``convert`` extra)."""

from __future__ import annotations

from typing import Any

from ..errors import AscendDeployError, InputError, shown


def numpy_modules() -> tuple[Any, Any]:
    """Return ``(numpy, ml_dtypes)`` or raise an operator error saying what to install."""
    try:
        import ml_dtypes
        import numpy
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise AscendDeployError(
            f"FP8 conversion needs numpy and ml_dtypes ({exc}); "
            "install them with: pip install 'ascend-deploy[convert]'"
        ) from None
    return numpy, ml_dtypes


# Scale dtypes found in published block-FP8 checkpoints (sources in docs/sources.md):
# F32 (DeepSeek-V3), BF16 (Qwen3 dense FP8), F16 (some Qwen3-2507 FP8 tensors).
SCALE_DTYPES = ("F32", "BF16", "F16")

# Output dtypes of the conversion (torch name, as in config.json and ``vllm --dtype``) and
# their safetensors names. bfloat16 is the default; float16 is for Atlas 300I Duo (310P),
# which has no BF16 (vllm-ascend's 310P guide serves with --dtype float16).
OUTPUT_DTYPES = {"bfloat16": "BF16", "float16": "F16"}
DEFAULT_DTYPE = "bfloat16"
# Label of each output dtype in operator messages.
DTYPE_LABELS = {"BF16": "BF16", "F16": "FP16"}
F16_MAX = 65504.0  # largest finite IEEE binary16 value; |x| >= 65520 rounds to infinity


def conversion_dtype(requested: str, hardware: dict | None) -> str:
    """The output dtype (torch name) for ``requested`` (auto, bfloat16 or float16).

    ``auto`` takes the dtype the serving rules give the hardware entry ``hardware``
    (serve_rules.json: float16 for 310P, whose vLLM runs with ``--dtype float16``), and
    bfloat16 where they give none or no hardware is known.
    """
    if requested == "auto":
        wanted = (hardware or {}).get("dtype")
        return wanted if wanted in OUTPUT_DTYPES else DEFAULT_DTYPE
    output_dtype(requested)
    return requested


def output_dtype(dtype: str | None) -> str:
    """The safetensors name (BF16 or F16) for an output dtype given by its torch name."""
    name = DEFAULT_DTYPE if dtype is None else dtype
    if name not in OUTPUT_DTYPES:
        raise InputError(
            f"output dtype {shown(dtype)} is not supported; choose one of "
            f"{', '.join(OUTPUT_DTYPES)} (float16 for 310P, which has no BF16)"
        )
    return OUTPUT_DTYPES[name]


def np_dtype(name: str) -> Any:
    """The numpy dtype for a safetensors dtype name used by this package."""
    np, ml = numpy_modules()
    table = {
        "F32": np.dtype("<f4"),
        "F16": np.dtype("<f2"),
        "BF16": np.dtype(ml.bfloat16),
        "F8_E4M3": np.dtype(ml.float8_e4m3fn),
        "F64": np.dtype("<f8"),
        "U8": np.dtype("u1"),
    }
    return table[name]
