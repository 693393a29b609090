"""Precision alignment: a real (tiny) Qwen3 model through quantize -> convert -> transformers.

A Qwen3ForCausalLM with linear dimensions that are not multiples of 128 (partial tiles) is
saved in BF16, quantized to block FP8 in the published format (``quantize_checkpoint``),
converted with ``convert_checkpoint`` and loaded with transformers. Checks:

1. the converted weights and logits equal those of the model whose weights were
   dequantized with the straightforward torch reference, bit for bit;
2. the logits stay close to the original BF16 model, within bounds derived from the FP8
   rounding error (printed with ``-s``).

Needs torch and transformers (the ``train`` extra); skipped without them.
"""

from __future__ import annotations

import math
import os

import pytest

torch = pytest.importorskip("torch", reason="precision alignment needs torch (CPU build)")
transformers = pytest.importorskip("transformers", reason="precision alignment needs transformers")
safetensors_torch = pytest.importorskip("safetensors.torch", reason="needs safetensors")
pytest.importorskip("ml_dtypes", reason="the converter needs ml_dtypes")

from ascend_deploy.fp8.convert import convert_checkpoint  # noqa: E402
from ascend_deploy.fp8.quantize import quantize_checkpoint  # noqa: E402

LAYERS = 2
# hidden 200, intermediate 328, q 4x48=192, kv 2x48=96: every projection has edge tiles.
CONFIG = {
    "hidden_size": 200,
    "intermediate_size": 328,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 48,
    "num_hidden_layers": LAYERS,
    "vocab_size": 384,
    "max_position_embeddings": 128,
    "tie_word_embeddings": True,
}
# e4m3 keeps 3 mantissa bits; round-to-nearest moves a normal value by at most half a
# step: |dw| <= 2**-4 |w|. Values below the tile's normal range (|w| < 2**-6 * 448 * s)
# have an absolute error <= 2**-10 * s, which is even smaller than 2**-4 of the tile amax.
FP8_REL_STEP = 2.0**-4


def load_tensors(model_dir: str) -> dict:
    out = {}
    for name in sorted(os.listdir(model_dir)):
        if name.endswith(".safetensors"):
            out.update(safetensors_torch.load_file(os.path.join(model_dir, name)))
    return out


def torch_dequantize(state: dict, block=(128, 128)) -> dict:
    """The straightforward reference: (w.float() * scale_expanded).bfloat16()."""
    out = {}
    for name, t in state.items():
        if name.endswith("_scale_inv"):
            continue
        if t.dtype == torch.float8_e4m3fn:
            s = state[name + "_scale_inv"].to(torch.float32)
            rows, cols = t.shape
            s = s.repeat_interleave(block[0], 0).repeat_interleave(block[1], 1)[:rows, :cols]
            t = (t.to(torch.float32) * s).to(torch.bfloat16)
        out[name] = t
    return out


def load_model(model_dir: str):
    model = transformers.Qwen3ForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    return model.eval()


def logits_of(model, ids) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits.to(torch.float32)


def test_converted_model_matches_reference_and_stays_close_to_bf16(tmp_path):
    torch.manual_seed(0)
    config = transformers.Qwen3Config(**CONFIG)
    transformers.Qwen3ForCausalLM(config).to(torch.bfloat16).save_pretrained(str(tmp_path / "bf16"))
    bf16_dir, fp8_dir, out_dir = (str(tmp_path / n) for n in ("bf16", "fp8", "out"))
    quantize_checkpoint(bf16_dir, fp8_dir, scale_dtype="BF16")
    result = convert_checkpoint(fp8_dir, out_dir, verify=True)
    assert result["status"] == "converted" and result["fp8_tensors"] == 7 * LAYERS

    # All three models come from from_pretrained so that they differ only in their
    # weights (constructing one directly would, e.g., keep rotary buffers in another dtype).
    converted = load_model(out_dir)
    reference = load_model(bf16_dir)
    missing, unexpected = reference.load_state_dict(
        torch_dequantize(load_tensors(fp8_dir)), strict=False
    )
    assert not unexpected and all(k == "lm_head.weight" for k in missing)  # tied
    reference.tie_weights()
    original = load_model(bf16_dir)

    conv_state, ref_state = converted.state_dict(), reference.state_dict()
    assert set(conv_state) == set(ref_state)
    for name, value in ref_state.items():
        assert value.dtype == torch.bfloat16
        assert torch.equal(conv_state[name].view(torch.int16), value.view(torch.int16)), name

    ids = torch.randint(
        0, CONFIG["vocab_size"], (2, 24), generator=torch.Generator().manual_seed(1)
    )
    conv_logits = logits_of(converted, ids)
    ref_logits = logits_of(reference, ids)
    assert torch.equal(conv_logits, ref_logits)  # bit-identical logits

    # Against the original BF16 model, computed in float32 so only the weights differ.
    orig_logits = logits_of(original.float(), ids)
    conv32 = logits_of(converted.float(), ids)
    diff = conv32 - orig_logits
    rel = (diff.norm() / orig_logits.norm()).item()
    cosine = torch.nn.functional.cosine_similarity(
        conv32.flatten(), orig_logits.flatten(), dim=0
    ).item()
    max_abs = diff.abs().max().item()
    weight_rel = max(
        ((conv_state[n].float() - w.float()).norm() / w.float().norm()).item()
        for n, w in original.state_dict().items()
        if n.endswith("_proj.weight")
    )
    # Bound: every quantized weight is within FP8_REL_STEP of the original (relative, per
    # element), so each projection's output error is at most FP8_REL_STEP relative, and
    # errors of the k projections on the path from embeddings to logits (q/k/v -> o and
    # gate/up -> down per layer: 4 sequential stages per layer) add at most linearly
    # to first order; being independent rounding errors they add in quadrature.
    stages = 4 * LAYERS
    print(
        f"\nFP8 round trip vs original BF16: logits cosine {cosine:.6f}, relative L2 "
        f"{rel:.4f}, max |diff| {max_abs:.4f} (logit scale {orig_logits.abs().max():.3f}); "
        f"worst weight relative error {weight_rel:.4f}"
    )
    assert weight_rel <= FP8_REL_STEP
    assert rel <= FP8_REL_STEP * math.sqrt(stages)
    assert cosine >= 1 - (FP8_REL_STEP * math.sqrt(stages)) ** 2 / 2
    assert max_abs <= FP8_REL_STEP * stages * orig_logits.abs().max().item()
    assert rel > 0  # the conversion is not the identity: FP8 really lost precision
