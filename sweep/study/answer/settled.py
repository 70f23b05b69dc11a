"""Whether the study's answer is already "speculation off", judged as the Deploy line judges it.

The best measured trial by the study's ranking (over a latency limit never: `infeasible`), slower
than the baseline beyond the 95% interval of `against_baseline` (paired run for run where run r
of both sent the same prompts, else the two means' intervals): the Deploy line
(sweep.study.answer.recommendation) then says "speculation off" whatever is measured next, unless
a configuration still to launch beats the baseline. Whether one can is the model's question
(sweep.study.model.stopping), asked with the baseline's lower bound this gives it.

Under a load profile the answer is per level (sweep.study.answer.levels): `slower_per_level` asks
the same at each level, in the speed the model predicts there (decode or output tok/s, as the
objective weighs it), against the baseline the per-level answer uses at that level (the uncapped
one above the equal cap, where the study measured it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.record.results import Outcome, TrialResult
from harness.record.stats import paired_ratio
from sweep.readout.ranking import for_objective
from sweep.readout.verdict import against_baseline, best_of
from sweep.study.answer.levels import runs_at, stat, violations_at
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


def slower_per_level(
    results: list[TrialResult],
    baseline: TrialResult | None,
    objective: Objective,
    speed: str,
    uncapped: TrialResult | None = None,
    cap: int | None = None,
) -> dict[int, SlowerBest]:
    """Each level of the objective where the fastest measured trial (within the latency limits
    there) is slower than the baseline beyond the interval, in `speed` ("decode" or "output"
    tok/s): the paired 95% interval of the ratio entirely below 1, or without pairs, its upper
    bound below the baseline's lower bound. Above the equal `cap` the `uncapped` baseline is the
    one compared with, as the per-level answer does."""
    metric = f"{speed}_tok_s"
    measured = [r for r in results if r.outcome is Outcome.OK and r.role != "baseline"]
    out = {}
    for level in objective.levels or []:
        base = baseline
        if uncapped is not None and uncapped.outcome is Outcome.OK and cap and level > cap:
            base = uncapped
        if base is None or base.outcome is not Outcome.OK:
            continue
        base_runs = runs_at(base.runs, level, metric)
        base_stat = stat(base_runs)
        ranked = [
            (found, r)
            for r in measured
            if not violations_at(objective, r, level)
            and (found := stat(runs_at(r.runs, level, metric))) is not None
        ]
        if base_stat is None or base_stat[1] is None or not ranked:
            continue
        (value, ci), best = max(ranked, key=lambda item: item[0][0])
        base_value, base_ci = base_stat
        ratio = paired_ratio(runs_at(best.runs, level, metric), base_runs)
        if math.isfinite(ratio.high):
            slower = ratio.high < 1
        else:
            slower = ci is not None and value + ci < base_value - base_ci
        if slower:
            out[level] = SlowerBest(best.name, value / base_value, base_value - base_ci)
    return out
