"""Make tests/data/tiny-qwen3-w8a8: the trained tiny model as a ModelSlim W8A8 checkpoint.

The FP8 test model is converted to BF16 with the bundle's converter, then quantized by
``ascend_sim.checkpoints.write_modelslim_w8a8`` with the verification questions (in Qwen3's
chat format) as calibration prompts. Deterministic on one machine. On another processor the
BLAS kernel moves the calibration's float32 sums in their last bits; only the BF16 input scales
and integer input offsets are rounded from those sums (deq_scale and quant_bias are derived from
the stored values), so a value changes only where it sits on a rounding step.
tests/unit/fp8/test_modelslim_w8a8.py regenerates it with this machine's kernel and a generic one
and compares with ``ascend_sim.checkpoints.w8a8_differences`` (everything else byte for byte).

    .venv/bin/python tools/make_tiny_w8a8.py --out tests/data/tiny-qwen3-w8a8
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "src"))

from ascend_deploy.fp8.convert import convert_checkpoint  # noqa: E402
from ascend_sim.checkpoints import write_modelslim_w8a8  # noqa: E402
from ascend_sim.tokenizer import load_tokenizer  # noqa: E402

README = """# tiny-qwen3-w8a8

The tiny test model of `../tiny-qwen3-fp8` as a ModelSlim (msModelSlim) static W8A8
checkpoint, served by vLLM-Ascend with `--quantization ascend` (detected automatically from
v0.17.0rc1). Made by `tools/make_tiny_w8a8.py` (FP8 -> BF16 with `ascend-deploy convert`,
then `ascend_sim.checkpoints.write_modelslim_w8a8`, calibrated on the verification questions).

* `quant_model_weight_w8a8.safetensors`: q/k/v/gate/up projections as int8 `weight` [out, in]
  (per-channel symmetric) with `weight_scale`, `weight_offset` [out, 1], `input_scale`,
  `input_offset` [1] (static per-tensor activations), `deq_scale` F32 [out] (the stored
  `input_scale` x `weight_scale`) and `quant_bias` I32 [out] (-`input_offset` x the row's
  int8 sum); o_proj, down_proj, norms and embeddings stay BF16 ("FLOAT").
* `quant_model_description.json`: `model_quant_type` W8A8 and every tensor's type.
* `config.json`: the BF16 model's (ModelSlim adds no `quantization_config`).

The emulator computes the quantized projections as `npu_quant_matmul` does and answers all
27 verification questions; loaded as float (no flag, no auto-detection) it stops with
`KeyError: 'layers.0.mlp.gate_up_proj.deq_scale'`.
"""


def make(fp8_dir: str, questions: str, out_dir: str) -> dict:
    """Convert ``fp8_dir`` to BF16 in a temporary directory and quantize it into ``out_dir``."""
    with open(questions, encoding="utf-8") as fh:
        suite = json.load(fh)
    with tempfile.TemporaryDirectory(prefix="tiny-w8a8-") as tmp:
        bf16 = os.path.join(tmp, "bf16")
        convert_checkpoint(fp8_dir, bf16)
        tok = load_tokenizer(bf16)
        prompts = [
            tok.apply_chat_template(q["messages"], True, q.get("enable_thinking", True))
            for q in suite
        ]
        summary = write_modelslim_w8a8(bf16, out_dir, prompts)
    with open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8") as fh:
        fh.write(README)
    return summary


def cli(make_fn: Callable[[str, str, str], dict], doc: str) -> int:
    """The command line of the tiny-model tools: ``--src``, ``--questions``, ``--out``."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--src", default=os.path.join(ROOT, "tests/data/tiny-qwen3-fp8"))
    ap.add_argument(
        "--questions", default=os.path.join(ROOT, "tests/data/verification-questions.json")
    )
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    print(json.dumps(make_fn(args.src, args.questions, args.out)))
    return 0


def main() -> int:
    return cli(make, __doc__ or "")


if __name__ == "__main__":
    raise SystemExit(main())
