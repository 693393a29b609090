"""Load the numpy engine and tokenizer for a deployment, including the mis-loaded cases.

When start-up decided that the weights are loaded through the wrong path (pitfall 7 on
releases without the ModelSlim check: float weights copied into the W8A8 method's int8
parameters), the emulator loads a copy in which every linear projection was truncated to
int8 the way ``torch.Tensor.copy_`` into an int8 parameter does. The forward pass is then
real and its answers are garbage, as on the NPU.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile

from ascend_deploy.errors import InputError
from ascend_deploy.model.files import read_weight_layout

LINEAR_RE = re.compile(r"\.(q|k|v|o|gate|up|down)_proj\.weight$")
# A copy is made only for checkpoints this small; bigger ones (sparse test layouts) are
# served as they are (their answers are meaningless anyway).
MAX_COPY_BYTES = 512 * 1024 * 1024


def _to_f32(raw, dtype: str):
    import numpy as np

    if dtype == "BF16":
        return (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
    if dtype == "F16":
        return np.frombuffer(raw, dtype=np.float16).astype(np.float32)
    return np.frombuffer(raw, dtype=np.float32).copy()


def _from_f32(values, dtype: str) -> bytes:
    import numpy as np

    if dtype == "BF16":
        # Integers in [-128, 127] are exact in BF16, so dropping the low half is exact.
        return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    if dtype == "F16":
        return values.astype(np.float16).tobytes()
    return values.astype(np.float32).tobytes()


def int8_truncated_copy(src: str, dst: str) -> int:
    """Copy ``src`` to ``dst`` with the linear weights truncated to int8 values; returns count."""
    import numpy as np

    layout = read_weight_layout(src)
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        p = os.path.join(src, name)
        if os.path.isfile(p):
            shutil.copyfile(p, os.path.join(dst, name))
    changed = 0
    for shard in layout.shards:
        header = layout.headers[shard]
        with open(os.path.join(dst, shard), "r+b") as fh:
            for info in header.tensors.values():
                if not LINEAR_RE.search(info.name) or info.dtype not in ("BF16", "F16", "F32"):
                    continue
                fh.seek(header.data_offset + info.begin)
                raw = fh.read(info.nbytes)
                vals = np.clip(np.trunc(_to_f32(raw, info.dtype)), -128, 127)
                fh.seek(header.data_offset + info.begin)
                fh.write(_from_f32(vals, info.dtype))
                changed += 1
    return changed


class LoadedModel:
    """Tokenizer + engine model, with the directory actually loaded."""

    def __init__(
        self, model_dir: str, garbage_reason: str | None = None, quantization: str | None = None
    ):
        try:
            from ascend_sim.engine import load_model
            from ascend_sim.tokenizer import load_tokenizer
        except ImportError as exc:
            raise InputError(f"the numpy engine is not installed ({exc})") from None
        self.source_dir = model_dir
        self.loaded_dir = model_dir
        self._tmp: str | None = None
        if garbage_reason:
            layout = read_weight_layout(model_dir)
            if layout.total_bytes <= MAX_COPY_BYTES:
                self._tmp = tempfile.mkdtemp(prefix="vllm-emulator-w8a8-")
                int8_truncated_copy(model_dir, self._tmp)
                self.loaded_dir = self._tmp
        self.tokenizer = load_tokenizer(model_dir)
        # ModelSlim W8A8 checkpoints run their int8 projections (--quantization ascend).
        w8a8 = quantization == "ascend" and not garbage_reason
        self.model = load_model(self.loaded_dir, "ascend" if w8a8 else None)

    def close(self) -> None:
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
