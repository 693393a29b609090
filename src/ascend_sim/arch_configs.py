"""config.json files of other decoder shapes, for the planner's sizing tests and the KV check.

Full-size configs follow the published model cards' ``config.json`` (DeepSeek-V3, Qwen3-30B-A3B,
Llama-3.1-8B, Qwen3-Next-80B-A3B); the ``tiny_*`` configs keep each family's cache layout
(head_dim, KV heads, MLA ranks, experts) at a size vLLM's CPU backend starts in seconds with
``--load-format dummy`` (``tools/kv_vs_vllm.py``). ``write_sparse_model`` writes a config with
one sparse safetensors shard of a given size: the planner reads weight bytes from the header.
"""

from __future__ import annotations

import json
import os
import struct

DEEPSEEK_V3: dict = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "n_shared_experts": 1,
    "n_routed_experts": 256,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "moe_layer_freq": 1,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "num_nextn_predict_layers": 1,
    "max_position_embeddings": 163840,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 40,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
    "rope_theta": 10000,
    "vocab_size": 129280,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}

QWEN3_30B_A3B: dict = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_hidden_layers": 48,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "norm_topk_prob": True,
    "max_position_embeddings": 40960,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-06,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}

LLAMA_3_1_8B: dict = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}

QWEN3_NEXT_80B_A3B: dict = {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "hidden_size": 2048,
    "intermediate_size": 5120,
    "moe_intermediate_size": 512,
    "num_hidden_layers": 48,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "full_attention_interval": 4,
    "linear_num_value_heads": 32,
    "linear_num_key_heads": 16,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "max_position_embeddings": 262144,
    "vocab_size": 151936,
    "torch_dtype": "bfloat16",
}

_TINY_COMMON = {
    "hidden_act": "silu",
    "rms_norm_eps": 1e-06,
    "initializer_range": 0.02,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "tie_word_embeddings": False,
    "max_position_embeddings": 4096,
    "rope_theta": 1000000.0,
}


def _qwen3(hidden: int, layers: int, heads: int, kv: int, head_dim: int, vocab: int) -> dict:
    return {
        **_TINY_COMMON,
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "head_dim": head_dim,
        "vocab_size": vocab,
    }


def tiny_configs(vocab: int = 261, bos: int = 256, eos: int = 258) -> dict[str, dict]:
    """Small configs of six cache layouts; ``vocab`` and the special token ids match the
    tokenizer used with them (default: the byte-level one of ``tests/data/tiny-qwen3-fp8``)."""
    out = _tiny_configs(vocab)
    for cfg in out.values():
        cfg.update(bos_token_id=bos, eos_token_id=eos, pad_token_id=bos)
    return out


def _tiny_configs(vocab: int) -> dict[str, dict]:
    yarn = _qwen3(256, 6, 8, 4, 32, vocab)
    yarn.update(
        max_position_embeddings=4096,
        rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048},
    )
    return {
        "qwen3-gqa-hd64": _qwen3(256, 4, 4, 2, 64, vocab),
        "qwen3-gqa-hd128": _qwen3(256, 3, 8, 1, 128, vocab),
        "qwen3-yarn": yarn,
        "qwen3-moe": {
            **_TINY_COMMON,
            "architectures": ["Qwen3MoeForCausalLM"],
            "model_type": "qwen3_moe",
            "hidden_size": 256,
            "intermediate_size": 512,
            "moe_intermediate_size": 128,
            "num_hidden_layers": 4,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "head_dim": 64,
            "num_experts": 8,
            "num_experts_per_tok": 2,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "norm_topk_prob": True,
            "vocab_size": vocab,
        },
        "llama": {
            **_TINY_COMMON,
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": 384,
            "intermediate_size": 768,
            "num_hidden_layers": 5,
            "num_attention_heads": 6,
            "num_key_value_heads": 3,
            "vocab_size": vocab,
        },
        "deepseek-v3-mla": {
            **_TINY_COMMON,
            "architectures": ["DeepseekV3ForCausalLM"],
            "model_type": "deepseek_v3",
            "hidden_size": 256,
            "intermediate_size": 512,
            "moe_intermediate_size": 128,
            "num_hidden_layers": 3,
            "num_attention_heads": 4,
            "num_key_value_heads": 4,
            "n_shared_experts": 1,
            "n_routed_experts": 8,
            "num_experts_per_tok": 2,
            "n_group": 1,
            "topk_group": 1,
            "first_k_dense_replace": 1,
            "moe_layer_freq": 1,
            "routed_scaling_factor": 1.0,
            "scoring_func": "sigmoid",
            "topk_method": "noaux_tc",
            "norm_topk_prob": True,
            "kv_lora_rank": 128,
            "q_lora_rank": 192,
            "qk_nope_head_dim": 32,
            "qk_rope_head_dim": 32,
            "v_head_dim": 32,
            "vocab_size": vocab,
        },
    }


def write_sparse_model(out_dir: str, config: dict, weight_bytes: int) -> str:
    """``config.json`` and one sparse ``model.safetensors`` whose header declares
    ``weight_bytes`` of BF16 (holes on disk: nothing is written)."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w", encoding="utf-8") as fh:
        json.dump(config, fh, indent=2)
    numel = weight_bytes // 2
    header = json.dumps(
        {"model.weights": {"dtype": "BF16", "shape": [numel], "data_offsets": [0, 2 * numel]}}
    ).encode()
    header += b" " * (-len(header) % 8)
    with open(os.path.join(out_dir, "model.safetensors"), "wb") as fh:
        fh.write(struct.pack("<Q", len(header)) + header)
        fh.truncate(8 + len(header) + 2 * numel)
    return out_dir
