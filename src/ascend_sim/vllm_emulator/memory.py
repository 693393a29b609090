"""KV-cache sizing at start-up: the planner's formula, literally the same function.

vLLM's documented rule (vllm-ascend ``worker_v1.determine_available_memory``, vLLM
``gpu_worker``): the instance may use ``total x gpu_memory_utilization``; from that it
subtracts the weights, the peak activation of the profiling run and the memory it did not
allocate itself (runtime buffers, the driver's idle use, other processes). What remains is
the KV cache, cut into blocks of 128 tokens on Ascend; ``num_blocks x block_size`` is the
"GPU KV cache size" it logs. ``ascend_deploy.memory_model`` holds that formula and its
constants (with their sources); the emulator calls ``MemoryModel.budget`` so that a plan
the planner accepts is exactly what the emulated vLLM accepts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ascend_deploy.memory_model import DEFAULT_MODEL, MemoryModel

MIB = 1024 * 1024
GIB = 1024 * MIB
BLOCK_SIZE = DEFAULT_MODEL.block_size


@dataclass
class KvBudget:
    """One rank's start-up memory terms in bytes (from ``MemoryModel.budget``)."""

    total: int
    utilization: float
    requested: int  # total x utilization
    used_before: int  # idle driver use + other processes, as npu-smi shows before the start
    others: int  # of which: other processes' memory (from the live registry)
    weights: int  # this rank's share
    activation: int
    graph: int
    runtime: int  # runtime reserve + HCCL buffers
    available_kv: int  # may be <= 0
    kv_bytes_per_token: int  # per rank
    num_blocks: int
    tokens: int  # num_blocks x block_size
    plan: dict  # the planner's breakdown (MB)

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


def kv_budget(
    model: dict,
    hbm_total_mb: int,
    idle_used_mb: int,
    others_mb: int,
    tp: int = 1,
    gpu_memory_utilization: float = 0.9,
    enforce_eager: bool = False,
    max_num_seqs: int | None = None,
    memory_model: MemoryModel = DEFAULT_MODEL,
) -> KvBudget:
    """The KV cache one rank gets. ``model`` is ``model_info.inspect_model``'s result."""
    used = idle_used_mb + others_mb
    b = memory_model.budget(
        model,
        hbm_total_mb=hbm_total_mb,
        hbm_used_mb=used,
        gpu_memory_utilization=gpu_memory_utilization,
        tp=tp,
        enforce_eager=enforce_eager,
        max_num_seqs=max_num_seqs,
    )
    tokens = int(b["kv_capacity_tokens"])
    return KvBudget(
        total=hbm_total_mb * MIB,
        utilization=gpu_memory_utilization,
        requested=int(b["usable_mb"]) * MIB,
        used_before=used * MIB,
        others=others_mb * MIB,
        weights=int(b["weights_per_npu_mb"]) * MIB,
        activation=int(b["activation_mb"]) * MIB,
        graph=int(b["graph_capture_mb"]) * MIB,
        runtime=(int(b["runtime_reserve_mb"]) + int(b["hccl_mb"])) * MIB,
        available_kv=int(b["kv_budget_mb"]) * MIB,
        kv_bytes_per_token=int(b["kv_bytes_per_token_per_npu"]),
        num_blocks=tokens // memory_model.block_size,
        tokens=tokens,
        plan=b,
    )
