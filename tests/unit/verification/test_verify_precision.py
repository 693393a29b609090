"""``verify --reference-model``: top-5 logprobs and KL against the CPU reference (issue 13 §5).

The trained tiny model is confident (top-1 margin about 14 nats), so its top token's logprob is
~0 whatever the other tokens do: comparing only that number cannot fail. Here one weight tensor
of the served copy is halved; the top-1 tokens still agree and the top-1 logprobs still match,
but the top-5 distributions move far outside the BF16 tolerance, so the check fails; the
unmodified copy, served by the same emulated engine, passes.
"""

from __future__ import annotations

import math
import os
import shutil

import pytest
from conftest import DATA

from ascend_deploy.verification.http_client import Client
from ascend_deploy.verification.precision import (
    BF16_UNIT_ROUNDOFF,
    bf16_tolerances,
    compare_logprobs,
    compare_top,
    judge,
)
from ascend_sim.vllm_emulator.sandbox import Emulator, emulator_env, make_root, write_row

TINY_FP8 = str(DATA / "tiny-qwen3-fp8")
PERTURBED = "model.layers.1.mlp.down_proj.weight"


def test_tolerances_follow_bf16_rounding():
    lp, kl = bf16_tolerances(16.0, 2)
    eps = 2.0**-8 * math.sqrt(5) * 16.0
    assert BF16_UNIT_ROUNDOFF == 2.0**-8
    assert lp == pytest.approx(2 * eps) and kl == pytest.approx(2 * eps * eps)
    # Deeper models and larger logits get wider tolerances.
    assert bf16_tolerances(16.0, 36)[0] > lp and bf16_tolerances(32.0, 2)[0] == pytest.approx(
        2 * lp
    )


def test_kl_over_top_k_and_rest_bucket():
    ref = [("a", math.log(0.5)), ("b", math.log(0.3)), ("c", math.log(0.1))]
    same = compare_top(ref, {"a": math.log(0.5), "b": math.log(0.3), "c": math.log(0.1)})
    assert same["kl"] == pytest.approx(0, abs=1e-12) and same["abs_diff"] < 1e-12
    swapped = compare_top(ref, {"a": math.log(0.3), "b": math.log(0.5), "c": math.log(0.1)})
    expect = 0.5 * math.log(0.5 / 0.3) + 0.3 * math.log(0.3 / 0.5)
    assert swapped["kl"] == pytest.approx(expect)
    assert swapped["abs_diff"] == pytest.approx(math.log(0.5 / 0.3))
    assert not swapped["top1_agree"]
    # A reference token the service does not rank gets the service's lowest logprob.
    missing = compare_top(ref, {"a": math.log(0.5), "b": math.log(0.3), "x": math.log(0.05)})
    assert missing["abs_diff"] == pytest.approx(math.log(0.1 / 0.05))
    assert missing["in_served_top"] == 2


def _row(prompt, abs_diff, kl, top1, margin, lp_tol=0.3, kl_tol=0.05):
    return {"prompt": prompt, "abs_diff": abs_diff, "kl": kl, "top1_agree": top1,
            "reference_margin": margin, "lp_tolerance": lp_tol, "kl_tolerance": kl_tol}  # fmt: skip


def test_judge_allows_a_top1_flip_only_within_the_tolerance():
    near_tie = judge([_row("tie", 0.1, 0.001, False, 0.05)])
    assert near_tie["ok"]
    clear_flip = judge([_row("flip", 0.1, 0.001, False, 2.0)])
    assert not clear_flip["ok"] and clear_flip["failed_prompts"] == ["flip"]
    too_far = judge([_row("a", 0.1, 0.001, True, 9.0), _row("b", 0.4, 0.001, True, 9.0)])
    assert not too_far["ok"] and too_far["failed_prompts"] == ["b"]
    assert judge([_row("b", 0.4, 0.001, True, 9.0)], tolerance=0.5)["ok"]
    assert not judge([_row("kl", 0.1, 0.2, True, 9.0)])["ok"]


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    """The tiny model converted to BF16 (the reference and the served copy) and a copy of it
    with one weight tensor halved."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    storch = pytest.importorskip("safetensors.torch")
    from ascend_deploy.fp8.convert import convert_checkpoint

    root = tmp_path_factory.mktemp("precision")
    ref = str(root / "qwen3-tiny")
    convert_checkpoint(TINY_FP8, ref)
    bad = str(root / "qwen3-tiny-perturbed")
    shutil.copytree(ref, bad)
    changed = 0
    for name in sorted(os.listdir(bad)):
        if not name.endswith(".safetensors"):
            continue
        tensors = storch.load_file(os.path.join(bad, name))
        if PERTURBED in tensors:
            tensors[PERTURBED] = (tensors[PERTURBED].to(torch.float32) * 0.5).to(torch.bfloat16)
            storch.save_file(tensors, os.path.join(bad, name), metadata={"format": "pt"})
            changed += 1
    assert changed == 1
    return ref, bad


def served_comparison(tmp_path, served: str, reference: str) -> dict:
    root = make_root(str(tmp_path / "root"))
    env = emulator_env(root, write_row(str(tmp_path / "row.json"), "v0.23.0"))
    args = [served, "--host", "127.0.0.1", "--port", "0", "--served-model-name", "qwen3-tiny",
            "--enforce-eager", "--max-model-len", "2048"]  # fmt: skip
    with Emulator(args, env).start() as emu:
        assert emu.ready, emu.output()
        return compare_logprobs(Client(emu.url, timeout=60), "qwen3-tiny", reference)


def test_served_copy_passes_and_one_perturbed_weight_fails(tmp_path, copies):
    ref, bad = copies
    good = served_comparison(tmp_path / "good", ref, ref)
    assert good["ok"], good
    assert good["prompts"] >= 3 and good["top1_agree"] == good["prompts"]
    assert good["max_abs_diff"] < 1e-3 and good["max_kl"] < 1e-6

    worse = served_comparison(tmp_path / "bad", bad, ref)
    assert not worse["ok"]
    assert worse["failed_prompts"]
    assert worse["max_abs_diff"] > 3 * worse["lp_tolerance"]
    # What the old check compared cannot see it: same top-1 tokens, top-1 logprobs ~equal.
    assert worse["top1_agree"] == worse["prompts"]
    for row in worse["rows"]:
        if "abs_diff" in row:
            served = dict(row["served_top"])
            ref_text, ref_lp = row["reference_top"][0]
            assert abs(served[ref_text] - ref_lp) < 1e-3
