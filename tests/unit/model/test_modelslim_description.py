"""ModelSlim descriptions checked against the checkpoint's linear weights (upstream KeyError /
ValueError at load), on the committed tiny W8A8 model and on safetensors written here."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import DATA

from ascend_deploy.errors import InputError
from ascend_deploy.model.info import inspect_model
from ascend_deploy.model.modelslim import linear_weights
from ascend_sim.float_tensors import write_tensor_file

W8A8 = DATA / "tiny-qwen3-w8a8"
DESC = "quant_model_description.json"


@pytest.fixture
def w8a8(tmp_path):
    d = tmp_path / "w8a8"
    shutil.copytree(W8A8, d)
    return d


def _edit(model, change) -> None:
    path = model / DESC
    desc = json.loads(path.read_text())
    change(desc)
    path.write_text(json.dumps(desc))


def test_complete_description_is_detected_as_ascend(w8a8):
    assert inspect_model(str(w8a8))["quant_method"] == "ascend"


def test_missing_weight_entry_of_a_plain_layer_is_refused_by_name(w8a8):
    _edit(w8a8, lambda d: d.pop("model.layers.1.self_attn.o_proj.weight"))
    with pytest.raises(InputError) as err:
        inspect_model(str(w8a8))
    msg = str(err.value)
    assert msg.startswith(f"{w8a8 / DESC}: incomplete ModelSlim description: 1 linear layer")
    assert "(model.layers.1.self_attn.o_proj.weight)" in msg and "KeyError" in msg
    assert "re-export the checkpoint with ModelSlim" in msg


def test_missing_fused_shard_entry_is_refused(w8a8):
    _edit(w8a8, lambda d: d.pop("model.layers.0.mlp.up_proj.weight"))
    with pytest.raises(InputError, match=r"\(model\.layers\.0\.mlp\.up_proj\.weight\)"):
        inspect_model(str(w8a8))


def test_fused_shards_at_mixed_precision_are_refused(w8a8):
    _edit(w8a8, lambda d: d.update({"model.layers.0.self_attn.k_proj.weight": "FLOAT"}))
    with pytest.raises(InputError) as err:
        inspect_model(str(w8a8))
    msg = str(err.value)
    assert "mixed precision: model.layers.0.self_attn.qkv_proj " in msg
    assert "(q_proj=W8A8, k_proj=FLOAT, v_proj=W8A8)" in msg and "ValueError" in msg
    assert "no entry" not in msg


def test_norm_and_scale_entries_are_not_required(w8a8):
    """Upstream looks up linear layers' ``.weight`` only: norms and scales may be absent."""

    def drop(d: dict) -> None:
        for k in [k for k in d if k.endswith(("norm.weight", ".deq_scale", "embed_tokens.weight"))]:
            del d[k]

    _edit(w8a8, drop)
    assert inspect_model(str(w8a8))["quant_method"] == "ascend"


def test_many_missing_entries_name_the_first_five_and_count_the_rest(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    shutil.copy(W8A8 / "config.json", model / "config.json")
    tensors = [("model.embed_tokens.weight", "BF16", (8, 4), bytes(64))]
    for layer in range(7):
        tensors.append((f"model.layers.{layer}.mlp.down_proj.weight", "I8", (4, 4), bytes(16)))
        tensors.append((f"model.layers.{layer}.input_layernorm.weight", "BF16", (4,), bytes(8)))
    write_tensor_file(str(model / "quant_model_weight_w8a8.safetensors"), tensors)
    (model / DESC).write_text(json.dumps({"model_quant_type": "W8A8", "version": "1.0.0"}))
    assert linear_weights([(n, s) for n, _, s, _ in tensors]) == sorted(
        f"model.layers.{i}.mlp.down_proj.weight" for i in range(7)
    )
    with pytest.raises(InputError) as err:
        inspect_model(str(model))
    msg = str(err.value)
    assert "7 linear layer weight(s) have no entry (model.layers.0.mlp.down_proj.weight, " in msg
    assert "model.layers.4.mlp.down_proj.weight and 2 more)" in msg
    assert "layers.5" not in msg and "embed_tokens" not in msg
