"""Model inspection: architecture facts, quantization method and weight bytes from real files."""

from __future__ import annotations

import json
import shutil

import pytest

from ascend_deploy.errors import InputError
from ascend_deploy.model.info import inspect_model, kv_bytes_per_token, read_architecture
from ascend_sim.checkpoints import QWEN3_ARCHS, write_checkpoint, write_modelslim_description


@pytest.fixture(scope="module")
def qwen3_4b_fp8(tmp_path_factory):
    d = tmp_path_factory.mktemp("models") / "Qwen3-4B-FP8"
    write_checkpoint(str(d), "qwen3-4b", data="sparse")
    return d


@pytest.fixture
def small_model(tmp_path):
    """A copy-on-demand sparse 0.6B FP8 checkpoint that a test may damage."""
    d = tmp_path / "model"
    write_checkpoint(str(d), "qwen3-0.6b", layers=2, data="sparse")
    return d


def test_qwen3_4b_fp8_facts(qwen3_4b_fp8):
    facts = inspect_model(str(qwen3_4b_fp8))
    assert facts["model_type"] == "qwen3"
    assert facts["num_hidden_layers"] == 36
    assert facts["num_attention_heads"] == 32
    assert facts["num_key_value_heads"] == 8
    assert facts["head_dim"] == 128
    assert facts["hidden_size"] == 2560
    assert facts["vocab_size"] == 151936
    assert facts["max_position_embeddings"] == 40960
    assert facts["torch_dtype"] == "bfloat16"
    assert facts["quant_method"] == "fp8"
    assert facts["weight_block_size"] == [128, 128]
    assert facts["needs_conversion"] is True
    assert facts["tensor_count"] == 650
    assert facts["served_tensor_count"] == 398
    assert facts["weight_bytes_on_disk"] == 4_412_063_872
    assert facts["weight_bytes_served"] == 8_044_936_192
    assert facts["kv_bytes_per_token"] == 147_456
    assert kv_bytes_per_token(facts) == 147_456
    assert kv_bytes_per_token(facts, kv_dtype_bytes=1) == 73_728


def test_fp8_native_hardware_serves_fp8_as_is(qwen3_4b_fp8):
    facts = inspect_model(str(qwen3_4b_fp8), fp8_native=True)
    assert facts["needs_conversion"] is False
    assert facts["weight_bytes_served"] == facts["weight_bytes_on_disk"] == 4_412_063_872
    assert facts["served_tensor_count"] == 650


def test_bf16_model_needs_no_conversion(tmp_path):
    write_checkpoint(str(tmp_path), "qwen3-8b", fp8=False, data="sparse")
    facts = inspect_model(str(tmp_path))
    assert facts["quant_method"] is None and facts["needs_conversion"] is False
    assert facts["weight_bytes_served"] == facts["weight_bytes_on_disk"] == 16_381_470_720
    assert facts["tensor_count"] == 399 and facts["tie_word_embeddings"] is False


def test_modelslim_description_means_ascend(small_model):
    write_modelslim_description(str(small_model), "W8A8_DYNAMIC")
    assert inspect_model(str(small_model))["quant_method"] == "ascend"


def test_head_dim_defaults_and_text_config_nesting():
    cfg = {k: v for k, v in QWEN3_ARCHS["qwen3-8b"].items() if k != "head_dim"}
    assert read_architecture(cfg)["head_dim"] == 4096 // 32
    wrapped = {"model_type": "qwen3_vl", "text_config": QWEN3_ARCHS["qwen3-4b"]}
    arch = read_architecture(wrapped)
    assert arch["num_hidden_layers"] == 36 and arch["model_type"] == "qwen3_vl"


