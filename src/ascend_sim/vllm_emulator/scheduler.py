"""KV-capacity enforcement: admission, block growth and preemption by recomputation.

Like vLLM's scheduler, requests hold whole KV blocks for their tokens. A waiting request
is admitted first-come-first-served while ``max_num_seqs`` and the free blocks allow;
a running request that needs a new block when none is free preempts the most recently
admitted other request (its blocks are freed; it goes back to the front of the queue and
recomputes its tokens when re-admitted), with vLLM's preemption warning.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from . import messages as M
from .metrics import Metrics
from .vlog import VLog


@dataclass(eq=False)
class Request:
    request_id: str
    prompt_tokens: int
    generated: int = 0
    blocks: int = 0
    admitted: bool = False
    preempted: bool = False
    times_preempted: int = 0
    arrival: float = field(default_factory=time.monotonic)
    first_token_at: float | None = None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.generated


class Scheduler:
    """Thread-safe accounting of KV blocks among concurrent requests."""

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        max_num_seqs: int,
        log: VLog,
        metrics: Metrics,
        wait_timeout_s: float = 600.0,
    ):
        if num_blocks < 1:
            raise ValueError("the scheduler needs at least one KV block")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.max_num_seqs = max_num_seqs
        self.free_blocks = num_blocks
        self.running: list[Request] = []
        self.waiting: deque[Request] = deque()
        self.cond = threading.Condition()
        self.log = log
        self.metrics = metrics
        self.wait_timeout_s = wait_timeout_s
        self.total_preemptions = 0
        self._seq = itertools.count()

    def _blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def _update_metrics(self) -> None:
        with self.metrics.lock:
            self.metrics.running = len(self.running)
            self.metrics.waiting = len(self.waiting)
            self.metrics.kv_usage = 1.0 - self.free_blocks / self.num_blocks

    def _admit_waiting(self) -> None:
        """Admit from the head of the queue while the limits allow (caller holds the lock)."""
        while self.waiting and len(self.running) < self.max_num_seqs:
            head = self.waiting[0]
            need = self._blocks_for(head.tokens + 1)
            if need > self.free_blocks:
                break
            self.waiting.popleft()
            self.free_blocks -= need
            head.blocks = need
            head.admitted = True
            if head.preempted:
                head.preempted = False
                self.log.info(
                    "scheduler.py:495", M.RESUMED.format(req=head.request_id), "EngineCore_DP0"
                )
            self.running.append(head)
        self._update_metrics()
        self.cond.notify_all()

    def _wait_admitted(self, req: Request) -> None:
        deadline = time.monotonic() + self.wait_timeout_s
        while not req.admitted:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"request {req.request_id} waited {self.wait_timeout_s:.0f} s")
            self.cond.wait(timeout=min(left, 1.0))

    def add(self, req: Request) -> None:
        """Queue ``req`` and block until it is admitted (its prompt blocks reserved)."""
        with self.cond:
            self.waiting.append(req)
            self._admit_waiting()
            try:
                self._wait_admitted(req)
            except TimeoutError:
                if req in self.waiting:
                    self.waiting.remove(req)
                self._update_metrics()
                raise

    def _preempt(self, victim: Request) -> None:
        self.running.remove(victim)
        self.free_blocks += victim.blocks
        victim.blocks = 0
        victim.admitted = False
        victim.preempted = True
        victim.times_preempted += 1
        self.waiting.appendleft(victim)
        self.total_preemptions += 1
        with self.metrics.lock:
            self.metrics.preemptions += 1
        self.log.warning(
            "scheduler.py:1141",
            M.PREEMPTED.format(req=victim.request_id, total=self.total_preemptions),
            "EngineCore_DP0",
        )

    def reserve_next(self, req: Request) -> None:
        """Make room for ``req``'s next token; preempt others or wait when the cache is full."""
        with self.cond:
            if req.preempted or not req.admitted:
                self._wait_admitted(req)  # preempted: recompute once re-admitted
            need = self._blocks_for(req.tokens + 1)
            while req.blocks < need:
                if self.free_blocks > 0:
                    self.free_blocks -= 1
                    req.blocks += 1
                    continue
                victims = [r for r in self.running if r is not req]
                if victims:
                    self._preempt(victims[-1])
                    continue
                # Alone and out of blocks cannot happen: max_model_len <= capacity.
                raise RuntimeError("KV cache exhausted by a single request")
            self._update_metrics()

    def finish(self, req: Request) -> None:
        with self.cond:
            if req in self.running:
                self.running.remove(req)
            if req in self.waiting:
                self.waiting.remove(req)
            self.free_blocks += req.blocks
            req.blocks = 0
            req.admitted = False
            self._admit_waiting()

    def snapshot(self) -> dict:
        with self.cond:
            return {
                "running": len(self.running),
                "waiting": len(self.waiting),
                "free_blocks": self.free_blocks,
                "num_blocks": self.num_blocks,
                "usage": 1.0 - self.free_blocks / self.num_blocks,
                "preemptions": self.total_preemptions,
            }
