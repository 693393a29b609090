"""KV-cache sizing at start-up, as the emulated vLLM-Ascend measures it: its own code.

This never calls the planner (``ascend_deploy.planning.memory``): the emulated engine loads
the served directory, profiles and sizes its cache the way vLLM does, in bytes, so a planner
that forgets a term or mis-sizes an architecture is caught by the engine it plans for
(molecule/capacity, tests/unit/sim/vllm_emulator/test_vllm_emulator_kv.py).

Up to v0.14.0rc1 (``Worker.determine_available_memory`` in vllm-ascend ``worker_v1`` /
``worker.py@v0.13.0``): the instance may use ``total x gpu_memory_utilization``; it subtracts
what the card already held before it started (driver idle use, other processes), this rank's
weights as loaded, the peak activation of the profiling run and the memory it did not allocate
through torch; on top the emulated card reserves runtime context and workspaces, HCCL buffers
and an ACL graph pool (emulated allowances: upstream reserves no graph memory). The rest is cut into
pages of ``block_size`` tokens for every layer; ``num_blocks x block_size`` is the "GPU KV cache
size" it logs. What this emulated card does:

* Weights per rank: every tensor of the shard headers as loaded on this rank (vLLM's
  tensor-parallel layers): embeddings and LM head padded to a multiple of 64 rows
  (``VocabParallelEmbedding``) and split by rows; K/V projections keep whole heads
  (a rank beyond the KV head count holds a replica); 1-D tensors (norms) are replicated;
  every other tensor is split evenly (with expert parallelism whole experts are spread over
  the same ranks, the same bytes).
* Profiling: ``--max-num-batched-tokens`` tokens (default 8192) through one decoder layer at
  a time: four hidden-size tensors of the residual stream and attention, the MLP's gate/up
  output of twice its width on this rank (MoE: the routed experts' top-k width plus the
  shared experts'), and the sampler's float32 logits and probabilities for
  ``max_num_seqs`` (default 256) sequences.
* Outside torch: 1 GiB of CANN runtime context and ATB/ACL workspaces; with TP > 1 two
  communicators (TP group, world) of 2 x ``HCCL_BUFFSIZE`` MB each (default 200; CANN env
  reference); unless ``--enforce-eager``, a 2 GiB ACL graph pool.
* From v0.15.0rc1 (``profiling``; vllm-ascend #6625, ``worker/worker.py@v0.23.0``
  ``_init_device`` / ``determine_available_memory``) vLLM's memory profiling instead: the
  device total torch sees is the card's less its idle driver use; ``requested = that total x
  util``; the start is refused when free memory (total - idle - others) is below it; the cache
  gets ``requested - (weights + peak activation + HCCL buffers)``. Other processes are not
  subtracted and the graph pool comes out of the ``(1 - util)`` headroom after the cache.
* Cache per token and layer on a rank: MHA/GQA K and V of ``max(1, kv_heads / TP)`` heads of
  ``head_dim``; MLA (a config with ``kv_lora_rank``) the latent and the RoPE key,
  ``kv_lora_rank + qk_rope_head_dim``, on every rank. Element size: the model dtype.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

MIB = 1024 * 1024
GIB = 1024 * MIB
BLOCK_SIZE = 128  # vllm-ascend's NPU block size
VOCAB_PADDING = 64
PROFILE_TOKENS = 8192
DEFAULT_SEQS = 256
RUNTIME_BYTES = 1 * GIB
GRAPH_POOL_BYTES = 2 * GIB
HCCL_DEFAULT_MB = 200
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}


@dataclass
class KvBudget:
    """One rank's start-up memory terms in bytes."""

    total: int
    utilization: float
    requested: int  # total x utilization
    used_before: int  # idle driver use + other processes, as npu-smi shows before the start
    others: int  # of which: other processes' memory (from the live registry)
    weights: int  # this rank's share
    activation: int
    graph: int
    runtime: int  # runtime context + HCCL buffers
    available_kv: int  # may be <= 0
    kv_bytes_per_token: int  # per rank
    num_blocks: int
    tokens: int  # num_blocks x block_size
    device_total: int = 0  # what torch sees (profiling: total - idle use; else total)
    free_at_start: int = 0  # total - used_before
    profiling: bool = False  # the v0.15.0rc1+ model

    @property
    def refused_at_start(self) -> bool:
        """v0.15.0rc1+: free memory at start below the requested share (the device total x
        util); always False for the older model, which has no such check."""
        return self.profiling and self.free_at_start < self.requested

    @property
    def free_before_load(self) -> int:
        return self.total - self.used_before

    @property
    def held(self) -> int:
        """What this process holds on the NPU once the KV cache is allocated."""
        return (
            self.weights
            + self.activation
            + self.graph
            + self.runtime
            + self.num_blocks * BLOCK_SIZE * self.kv_bytes_per_token
        )

    def as_dict(self) -> dict:
        return asdict(self)


