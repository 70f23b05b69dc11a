"""When the model says the search is over: the answer is settled, either way.

Two rules, each against every unmeasured configuration's predicted upper bound (the 97.5% point
of its draws; a screened configuration's anchored to its own run):
- speculation off (`OFF`): the study's best measured trial is slower than the baseline beyond the
  Deploy line's own interval (sweep.readout.verdict.against_baseline: paired run for run, else
  the two means' intervals; the caller judges it, `Below`), and no upper bound reaches the
  baseline's lower bound (its value less its 95% half-width). Nothing left is expected to beat
  the baseline, and what the Deploy line will say is already known.
- the winner (`WINNER`): the best measured lower bound (a feasible trial's value less its 95%
  half-width, the largest over the study) is above every upper bound: nothing left is expected
  to beat the best.
Where both hold the first is named: its answer is the one the Deploy line gives. The sweep then
ends, saying which rule fired, how many configurations it ruled out and what it saved of the
budget. It is only asked once the opening is done and the model can predict every level; an
exploration floor does not keep a search alive that a rule ended. It reads the objective's one
value: under a load profile the weighted value, not each level on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from optuna.study import Study

from sweep.study.model.knowledge import measured_metric
from sweep.study.model.sampler import ModelSampler

_SPEC = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")


OFF, WINNER = "speculation off", "winner"


@dataclass(frozen=True)
class Below:
    """The study's best measured trial, slower than the baseline beyond the Deploy line's 95%
    interval, and the baseline's lower bound in the model's metric."""

    best: str  # the trial's name
    speedup: float  # its value / the baseline's
    baseline_lower: float  # the baseline's value less its 95% half-width


@dataclass(frozen=True)
class Stop:
    best_trial: int
    lower_bound: float
    ruled_out: int  # unmeasured configurations, every one's upper bound below lower_bound
    highest_upper: float  # the largest of those upper bounds
    rule: str = WINNER
    below: Below | None = None  # rule OFF: what the Deploy line will say

    def line(self, unit: str) -> str:
        if self.rule == OFF and self.below is not None:
            b = self.below
            left = (
                f"; the highest left {self.highest_upper:.1f}" if self.ruled_out else "; none left"
            )
            return (
                f"model: speculation off is settled: {b.best} reads {b.speedup:.2f}× the "
                "baseline, slower beyond the 95% interval, and no unmeasured configuration's "
                f"predicted upper bound reaches the baseline's lower bound ({b.baseline_lower:.1f} "
                f"{unit}{left}): {self.ruled_out} configurations ruled out"
            )
        if not self.ruled_out:  # nothing unmeasured: no bound to compare
            return (
                f"model: every configuration of search.space is measured; trial_"
                f"{self.best_trial:04d} is the best (its lower bound {self.lower_bound:.1f} {unit})"
            )
        return (
            f"model: no unmeasured configuration can beat trial_{self.best_trial:04d} (its lower "
            f"bound {self.lower_bound:.1f} {unit}; the highest predicted upper bound left "
            f"{self.highest_upper:.1f}): {self.ruled_out} configurations ruled out"
        )


def decide(sampler: ModelSampler, study: Study, below: Below | None = None) -> Stop | None:
    """A Stop when a rule holds, else None (also while the model cannot predict yet); `below`:
    the best measured trial is slower than the baseline beyond its interval (None: it is not,
    or there is no baseline), which arms the speculation-off rule."""
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
    highest = float("nan")
    if state.candidates:
        highest = float(np.percentile(state.draws(state.candidates), 97.5, axis=0).max())
    n = len(state.candidates)
    if below is not None and (n == 0 or highest < below.baseline_lower):
        return Stop(number, lower, n, highest, OFF, below)
    if n == 0 or highest < lower:
        return Stop(number, lower, n, highest)
    return None


def _managed(study: Study) -> set[str]:
    """The knobs a memory policy wrapped around the model sampler chooses itself."""
    managed = getattr(study.sampler, "managed", None)
    return set(managed(study)) if managed is not None else set()
