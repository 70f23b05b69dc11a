"""The configurations a study measures before its sampler proposes anything.

`search.enqueue` always (by default SGLang's recommended EAGLE-3 chain, 3/1/4), and, when the
objective reads a level above one request in flight, `search.enqueue_under_load` too (by default
the one-step chain, 1/1/2). Speculation's best depth falls with batch size: SGLang's own adaptive
defaults (0.5.23 `speculative/adaptive_spec_params.py`) run 1, 3, 5 or 7 steps at batch 1 and
at most 1 from batch 32, so a study over a load profile measures both ends of the chain first
and the sampler starts from a bracket instead of from the single-stream end alone.
"""

from __future__ import annotations

from typing import Any

from sweep.study.memory import objective_levels


def first_trials(search: Any, objective) -> list[dict[str, Any]]:
    """The parameter sets to enqueue, in order, for this objective."""
    trials = [dict(p) for p in (search.get("enqueue") or [])]
    if max(objective_levels(objective)) > 1:
        trials += [dict(p) for p in (search.get("enqueue_under_load") or [])]
    return trials
