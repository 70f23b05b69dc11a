"""When the model says the search is over: no unmeasured configuration can beat the best one.

The rule: the best measured lower bound (a feasible trial's value less its 95% half-width,
the largest over the study) is above every unmeasured configuration's predicted upper bound (the
97.5% point of its draws). Then no launch left is expected to find anything better, and the sweep
ends, saying how many configurations that ruled out and what it saved of the budget. It is only
asked once the opening is done and the model can predict every level; an exploration floor does
not keep a search alive that the rule ended.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from optuna.study import Study

from sweep.study.model.knowledge import measured_metric
from sweep.study.model.sampler import ModelSampler

_SPEC = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")


@dataclass(frozen=True)
class Stop:
    best_trial: int
    lower_bound: float
    ruled_out: int  # unmeasured configurations, every one's upper bound below lower_bound
    highest_upper: float  # the largest of those upper bounds

    def line(self, unit: str) -> str:
        return (
            f"model: no unmeasured configuration can beat trial_{self.best_trial:04d} (its lower "
            f"bound {self.lower_bound:.1f} {unit}; the highest predicted upper bound left "
            f"{self.highest_upper:.1f}): {self.ruled_out} configurations ruled out"
        )


def decide(sampler: ModelSampler, study: Study) -> Stop | None:
    """A Stop when the rule holds, else None (also while the model cannot predict yet)."""
    space = sampler.space
    others = tuple(
        sorted(
            n
            for n, p in space.params.items()
            if n not in _SPEC and p.type == "categorical" and n not in _managed(study)
        )
    )
    trials = study.get_trials(deepcopy=False)
    state = sampler.state(trials, others, -1)
    if state.opening() is not None or state.predictor is None or not state.predictor.ready:
        return None
    metric = sampler.objective.metrics[0]
    bounds = [
        (t.number, v - float(t.user_attrs.get("metric_ci95", float("inf"))))
        for t, v in measured_metric(trials, metric)
    ]
    bounds = [(n, b) for n, b in bounds if np.isfinite(b)]
    if not bounds:
        return None
    number, lower = max(bounds, key=lambda nb: nb[1])
    if not state.candidates:
        return Stop(number, lower, 0, float("nan"))
    draws = state.draws(state.candidates)
    upper = np.percentile(draws, 97.5, axis=0)
    if float(upper.max()) >= lower:
        return None
    return Stop(number, lower, len(state.candidates), float(upper.max()))


def _managed(study: Study) -> set[str]:
    """The knobs a memory policy wrapped around the model sampler chooses itself."""
    managed = getattr(study.sampler, "managed", None)
    return set(managed(study)) if managed is not None else set()
