"""Widening the tiny model's heads (ascend_sim.head_padding) keeps what it computes.

The real-engine image serves tests/data/tiny-qwen3-fp8-hd64 (vLLM 0.23.0's CPU attention has
no head_dim 48); these tests hold that copy to the trained model it comes from.
"""

from __future__ import annotations

import filecmp
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, REPO, TINY_FP8

from ascend_sim.engine import load_model
from ascend_sim.head_padding import pad_head_dim

HD64 = DATA / "tiny-qwen3-fp8-hd64"
PROMPTS = [[257, *b"user\nWhat is the capital of France?"], list(b"The quick brown fox " * 12)]


@pytest.fixture(scope="module")
def widened(tiny_bf16, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("hd64") / "bf16"
    pad_head_dim(tiny_bf16, str(out), 64)
    return str(out)


def _logits(model_dir: str) -> np.ndarray:
    model = load_model(model_dir)
    return np.stack([model.logits(p)[-1] for p in PROMPTS])


def test_wider_heads_give_the_same_logits(tiny_bf16, widened):
    config = json.loads((Path(widened) / "config.json").read_text())
    assert config["head_dim"] == 64 and config["rope_theta"] == 1e8
    base, wide = _logits(tiny_bf16), _logits(widened)
    # BF16 rounding of k_norm * sqrt(48/64) and eps * 64/48 only: far below a logit margin (5).
    assert np.abs(base - wide).max() < 0.05
    assert (base.argmax(-1) == wide.argmax(-1)).all()


def test_the_rope_rebase_is_what_keeps_them(tiny_bf16, widened, tmp_path):
    """Without the new rope_theta the frequencies move and the logits with them (the check
    above can fail)."""
    for name in (p.name for p in (Path(widened)).iterdir()):
        (tmp_path / name).write_bytes((Path(widened) / name).read_bytes())
    config = json.loads((tmp_path / "config.json").read_text())
    config["rope_theta"] = 1e6
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert np.abs(_logits(tiny_bf16) - _logits(str(tmp_path))).max() > 0.5


def test_refuses_what_it_cannot_widen(tiny_bf16, tmp_path):
    with pytest.raises(ValueError, match="convert it to BF16"):
        pad_head_dim(str(TINY_FP8), str(tmp_path / "a"), 64)
    with pytest.raises(ValueError, match="larger than 48"):
        pad_head_dim(tiny_bf16, str(tmp_path / "b"), 40)


def test_committed_copy_is_the_tools_output(tmp_path):
    """tools/make_tiny_hd64.py is deterministic and checks every verification answer of the
    converted copy against the trained model's before it finishes."""
    out = tmp_path / "hd64"
    run = subprocess.run(
        [sys.executable, str(REPO / "tools" / "make_tiny_hd64.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["answers_equal"] == 27
    names = sorted(p.name for p in HD64.iterdir())
    assert names == sorted(p.name for p in out.iterdir())
    _same, mismatch, errors = filecmp.cmpfiles(HD64, out, names, shallow=False)
    assert not mismatch and not errors, mismatch
