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
exploration floor does not keep a search alive that a rule ended.

Under a load profile (the objective weighs several levels) the answer is per level
(sweep.study.answer.levels), so the same two rules are asked at each level on the model's
per-level predictions (`Knowledge.level_draws`: the level's speed, decode or output tok/s as the
objective reads it) against each level's measurements (the best lower bound at that level, and
the baseline the per-level answer compares with there: a `Below` per level). The sweep ends when
every level is settled, one way or the other, and the line says which rule settled each level.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from optuna.study import Study
from optuna.trial import FrozenTrial

from sweep.study.model.knowledge import Knowledge, measured_metric
from sweep.study.model.observations import ATTR
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


@dataclass(frozen=True)
class LevelStop:
    """One level of a load profile, settled by `rule`: what the stop line says of it."""

    level: int
    rule: str
    best_trial: int | None  # WINNER: the trial with the best lower bound at this level
    lower_bound: float  # WINNER: its lower bound; OFF: the baseline's lower bound
    highest_upper: float  # the largest unmeasured upper bound at this level (nan: none left)
    below: Below | None = None  # OFF: the best measured trial at this level, and the baseline

    def text(self, unit: str) -> str:
        left = "none left"
        if np.isfinite(self.highest_upper):
            left = f"the highest left {self.highest_upper:.1f}"
        if self.rule == OFF and self.below is not None:
            b = self.below
            return (
                f"at {self.level} speculation off ({b.best} reads {b.speedup:.2f}× the baseline, "
                f"slower beyond the 95% interval; no predicted upper bound reaches the "
                f"baseline's lower bound {b.baseline_lower:.1f} {unit}, {left})"
            )
        return (
            f"at {self.level} nothing left beats trial_{self.best_trial:04d} (its lower bound "
            f"{self.lower_bound:.1f} {unit} above every predicted upper bound, {left})"
        )


@dataclass(frozen=True)
class ProfileStop:
    """Every level of a load profile settled: the sweep's answer per level is known."""

    levels: tuple[LevelStop, ...]
    ruled_out: int  # unmeasured configurations, every one ruled out at every level
    rule: str = "every level"

    def line(self, unit: str) -> str:
        said = "; ".join(level.text(unit) for level in self.levels)
        return f"model: every level is settled: {said}: {self.ruled_out} configurations ruled out"


def decide(
    sampler: ModelSampler,
    study: Study,
    below: Below | None = None,
    levels_below: dict[int, Below] | None = None,
) -> Stop | ProfileStop | None:
    """A Stop when a rule holds, else None (also while the model cannot predict yet); `below`:
    the best measured trial is slower than the baseline beyond its interval (None: it is not,
    or there is no baseline), which arms the speculation-off rule. Under a load profile the
    rules are asked per level (`decide_levels`, `levels_below` arming each level's)."""
    state = _state(sampler, study)
    if state is None:
        return None
    if len(sampler.target.levels) > 1:
        return decide_levels(sampler, state, levels_below or {})
    trials = state.trials
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


def decide_levels(
    sampler: ModelSampler, state: Knowledge, below: dict[int, Below]
) -> ProfileStop | None:
    """Every level settled, each by speculation off (`below[level]` armed, and no unmeasured
    configuration's upper bound at that level reaches the baseline's lower bound there) or by
    its winner (the best lower bound at that level above every upper bound there); None while
    one level is not."""
    measured = [t for t, _ in measured_metric(state.trials, sampler.objective.metrics[0])]
    draws = state.level_draws(state.candidates) if state.candidates else {}
    settled = []
    for c in sampler.target.levels:
        highest = float("nan")
        if state.candidates:
            highest = float(np.percentile(draws[c], 97.5, axis=0).max())
        none_left = not state.candidates
        off = below.get(c)
        if off is not None and (none_left or highest < off.baseline_lower):
            settled.append(LevelStop(c, OFF, None, off.baseline_lower, highest, off))
            continue
        bounds = [
            (t.number, lower)
            for t in measured
            if (lower := _level_lower(t, c, sampler.target.speed)) is not None
        ]
        if not bounds:
            return None
        number, lower = max(bounds, key=lambda nb: nb[1])
        if not (none_left or highest < lower):
            return None
        settled.append(LevelStop(c, WINNER, number, lower, highest))
    return ProfileStop(tuple(settled), len(state.candidates))


def _level_lower(trial: FrozenTrial, level: int, speed: str) -> float | None:
    """A trial's speed at `level` less its 95% half-width, from what the model fits
    (`observations.ATTR`); None where it has none there or no finite interval."""
    data = (trial.user_attrs.get(ATTR) or {}).get("levels", {}).get(str(level)) or {}
    value, ci = data.get(speed), data.get(f"{speed}_ci")
    if value is None or ci is None or not np.isfinite(ci):
        return None
    return float(value) - float(ci)


def _state(sampler: ModelSampler, study: Study) -> Knowledge | None:
    """What the study knows between trials, or None while the opening runs or the model cannot
    predict every level yet."""
    others = tuple(
        sorted(
            n
            for n, p in sampler.space.params.items()
            if n not in _SPEC and p.type == "categorical" and n not in _managed(study)
        )
    )
    state = sampler.state(study.get_trials(deepcopy=False), others, -1)
    if state.opening() is not None or state.predictor is None or not state.predictor.ready:
        return None
    return state


def _managed(study: Study) -> set[str]:
    """The knobs a memory policy wrapped around the model sampler chooses itself."""
    managed = getattr(study.sampler, "managed", None)
    return set(managed(study)) if managed is not None else set()