def _set_config(model_dir, change):
    path = model_dir / "config.json"
    cfg = json.loads(path.read_text())
    change(cfg)
    path.write_text(json.dumps(cfg))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: (d / "config.json").unlink(), r"config\.json: config\.json not found"),
        (lambda d: (d / "config.json").write_text(""), r"config\.json: config\.json is empty"),
        (
            lambda d: (d / "config.json").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe"),
            r"config\.json: config\.json is not valid JSON",
        ),
        (
            lambda d: (d / "config.json").write_text('{"num_hidden_layers": 2, "hidd'),
            r"config\.json: config\.json is not valid JSON",
        ),
        (
            lambda d: (d / "config.json").write_text("[1, 2]"),
            r"config\.json: config\.json must be a JSON object",
        ),
        (
            lambda d: _set_config(d, lambda c: c.pop("num_hidden_layers")),
            r"config\.json: no 'num_hidden_layers'",
        ),
        (
            lambda d: _set_config(d, lambda c: c.pop("vocab_size")),
            r"config\.json: required field 'vocab_size' is missing",
        ),
        (
            lambda d: _set_config(d, lambda c: c.update(num_attention_heads="32")),
            r"config\.json: 'num_attention_heads' must be a positive integer, got '32'",
        ),
        (
            lambda d: _set_config(d, lambda c: c.update(num_key_value_heads=True)),
            r"'num_key_value_heads' must be a positive integer, got True",
        ),
        (
            lambda d: _set_config(d, lambda c: c.update(num_key_value_heads=5)),
            r"num_attention_heads 16 is not a multiple of num_key_value_heads 5",
        ),
        (
            lambda d: _set_config(d, lambda c: c.pop("max_position_embeddings")),
            r"config\.json: no 'max_position_embeddings'",
        ),
        (
            lambda d: _set_config(d, lambda c: c.update(quantization_config="fp8")),
            r"'quantization_config' must be an object",
        ),
        (
            lambda d: _set_config(d, lambda c: c["quantization_config"].pop("quant_method")),
            r"quantization_config has no 'quant_method'",
        ),
        (
            lambda d: _set_config(
                d, lambda c: c["quantization_config"].update(weight_block_size="128")
            ),
            r"weight_block_size must be a list of positive integers",
        ),
        (
            lambda d: (d / "quant_model_description.json").write_text("not json"),
            r"quant_model_description\.json: ModelSlim quantization description is not valid",
        ),
        (
            lambda d: (d / "model-00001-of-00001.safetensors").unlink(),
            r"model-00001-of-00001\.safetensors: shard listed in model\.safetensors\.index\.json"
            r" is missing",
        ),
        (
            lambda d: (d / "model.safetensors.index.json").write_text("{}"),
            r"no 'weight_map' object",
        ),
        (
            lambda d: (d / "model-00001-of-00001.safetensors").write_bytes(b"\x10\x00"),
            r"model-00001-of-00001\.safetensors: truncated safetensors file",
        ),
    ],
)
def test_bad_model_directories(small_model, damage, message):
    damage(small_model)
    with pytest.raises(InputError, match=message) as err:
        inspect_model(str(small_model))
    assert "\n" not in str(err.value)


def test_truncated_shard_data(small_model):
    shard = small_model / "model-00001-of-00001.safetensors"
    with open(shard, "r+b") as fh:
        fh.truncate(shard.stat().st_size - 1000)
    with pytest.raises(InputError, match="go beyond the end of the file"):
        inspect_model(str(small_model))


def test_missing_directory(tmp_path):
    with pytest.raises(InputError, match="model directory not found"):
        inspect_model(str(tmp_path / "nope"))
    shutil.rmtree(tmp_path)


# ---- context limit: vLLM's derived max_model_len with RoPE scaling ----

# Qwen3 model cards: enable YaRN for up to 131,072 tokens with this rope_scaling.
QWEN3_YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}


def test_qwen3_without_rope_scaling_is_limited_by_max_position_embeddings():
    arch = read_architecture(QWEN3_ARCHS["qwen3-8b"])
    assert arch["rope_scaling"] is None
    assert arch["max_model_len_limit"] == arch["max_position_embeddings"] == 40960
    assert arch["max_model_len_source"] == "max_position_embeddings 40960"