def _text(config: dict) -> dict:
    if "num_hidden_layers" not in config and isinstance(config.get("text_config"), dict):
        return config["text_config"]
    return config


def dtype_bytes(config: dict, dtype_arg: str | None = None) -> int:
    """Element size of weights' activations and the cache: ``--dtype``, else the config's."""
    if dtype_arg and dtype_arg != "auto":
        return _DTYPE_BYTES.get(dtype_arg, 2)
    sec = _text(config)
    name = sec.get("torch_dtype") or sec.get("dtype") or config.get("torch_dtype") or "bfloat16"
    return _DTYPE_BYTES.get(str(name).lower(), 2)


def cache_bytes_per_token(config: dict, tp: int, elem: int = 2) -> int:
    """KV bytes one token takes on one rank, over all layers."""
    c = _text(config)
    layers = int(c["num_hidden_layers"])
    if c.get("kv_lora_rank"):
        return layers * (int(c["kv_lora_rank"]) + int(c["qk_rope_head_dim"])) * elem
    heads = int(c["num_attention_heads"])
    kv_heads = int(c.get("num_key_value_heads") or heads)
    head_dim = int(c.get("head_dim") or int(c["hidden_size"]) // heads)
    return layers * 2 * max(1, kv_heads // tp) * head_dim * elem


def weights_per_rank(tensors: list[tuple[str, tuple[int, ...], int]], config: dict, tp: int) -> int:
    """Bytes of ``(name, shape, nbytes)`` tensors one TP rank loads (see the module doc)."""
    c = _text(config)
    heads = int(c["num_attention_heads"])
    kv_heads = int(c.get("num_key_value_heads") or heads)
    total = 0
    for name, shape, nbytes in tensors:
        if len(shape) <= 1:
            total += nbytes
        elif name.endswith(("embed_tokens.weight", "lm_head.weight")):
            rows = shape[0]
            padded = -(-rows // VOCAB_PADDING) * VOCAB_PADDING
            total += -(-padded // tp) * (nbytes // rows)
        elif (".k_proj." in name or ".v_proj." in name) and tp > kv_heads:
            total += nbytes // kv_heads  # one whole head per rank
        else:
            total += -(-nbytes // tp)
    return total


def _mlp_width(c: dict) -> int:
    dense = int(c.get("intermediate_size") or 4 * int(c["hidden_size"]))
    experts = c.get("n_routed_experts") or c.get("num_experts") or c.get("num_local_experts")
    if not experts or int(experts) < 2:
        return dense
    per_expert = int(c.get("moe_intermediate_size") or dense)
    routed = int(c.get("num_experts_per_tok") or 1) * per_expert
    shared = (
        int(c.get("shared_expert_intermediate_size") or 0)
        or int(c.get("n_shared_experts") or 0) * per_expert
    )
    return max(dense, routed + shared)


def profile_peak(config: dict, tp: int, tokens: int, seqs: int, elem: int = 2) -> int:
    """Peak bytes the profiling run allocates on one rank (see the module doc)."""
    c = _text(config)
    hidden = int(c["hidden_size"])
    stream = tokens * (4 * hidden + 2 * _mlp_width(c) // tp) * elem
    sampler = seqs * int(c["vocab_size"]) * 4 * 2
    return stream + sampler


def hccl_bytes(tp: int, env: dict | None = None) -> int:
    """HCCL buffers: 2 x HCCL_BUFFSIZE per communicator, TP group and world, when TP > 1."""
    if tp <= 1:
        return 0
    env = os.environ if env is None else env
    try:
        mb = int(env.get("HCCL_BUFFSIZE") or HCCL_DEFAULT_MB)
    except ValueError:
        mb = HCCL_DEFAULT_MB
    return 2 * 2 * mb * MIB


def kv_budget(
    config: dict,
    tensors: list[tuple[str, tuple[int, ...], int]],
    hbm_total_mb: int,
    idle_used_mb: int,
    others_mb: int,
    tp: int = 1,
    gpu_memory_utilization: float = 0.9,
    enforce_eager: bool = False,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    dtype: str | None = None,
    profiling: bool = False,
) -> KvBudget:
    """The KV cache one rank gets on the emulated card (``profiling``: v0.15.0rc1+)."""
    elem = dtype_bytes(config, dtype)
    total = hbm_total_mb * MIB
    device_total = total - idle_used_mb * MIB if profiling else total
    requested = int(device_total * gpu_memory_utilization)
    used = (idle_used_mb + others_mb) * MIB
    weights = weights_per_rank(tensors, config, tp)
    activation = profile_peak(
        config, tp, max_num_batched_tokens or PROFILE_TOKENS, max_num_seqs or DEFAULT_SEQS, elem
    )
    graph = 0 if enforce_eager else GRAPH_POOL_BYTES
    if profiling:  # the ACL context predates the snapshot; HCCL buffers are non-torch growth
        runtime = hccl_bytes(tp)
        available = requested - weights - activation - runtime
    else:
        runtime = RUNTIME_BYTES + hccl_bytes(tp)
        available = requested - used - weights - activation - graph - runtime
    per_token = cache_bytes_per_token(config, tp, elem)
    blocks = max(0, available) // (per_token * BLOCK_SIZE)
    return KvBudget(
        total=total,
        utilization=gpu_memory_utilization,
        requested=requested,
        used_before=used,
        others=others_mb * MIB,
        weights=weights,
        activation=activation,
        graph=graph,
        runtime=runtime,
        available_kv=available,
        kv_bytes_per_token=per_token,
        num_blocks=blocks,
        tokens=blocks * BLOCK_SIZE,
        device_total=device_total,
        free_at_start=total - used,
        profiling=profiling,
    )


def utilization_for_blocks(
    config: dict,
    tensors: list[tuple[str, tuple[int, ...], int]],
    hbm_total_mb: int,
    used_mb: int,
    blocks: int,
    **kw,
) -> float:
    """A ``--gpu-memory-utilization`` at which this card's cache holds exactly ``blocks``
    blocks (tests and scenarios that need a cache of a given size); ValueError if none."""
    at_full = kv_budget(config, tensors, hbm_total_mb, used_mb, 0, gpu_memory_utilization=1.0, **kw)
    overhead = at_full.requested - at_full.available_kv  # everything but the cache
    need = overhead + blocks * BLOCK_SIZE * at_full.kv_bytes_per_token
    total = at_full.device_total  # what utilization is a fraction of
    util = round((need + BLOCK_SIZE * at_full.kv_bytes_per_token / 2) / total, 9)
    got = kv_budget(config, tensors, hbm_total_mb, used_mb, 0, gpu_memory_utilization=util, **kw)
    if not 0 < util <= 1 or got.num_blocks != blocks:
        raise ValueError(f"no utilization gives {blocks} blocks on {hbm_total_mb} MB")
    return util
