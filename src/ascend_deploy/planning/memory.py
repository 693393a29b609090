"""The HBM budget of one vLLM-Ascend replica, as the planner estimates it before the start.

The emulated vLLM (``ascend_sim.vllm_emulator.memory``) sizes its cache with its own code, in
bytes; this model rounds every term up to whole MB, so it stays on the safe side of it.

vLLM sizes its KV cache after a profiling run (docs, "Engine arguments" /
``gpu_memory_utilization``; ``Worker.determine_available_memory``):

    KV memory = total x gpu_memory_utilization - (weights + peak activation + non-torch)

and rounds the resulting token count down to whole blocks. This module applies that
formula to numbers known before the start (for releases before v0.15.0rc1; see below for
later ones), per NPU of a replica (MB means MiB, the unit
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

Two memory models, chosen by the vllm-ascend release planned (``profiles_memory``):

* Before v0.15.0rc1 (the formula above): ``worker/worker.py@v0.13.0`` budgets
  ``mem_get_info total x util - (torch peak + device used - torch allocated)``, so memory other
  processes hold is subtracted; there is no start-up check. The graph and runtime terms are
  the planner's conservative allowances.
* From v0.15.0rc1 (vllm-ascend #6625, ``vllm_ascend/worker/worker.py@v0.23.0``
  ``_init_device`` / ``determine_available_memory``,
  https://github.com/vllm-project/vllm-ascend/blob/v0.23.0/vllm_ascend/worker/worker.py):
  vLLM's ``MemorySnapshot`` / ``memory_profiling``. ``requested = device_total x util``; the
  engine refuses to start when free memory at start is below it ("Free memory on device
  (F/T GiB) on startup is less than desired GPU memory utilization (U, R GiB). Decrease GPU
  memory utilization or reduce GPU memory used by other processes."), and
  ``KV = requested - (weights + peak activation + non-torch growth)`` (HCCL buffers are that
  growth with TP > 1). Other processes' memory is not subtracted; graph capture runs after the
  KV cache is allocated, in the ``(1 - util)`` headroom, never inside the KV budget.
  ``device_total`` is what torch_npu reports, less than npu-smi's total by the driver's idle
  reservation ("60.86/61.27 GiB" on a 64 GB 910B, vllm-ascend PR #8289): modelled as npu-smi
  total minus ``min(used, driver_reserve_mb)`` (3300 MB, the idle use of a 910B above).
  ``startup_refusal`` and ``capture_warning`` turn the two checks into plan reasons / notes.

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
from ..versioning import compare

MIB = 1 << 20
PROFILING_SINCE = "v0.15.0rc1"


def profiles_memory(vllm_ascend: str | None) -> bool:
    """True when release ``vllm_ascend`` sizes memory with vLLM's profiling (v0.15.0rc1 and
    later); False for older releases and when the release is not known (the older model
    subtracts other processes' memory, the conservative side)."""
    return vllm_ascend is not None and compare(vllm_ascend, PROFILING_SINCE) >= 0


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
    driver_reserve_mb: int = 3300

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
        profiling: bool = False,
    ) -> dict:
        """The per-NPU budget breakdown (MB) and the KV capacity in tokens of one replica.

        ``model`` is ``model_info.inspect_model(...)``'s result (it needs the architecture
        fields and ``weight_bytes_served``). ``profiling``: the v0.15.0rc1+ model (module
        docstring); its breakdown adds ``device_total_mb``, ``free_at_start_mb``,
        ``capture_need_mb`` and ``capture_headroom_mb``.
        """
        model_bytes = model["weight_bytes_served"] + self.vocab_padding_bytes(model)
        replicas = self.replicated_kv_weight_bytes(model, tp)
        weights = -(-(model_bytes + replicas * tp) // (tp * MIB))
        activation = self.activation_mb(model, tp, max_num_seqs)
        graph = 0 if enforce_eager else self.graph_capture_mb
        hccl = self.hccl_buffsize_mb * 2 * self.hccl_communicators if tp > 1 else 0
        per_token = self.kv_bytes_per_token_per_npu(model, tp)
        extra: dict = {}
        if profiling:
            device_total = hbm_total_mb - min(hbm_used_mb, self.driver_reserve_mb)
            usable = int(device_total * gpu_memory_utilization)
            free_at_start = hbm_total_mb - hbm_used_mb
            kv_budget = usable - weights - activation - hccl
            extra = {
                "device_total_mb": device_total,
                "free_at_start_mb": free_at_start,
                "capture_need_mb": graph,
                "capture_headroom_mb": free_at_start - usable,
            }
            graph, runtime, others = 0, 0, 0
        else:
            usable = int(hbm_total_mb * gpu_memory_utilization)
            runtime, others = self.runtime_reserve_mb, hbm_used_mb
            kv_budget = usable - hbm_used_mb - weights - activation - graph - runtime - hccl
        return {
            "memory_model": "profiling" if profiling else "pre-v0.15",
            **extra,
            "hbm_total_mb": hbm_total_mb,
            "gpu_memory_utilization": gpu_memory_utilization,
            "usable_mb": usable,
            "used_by_others_mb": hbm_used_mb,
            "free_for_vllm_mb": usable - others,
            "weights_per_npu_mb": weights,
            "activation_mb": activation,
            "graph_capture_mb": graph,
            "runtime_reserve_mb": runtime,
            "hccl_mb": hccl,
            "kv_budget_mb": kv_budget,
            "kv_bytes_per_token_per_npu": per_token,
            "kv_capacity_tokens": tokens_in(kv_budget * MIB, per_token, self.block_size),
        }


DEFAULT_MODEL = MemoryModel()


def _fix_util(free_mb: int, device_total_mb: int) -> float:
    """The largest two-decimal utilization whose request fits in ``free_mb``."""
    return max(0, free_mb) * 100 // device_total_mb / 100


def startup_refusal(budget: dict, release: str | None) -> str | None:
    """The v0.15.0rc1+ start-up refusal this budget predicts (free HBM at start below
    device total x util), with the numbers and the fix; None when it starts."""
    if "free_at_start_mb" not in budget or budget["free_at_start_mb"] >= budget["usable_mb"]:
        return None
    free, total, util = (
        budget["free_at_start_mb"],
        budget["device_total_mb"],
        budget["gpu_memory_utilization"],
    )
    return (
        f"vllm-ascend {release or PROFILING_SINCE + '+'} would refuse to start: free HBM at start "
        f"{free} MB ({budget['hbm_total_mb']} MB total, {budget['used_by_others_mb']} MB in use "
        f"by the driver and other processes) is less than gpu_memory_utilization {util} x "
        f'{total} MB = {budget["usable_mb"]} MB (vLLM: "Free memory on device ... on startup '
        'is less than desired GPU memory utilization"); lower '
        f"vllm_service_gpu_memory_utilization to {_fix_util(free, total)} or less, or free the "
        "card (npu-smi info lists the processes holding it)"
    )


def capture_warning(budget: dict) -> str | None:
    """A v0.15.0rc1+ graph-capture OOM this budget predicts: capture runs in the HBM left
    after the replica took device total x util, and that is less than the capture estimate."""
    need = budget.get("capture_need_mb") or 0
    headroom = budget.get("capture_headroom_mb")
    if headroom is None or not need or headroom >= need:
        return None
    fix = _fix_util(budget["free_at_start_mb"] - need, budget["device_total_mb"])
    return (
        f"graph capture may run out of HBM: it runs in what is left after the KV cache, "
        f"{headroom} MB (free at start {budget['free_at_start_mb']} MB - "
        f"{budget['usable_mb']} MB for gpu_memory_utilization "
        f"{budget['gpu_memory_utilization']}), less than the {need} MB estimated for it; lower "
        f"vllm_service_gpu_memory_utilization to {fix} or less, or set "
        "vllm_service_enforce_eager: true"
    )


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
    profiling: bool = False,
) -> int:
    """KV tokens one replica can hold: the number the planner sizes against and the
    emulated vLLM reports at start ("GPU KV cache size: N tokens")."""
    return memory_model.budget(
        model,
        hbm_total_mb,
        hbm_used_mb,
        gpu_memory_utilization,
        tp,
        enforce_eager,
        max_num_seqs,
        profiling,
    )["kv_capacity_tokens"]
