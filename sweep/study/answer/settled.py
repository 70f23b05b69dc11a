"""Whether the study's answer is already "speculation off", judged as the Deploy line judges it.

The best measured trial by the study's ranking (over a latency limit never: `infeasible`), slower
than the baseline beyond the 95% interval of `against_baseline` (paired run for run where run r
of both sent the same prompts, else the two means' intervals): the Deploy line
(sweep.study.answer.recommendation) then says "speculation off" whatever is measured next, unless
a configuration still to launch beats the baseline. Whether one can is the model's question
(sweep.study.model.stopping), asked with the baseline's lower bound this gives it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.record.results import Outcome, TrialResult
from sweep.readout.ranking import for_objective
from sweep.readout.verdict import against_baseline, best_of
from sweep.study.trial.objective import Objective, infeasible


@dataclass(frozen=True)
class SlowerBest:
    best: str  # the best measured trial's name
    speedup: float  # its value / the baseline's
    baseline_lower: float  # the baseline's value less its 95% half-width, in the ranking's metric


def slower_best(
    results: list[TrialResult], baseline: TrialResult | None, objective: Objective
) -> SlowerBest | None:
    """The best measured trial when it is slower than the baseline beyond the interval; None when
    it is not, nothing is measured in full, there is no baseline, or the ranking reads another
    value than the objective the model predicts (then the two cannot be compared)."""
    ranking = for_objective(objective)
    if baseline is None or baseline.outcome is not Outcome.OK:
        return None
    if ranking.metric != objective.metrics[0]:
        return None
    best = best_of(results, set(infeasible(results, objective)), ranking)
    versus = against_baseline(best, baseline, ranking) if best is not None else None
    if best is None or versus is None or not versus.slower:
        return None
    value, ci = ranking.value(baseline), ranking.ci95(baseline)
    if value is None or ci is None or not math.isfinite(ci):
        return None
    return SlowerBest(best.name, versus.speedup, value - ci)