def test_qwen3_8b_with_yarn_on_disk(tmp_path):
    write_checkpoint(str(tmp_path), "qwen3-8b", fp8=False, data="sparse")
    _set_config(tmp_path, lambda c: c.update(rope_scaling=dict(QWEN3_YARN)))
    facts = inspect_model(str(tmp_path))
    # vLLM: yarn replaces the limit by original_max_position_embeddings, then x factor.
    assert facts["max_model_len_limit"] == 32768 * 4 == 131072
    assert facts["max_position_embeddings"] == 40960  # unchanged: the raw config field
    assert facts["rope_scaling"] == QWEN3_YARN
    assert facts["max_model_len_source"] == (
        "rope_scaling yarn: original_max_position_embeddings 32768 x factor 4; "
        "max_position_embeddings 40960"
    )


@pytest.mark.parametrize(
    ("fields", "limit"),
    [
        # Qwen2.5-7B-Instruct model card, YaRN: 32768 x 4.
        ({"max_position_embeddings": 32768, "rope_scaling": dict(QWEN3_YARN)}, 131072),
        # Older configs name the type "type" (vLLM reads it as rope_type).
        (
            {
                "rope_scaling": {
                    "type": "yarn",
                    "factor": 2.0,
                    "original_max_position_embeddings": 32768,
                }
            },
            65536,
        ),
        # linear and dynamic multiply the position limit.
        ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, 81920),
        ({"rope_scaling": {"type": "dynamic", "factor": 1.5}}, 61440),
        # Llama-3.1 (llama3) and Phi-3 128k (longrope, or its old name su): the config's
        # max_position_embeddings is already the extended length; vLLM does not scale it.
        (
            {
                "max_position_embeddings": 131072,
                "rope_scaling": {
                    "rope_type": "llama3",
                    "factor": 8.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 8192,
                },
            },
            131072,
        ),
        (
            {
                "max_position_embeddings": 131072,
                "rope_scaling": {
                    "type": "longrope",
                    "long_factor": [1.0],
                    "short_factor": [1.0],
                },
            },
            131072,
        ),
        ({"max_position_embeddings": 131072, "rope_scaling": {"type": "su"}}, 131072),
        # transformers 5: rope_parameters, "default" carries no factor.
        ({"rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}}, 40960),
        ({"rope_parameters": {"rope_theta": 1000000.0, **QWEN3_YARN}}, 131072),
        # ... or one dict per layer type.
        (
            {
                "rope_parameters": {
                    "full_attention": {"rope_theta": 1000000.0, **QWEN3_YARN},
                    "sliding_attention": {"rope_theta": 10000.0, **QWEN3_YARN},
                }
            },
            131072,
        ),
        # Gemma 3: max_position_embeddings 131072 already includes its linear factor 8.
        (
            {
                "model_type": "gemma3_text",
                "max_position_embeddings": 131072,
                "rope_scaling": {"rope_type": "linear", "factor": 8.0},
            },
            131072,
        ),
        # YaRN without original_max_position_embeddings starts from the position limit.
        ({"rope_scaling": {"rope_type": "yarn", "factor": 2.0}}, 81920),
    ],
)
def test_rope_scaling_rule(fields, limit):
    cfg = dict(QWEN3_ARCHS["qwen3-4b"])
    cfg.update(fields)
    assert read_architecture(cfg)["max_model_len_limit"] == limit


@pytest.mark.parametrize(
    ("rope", "message"),
    [
        ("yarn", r"'rope_scaling' must be an object or null, got 'yarn'"),
        ({"rope_type": "yarn", "factor": "4"}, r"rope_scaling\.factor must be a positive number"),
        ({"rope_type": "linear", "factor": 0}, r"rope_scaling\.factor must be a positive number"),
        (
            {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768.5},
            r"original_max_position_embeddings must be a positive integer",
        ),
    ],
)
def test_bad_rope_scaling_is_named(rope, message):
    cfg = dict(QWEN3_ARCHS["qwen3-4b"], rope_scaling=rope)
    with pytest.raises(InputError, match=message):
        read_architecture(cfg, "m/config.json")
