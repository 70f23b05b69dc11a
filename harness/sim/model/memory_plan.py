"""A launch's GPU memory as SGLang 0.5.23 plans it: the KV pool its fraction leaves, what the
CUDA graphs take, and which start-up failure, if any, the plan ends in
(harness.sim.model.perf_model's docstring, "Memory per GPU", has the formulas;
`PerfModel.memory_plan` computes a plan)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol


class Speculation(Protocol):
    """What the graphs' memory reads of perf_model.Speculation (it imports this module)."""

    steps: int
    topk: int
    draft_tokens: int


@dataclass(frozen=True)
class MemoryPlan:
    gpu_mib: float
    static_mib: float
    weights_mib: float
    kv_pool_mib: float
    kv_tokens: int
    non_static_mib: float  # what activations + graphs need
    graph_mib: float
    # None, "kv_pool" (too low), "no_kv_room" (the weights fill the static budget: 0.5.23's
    # "Loaded weights leave no GPU memory"), "graph_oom" (too high), "host_oom"
    failure: str | None
    host_needed_gb: float
    pool_note: str | None = None  # SGLang's warning when --max-total-tokens exceeds the pool

    def capped(self, max_total_tokens: int | None) -> MemoryPlan:
        """The pool under --max-total-tokens, as 0.5.23 applies it
        (kv_cache_configurator.py _apply_token_constraints): the smaller of the two, with a
        warning when the cap is the larger."""
        if max_total_tokens is None or self.failure is not None or self.kv_tokens <= 0:
            return self
        if max_total_tokens > self.kv_tokens:
            note = (
                f"max_total_tokens={max_total_tokens} is larger than the profiled value "
                f"{self.kv_tokens}. Use the profiled value instead."
            )
            return replace(self, pool_note=note)
        share = max_total_tokens / self.kv_tokens
        return replace(self, kv_tokens=max_total_tokens, kv_pool_mib=self.kv_pool_mib * share)


CUDA_GRAPH_FIXED_MIB = 300  # once per server, whatever it captures


def cuda_graph_mib(
    graph_max_bs: int, spec: Speculation | None, fixed_mib: float = CUDA_GRAPH_FIXED_MIB
) -> float:
    """The memory the CUDA graphs of one configuration take (`spec`; None: no speculation),
    captured up to `graph_max_bs`, with `fixed_mib` on top (the module docstring's Memory):

        fixed + 1.6 MiB * bs * tokens per request + 0.8 MiB * bs * topk * steps

    An adaptive server captures every candidate's graphs at start-up; those past the launch's
    share its fixed part (`fixed_mib=0`, harness.sim.model.adaptive)."""
    per_req = spec.draft_tokens if spec else 1
    mib = fixed_mib + 1.6 * graph_max_bs * per_req
    if spec:
        mib += 0.8 * graph_max_bs * spec.topk * spec.steps
    return mib
