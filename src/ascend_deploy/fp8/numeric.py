"""Lazy access to numpy and ml_dtypes (the ``convert`` extra)."""

from __future__ import annotations

from typing import Any

from ..errors import AscendDeployError


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
