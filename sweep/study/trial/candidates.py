"""A trial's candidate (the launch as SGLang will run it) and the rule that predicts an OOM.

Before a trial is launched its candidate, after SGLang's own adjustments, is compared with what
the study already knows (`sweep.study.loop.decisions`). Two candidates are the same effective
configuration only when every field SGLang runs with is equal (`key`): a tree and a chain with as
many draft tokens are not, since SGLang selects each round's tree from the draft's scores. A tree
whose topk or steps exceed what its `draft_tokens - 1` verify slots can ever use is dominated
(`dominating`): SGLang verifies the tree of a smaller launch in every round, at more draft work.
A candidate needs at least the memory of one
that ran out of it, so it is not launched, when the OOM was:
- a GPU OOM (activations/CUDA graphs did not fit): it repeats with the same or higher
  mem_fraction_static and the same or more draft tokens and CUDA-graph batch;
- "not enough memory" for the KV pool: it repeats with the same or lower fraction;
- the OOM killer (HiCache pool > host RAM): it repeats with the same or larger pool.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace
from typing import Any

from harness.sglang.speculative import (
    SPEC_MAX_RUNNING_REQUESTS,
    canonical_algorithm,
    captured_graph_max_bs,
    dominated_by,
    forced_draft_tokens,
)
from harness.spec import ServerSpec


@dataclass(frozen=True)
class Candidate:
    """A launch as SGLang will run it. None means "SGLang's own default" (not known before)."""

    context: str  # hash of what is not searched: model, engine, hardware, benchmark, ...
    drafter: str | None
    algorithm: str | None
    steps: int | None
    topk: int | None
    draft_tokens: int | None
    mem_fraction_static: float | None
    hicache_size: int
    cuda_graph: bool
    cuda_graph_max_bs: int | None
    disable_overlap_schedule: bool
    max_running_requests: int | None

    @property
    def key(self) -> str:
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Candidate:
        return cls(**data)


def candidate_for(server: ServerSpec, context: str) -> Candidate:
    """Apply SGLang's adjustments that are known without launching (reference/sglang.md §2)."""
    algorithm = canonical_algorithm(server.speculative_algorithm)
    steps, topk, draft = (
        server.speculative_num_steps,
        server.speculative_eagle_topk,
        server.speculative_num_draft_tokens,
    )
    forced = forced_draft_tokens(steps, topk)
    if forced is not None:
        draft = forced
    max_running = server.max_running_requests
    if max_running is None and algorithm is not None:
        max_running = SPEC_MAX_RUNNING_REQUESTS  # SGLang's reset with speculation
    graph_bs = captured_graph_max_bs(server.cuda_graph_max_bs, max_running)
    return Candidate(
        context=context,
        drafter=server.speculative_draft_model_path,
        algorithm=algorithm,
        steps=steps,
        topk=topk,
        draft_tokens=draft,
        mem_fraction_static=server.mem_fraction_static,
        hicache_size=server.hicache_size,
        cuda_graph=not server.disable_cuda_graph,
        cuda_graph_max_bs=graph_bs,
        disable_overlap_schedule=server.disable_overlap_schedule,
        max_running_requests=max_running,
    )


def dominating(candidate: Candidate) -> tuple[Candidate, str] | None:
    """The smaller launch SGLang 0.5.23 verifies the same tree with in every round, and the
    reason a console and result.json show; None when `candidate` uses all it drafts.
    (harness.sglang.speculative.dominated_by has the derivation from SGLang's source.)"""
    c = candidate
    if c.algorithm is None or None in (c.steps, c.topk, c.draft_tokens):
        return None
    smaller = dominated_by(c.steps, c.topk, c.draft_tokens)  # type: ignore[arg-type]
    if smaller is None:
        return None
    steps, topk, draft = smaller
    slots = c.draft_tokens - 1  # type: ignore[operator]
    reason = (
        f"dominated by {steps}/{topk}/{draft}: SGLang 0.5.23 verifies the {slots} best-scored "
        f"drafts per round (speculative/eagle_utils.py organize_draft_results), so no topk or "
        f"depth above {slots} is ever verified; {c.steps}/{c.topk}/{c.draft_tokens} verifies the "
        "same tree with more draft work: not launched"
    )
    return replace(c, steps=steps, topk=topk, draft_tokens=draft), reason


def _at_least(value, reference) -> bool:
    """value >= reference, where None ("SGLang's default") only compares with None."""
    if value is None or reference is None:
        return value is None and reference is None
    return value >= reference


def predicts_oom(candidate: Candidate, oom: Candidate, kind: str | None) -> bool:
    """Does `candidate` need at least the memory that `oom` ran out of?"""
    same_setup = (
        candidate.context == oom.context
        and candidate.drafter == oom.drafter
        and candidate.algorithm == oom.algorithm
        and candidate.cuda_graph == oom.cuda_graph
        and candidate.max_running_requests == oom.max_running_requests
    )
    if not same_setup:
        return False
    if kind == "gpu":
        return (
            _at_least(candidate.mem_fraction_static, oom.mem_fraction_static)
            and (candidate.draft_tokens or 1) >= (oom.draft_tokens or 1)
            and _at_least(candidate.cuda_graph_max_bs, oom.cuda_graph_max_bs)
        )
    if kind == "kv_pool":
        return _at_least(oom.mem_fraction_static, candidate.mem_fraction_static)
    if kind == "host":
        return oom.hicache_size > 0 and candidate.hicache_size >= oom.hicache_size
    return False
