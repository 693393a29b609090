"""The HBM budget of one vLLM-Ascend replica, as the planner estimates it before the start.

The emulated vLLM (``ascend_sim.vllm_emulator.memory``) sizes its cache with its own code, in
bytes; this model rounds every term up to whole MB, so it stays on the safe side of it.

vLLM sizes its KV cache after a profiling run (docs, "Engine arguments" /
``gpu_memory_utilization``; ``Worker.determine_available_memory``):

    KV memory = total x gpu_memory_utilization - (weights + peak activation + non-torch)

and rounds the resulting token count down to whole blocks. This module applies that
formula to numbers known before the start, per NPU of a replica (MB means MiB, the unit
``npu-smi`` prints: 65536 MB = 64 GiB):

    kv_budget = HBM_total x utilization - HBM_used_by_others - (weights + vocab padding) / TP
                - activation - graph_capture - runtime_reserve - hccl
    kv_capacity_tokens = floor(kv_budget / (kv_bytes_per_token_per_npu x block)) x block

KV bytes per token per NPU: MHA/GQA layers cache K and V of kv_heads / TP heads (at least one
head per rank); MLA layers (DeepSeek-V2/V3, Kimi K2) cache kv_lora_rank + qk_rope_head_dim
values, the same on every rank. MoE weights are all resident: every expert's bytes count, split
over the TP group (with ``--enable-expert-parallel`` whole experts are spread over the same
ranks instead of slices of every expert: the same bytes per NPU).

``HBM_used_by_others`` is what ``npu-smi`` reports as used on the card before the start
(it includes the ~3.3 GB a 910B shows at idle, vllm-ascend issues #1363, #1767; torch_npu
likewise sees only ~61 of 64 GiB). Constants, each in one place (``MemoryModel``):

* ``block_size`` 128: the KV block size vllm-ascend uses on Ascend (its platform sets 128
  for the NPU attention kernels in ``vllm_ascend/platform.py``).
* ``graph_capture_mb`` 2048: memory for captured ACL graphs. GPUStack reserves 2 GiB for
  CUDA-graph overhead in its vLLM fit estimate (https://github.com/gpustack/gpustack
  ``policies/utils.py``); graph capture on Ascend costs extra memory per captured size
  (vllm-ascend PR #1503, issues #6002, #8393). 0 with ``--enforce-eager``.
* ``runtime_reserve_mb`` 1024: CANN runtime context, ATB/ACL workspaces and allocator
  fragmentation that the profiling peak does not show. No published figure: an
  engineering allowance, chosen so that the planner fails Qwen3-14B BF16 on a 32 GB
  910B4 as vLLM-Ascend does ("Available KV cache memory: -0.87 GiB", vllm-ascend #9372).
* ``hccl_buffsize_mb`` 200 x 2 (send and receive) per communicator, ``hccl_communicators``
  2 (the TP group and the world group), only when TP > 1: CANN documents the
  HCCL_BUFFSIZE default of 200 MB and "each communicator occupies 2 x HCCL_BUFFSIZE"
  (hiascend.com CANN env reference envref_07_0080).
* Peak activation of the profiling run, estimated from the shapes:
  ``profile_batched_tokens`` x (4 x hidden + 2 x intermediate / TP) x dtype bytes (for MoE the
  intermediate is the routed experts' top-k width plus the shared experts') for the
  residual stream, attention and MLP intermediates, plus the sampler's float32 logits and
  probabilities, max_num_seqs x vocab x 8 bytes. ``profile_batched_tokens`` 8192 is the
  largest default ``max_num_batched_tokens`` of vLLM's V1 online server (2048 or 8192
  depending on the device), so the estimate errs high.

Planning policy constants:

* ``default_max_num_seqs`` 256: vLLM's default ``--max-num-seqs``; never planned higher.
* ``expected_avg_context_tokens`` 4096: the context a running sequence is assumed to hold
  on average. ``max_num_seqs`` = KV capacity // min(max_model_len, 4096), at least 1,
  at most 256: the planned concurrency fits the cache without preemption storms
  (pitfall 6, docs/guides/troubleshooting.md).
* ``min_model_len`` 2048: when ``max_model_len`` is lowered automatically it is not
  lowered below this (or below the model's own limit, if that is smaller); a card that
  cannot hold that is reported as infeasible instead.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..model.info import kv_values_per_token_per_layer

MIB = 1 << 20


@dataclass(frozen=True)
class MemoryModel:
    """Constants of the budget; see the module docstring for each source."""

    block_size: int = 128
    graph_capture_mb: int = 2048
    runtime_reserve_mb: int = 1024
    hccl_buffsize_mb: int = 200
    hccl_communicators: int = 2
    profile_batched_tokens: int = 8192
    default_max_num_seqs: int = 256
    expected_avg_context_tokens: int = 4096
    min_model_len: int = 2048

    def as_dict(self) -> dict:
        return asdict(self)

    def kv_bytes_per_token_per_npu(self, model: dict, tp: int) -> int:
        """KV bytes per token on one NPU: MHA/GQA ranks hold kv_heads / TP heads (at least
        1); MLA ranks each hold the whole latent (``model_info.kv_values_per_token_per_layer``)."""
        return (
            model["num_hidden_layers"]
            * kv_values_per_token_per_layer(model, tp)
            * model.get("kv_dtype_bytes", 2)
        )

    @staticmethod
    def vocab_padding_bytes(model: dict) -> int:
        """Rows vLLM adds to the embedding and LM head (``VocabParallelEmbedding`` pads the
        vocabulary to a multiple of 64): 0 for Qwen3's 151936, 59 rows for a 261-token vocab."""
        vocab = model["vocab_size"]
        pad = -vocab % 64
        tables = 1 if model.get("tie_word_embeddings") else 2
        return pad * model["hidden_size"] * model.get("kv_dtype_bytes", 2) * tables

    @staticmethod
    def replicated_kv_weight_bytes(model: dict, tp: int) -> int:
        """K and V projection bytes one rank loads beyond an even 1/TP split when TP exceeds
        the KV heads: it holds one whole (replicated) head, ``QKVParallelLinear`` (MHA/GQA).
        Counted at the model dtype (conservative for int8 checkpoints)."""
        kv = model["num_key_value_heads"]
        if model.get("mla") or tp <= kv:
            return 0
        head = model["hidden_size"] * model["head_dim"] * model.get("kv_dtype_bytes", 2)
        return model["num_hidden_layers"] * 2 * (head - head * kv // tp)

    @staticmethod
    def mlp_width(model: dict) -> int:
        """The widest MLP intermediate one token produces: the dense ``intermediate_size``,
        or for MoE the routed experts' ``experts_per_token x moe_intermediate_size`` plus the
        shared experts, whichever is larger."""
        hidden = model["hidden_size"]
        dense = model.get("intermediate_size") or 4 * hidden
        moe = model.get("moe")
        if not moe:
            return dense
        expert = moe.get("moe_intermediate_size") or dense
        shared = moe.get("shared_expert_intermediate_size") or (
            moe.get("shared_experts", 0) * expert
        )
        return max(dense, moe["experts_per_token"] * expert + shared)

    def activation_mb(self, model: dict, tp: int, max_num_seqs: int | None = None) -> int:
        """Estimated peak activation of the profiling run on one NPU, in MB."""
        seqs = max_num_seqs or self.default_max_num_seqs
        dtype_bytes = model.get("kv_dtype_bytes", 2)
        hidden = model["hidden_size"]
        inter = self.mlp_width(model)
        stream = self.profile_batched_tokens * (4 * hidden + 2 * inter // tp) * dtype_bytes
        sampler = seqs * model["vocab_size"] * 8
        return -(-(stream + sampler) // MIB)

    def budget(
        self,
        model: dict,
        hbm_total_mb: int,
        hbm_used_mb: int,
        gpu_memory_utilization: float,
        tp: int = 1,
        enforce_eager: bool = False,
        max_num_seqs: int | None = None,
    ) -> dict:
        """The per-NPU budget breakdown (MB) and the KV capacity in tokens of one replica.

        ``model`` is ``model_info.inspect_model(...)``'s result (it needs the architecture
        fields and ``weight_bytes_served``).
        """
        usable = int(hbm_total_mb * gpu_memory_utilization)
        model_bytes = model["weight_bytes_served"] + self.vocab_padding_bytes(model)
        replicas = self.replicated_kv_weight_bytes(model, tp)
        weights = -(-(model_bytes + replicas * tp) // (tp * MIB))
        activation = self.activation_mb(model, tp, max_num_seqs)
        graph = 0 if enforce_eager else self.graph_capture_mb
        hccl = self.hccl_buffsize_mb * 2 * self.hccl_communicators if tp > 1 else 0
        kv_budget = (
            usable - hbm_used_mb - weights - activation - graph - self.runtime_reserve_mb - hccl
        )
        per_token = self.kv_bytes_per_token_per_npu(model, tp)
        return {
            "hbm_total_mb": hbm_total_mb,
            "gpu_memory_utilization": gpu_memory_utilization,
            "usable_mb": usable,
            "used_by_others_mb": hbm_used_mb,
            "free_for_vllm_mb": usable - hbm_used_mb,
            "weights_per_npu_mb": weights,
            "activation_mb": activation,
            "graph_capture_mb": graph,
            "runtime_reserve_mb": self.runtime_reserve_mb,
            "hccl_mb": hccl,
            "kv_budget_mb": kv_budget,
            "kv_bytes_per_token_per_npu": per_token,
            "kv_capacity_tokens": tokens_in(kv_budget * MIB, per_token, self.block_size),
        }


DEFAULT_MODEL = MemoryModel()


def tokens_in(kv_bytes: int, bytes_per_token: int, block_size: int = 128) -> int:
    """Whole KV blocks that fit in ``kv_bytes``, as a token count (0 when nothing fits)."""
    if kv_bytes <= 0:
        return 0
    return (kv_bytes // (bytes_per_token * block_size)) * block_size


def kv_capacity_tokens(
    model: dict,
    hbm_total_mb: int,
    hbm_used_mb: int,
    gpu_memory_utilization: float,
    tp: int = 1,
    enforce_eager: bool = False,
    max_num_seqs: int | None = None,
    memory_model: MemoryModel = DEFAULT_MODEL,
) -> int:
    """KV tokens one replica can hold: the number the planner sizes against and the
    emulated vLLM reports at start ("GPU KV cache size: N tokens")."""
    return memory_model.budget(
        model, hbm_total_mb, hbm_used_mb, gpu_memory_utilization, tp, enforce_eager, max_num_seqs
    )["kv_capacity_tokens"]
