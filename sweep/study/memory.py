"""The memory knobs, chosen from what they can change: an Optuna sampler around the study's own.

`mem_fraction_static` and `hicache_size` change a server's speed little: the fraction sizes the
KV pool (how many requests fit at once) and decides whether the server starts at all, HiCache adds
a host tier for evicted prefixes (a small tax on every step). Neither changes acceptance or the
cost of a decode step at a given batch. So spending the sampler's trials on them only pays where
capacity can move the objective, at concurrency above 1. `search.memory`:

- `pin` (what `auto` picks when the objective reads only concurrency 1): the fraction is held at
  a known-feasible value, the one the study's first started trial ran with (else the first trial's,
  else the lower quarter of the range), moved only where the group's learned boundary
  (`sweep.study.feasibility`) says it would not start; HiCache is held at its smallest choice
  (off). The sampler's budget all goes to the speculative parameters.
- `ceiling` (what `auto` picks when any objective level is above 1): HiCache is sampled like any
  other parameter; the fraction is proposed near the trial's group's OOM boundary, bisecting
  between its largest start and its smallest GPU OOM (a group without evidence of its own starts
  from the other groups'), and, once the bracket is closed on an OOM that only another group's
  evidence gives, that fraction is proposed once to check it (`recheck`).
- `sample`: the study's sampler samples them like every other parameter (the behaviour before
  this module).

The wrapped sampler never models the fraction (it is left out of its relative search space, as
Optuna's PartialFixedSampler leaves out fixed parameters): what it sees of a trial is the
speculative parameters and, under `ceiling`, HiCache.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution
from optuna.samplers import BaseSampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from harness.record.labels import DRAFT, STEPS, TOPK
from sweep.config.fraction import FRACTION
from sweep.study.candidates import Candidate
from sweep.study.feasibility import STARTED, Feasibility, group_of

HICACHE = "hicache_size"
MODES = ("auto", "pin", "ceiling", "sample")
_LEVEL = re.compile(r"_c(\d+)$")
_FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


def objective_levels(objective) -> set[int]:
    """The concurrency levels an objective reads (`levels` when it names them; else read from
    its metric names: `tok_s` is concurrency 1, `output_tok_s_c64` is 64)."""
    levels = getattr(objective, "levels", None)
    if levels:
        return {int(c) for c in levels}
    found = set()
    for metric in objective.metrics:
        match = _LEVEL.search(metric)
        found.add(int(match.group(1)) if match else 1)
    return found


def resolve_mode(mode: str, objective) -> str:
    if mode not in MODES:
        raise ValueError(f"search.memory={mode!r}: use one of {', '.join(MODES)}")
    if mode != "auto":
        return mode
    return "ceiling" if max(objective_levels(objective)) > 1 else "pin"


def _grid(dist: BaseDistribution) -> list[float]:
    if isinstance(dist, CategoricalDistribution):
        return sorted(float(c) for c in dist.choices if c is not None)
    assert isinstance(dist, FloatDistribution)
    if dist.step:
        n = round((dist.high - dist.low) / dist.step)
        return [round(dist.low + i * dist.step, 6) for i in range(n + 1)]
    return [round(dist.low + i * (dist.high - dist.low) / 12, 6) for i in range(13)]


class MemorySampler(BaseSampler):
    def __init__(self, base: BaseSampler, mode: str):
        assert mode in ("pin", "ceiling")
        self.base, self.mode = base, mode
        self.managed = {FRACTION, HICACHE} if mode == "pin" else {FRACTION}

    def reseed_rng(self) -> None:
        self.base.reseed_rng()

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial):
        space = self.base.infer_relative_search_space(study, trial)
        return {k: v for k, v in space.items() if k not in self.managed}

    def sample_relative(self, study: Study, trial: FrozenTrial, search_space) -> dict[str, Any]:
        return self.base.sample_relative(study, trial, search_space)

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution
    ) -> Any:
        if param_name not in self.managed:
            return self.base.sample_independent(study, trial, param_name, param_distribution)
        if param_name == HICACHE:
            choices = list(param_distribution.choices)  # type: ignore[attr-defined]
            numeric = [c for c in choices if isinstance(c, int | float)]
            return min(numeric) if numeric else choices[0]
        value = self.fraction(study, trial, _grid(param_distribution))
        if isinstance(param_distribution, CategoricalDistribution):
            return min(param_distribution.choices, key=lambda c: abs(float(c) - value))
        return value

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self.base.before_trial(study, trial)

    def after_trial(self, study, trial, state, values) -> None:
        self.base.after_trial(study, trial, state, values)

    # -- the fraction ------------------------------------------------------------------------------
    def fraction(self, study: Study, trial: FrozenTrial, grid: list[float]) -> float:
        trials = [t for t in study.get_trials(deepcopy=False) if t.number != trial.number]
        reference = _reference(trials, grid)
        probe = _probe(trials, trial)
        if probe is None:
            return reference
        feasibility = Feasibility([t for t in trials if t.state in _FINISHED])
        b = feasibility.boundary(probe)
        allowed = [
            v for v in grid if (b.ooms is None or v < b.ooms) and (b.floor is None or v > b.floor)
        ]
        if not allowed:
            return reference  # everything predicted to fail: the verdict decides
        if self.mode == "pin":
            if reference in allowed:
                return reference
            if b.fits in allowed:
                return b.fits  # type: ignore[return-value]
            return min(allowed, key=lambda v: abs(v - reference))
        low = b.fits if b.fits is not None else reference
        above = [v for v in allowed if v > low]
        if above:
            return above[len(above) // 2]  # bisect the bracket (fits, ooms)
        if b.ooms is not None and not b.ooms_direct and not feasibility.rechecked(probe):
            return b.ooms  # only another group says it fails here: check it once
        return low if low in allowed else max(allowed)


def _reference(trials: list[FrozenTrial], grid: list[float]) -> float:
    """The fraction of the study's first started trial, else its first trial's, else the lower
    quarter of the range (snapped to the grid)."""
    ordered = sorted(trials, key=lambda t: t.number)
    for t in ordered:
        if t.user_attrs.get("outcome") in STARTED and FRACTION in t.params:
            return _snap(float(t.params[FRACTION]), grid)
    for t in ordered:
        if FRACTION in t.params:
            return _snap(float(t.params[FRACTION]), grid)
    return grid[len(grid) // 4]


def _snap(value: float, grid: list[float]) -> float:
    return min(grid, key=lambda v: abs(v - value))


def _probe(trials: list[FrozenTrial], trial: FrozenTrial) -> Candidate | None:
    """The candidate `trial` is becoming, as far as its sampled values tell (the setup from the
    study's latest candidate; the fraction not yet chosen)."""
    latest = max(
        (t for t in trials if "candidate" in t.user_attrs), key=lambda t: t.number, default=None
    )
    if latest is None:
        return None
    c = Candidate.from_dict(latest.user_attrs["candidate"])
    params = trial.params
    draft = trial.user_attrs.get(f"derived.{DRAFT}", params.get(DRAFT, c.draft_tokens))
    return replace(
        c,
        steps=params.get(STEPS, c.steps),
        topk=params.get(TOPK, c.topk),
        draft_tokens=draft,
        hicache_size=params.get(HICACHE, c.hicache_size),
        mem_fraction_static=None,
    )


def wrap(base: BaseSampler, mode: str, objective) -> BaseSampler:
    """`base` with the memory knobs chosen as `search.memory` says."""
    resolved = resolve_mode(mode, objective)
    return base if resolved == "sample" else MemorySampler(base, resolved)


__all__ = ["MODES", "MemorySampler", "group_of", "objective_levels", "resolve_mode", "wrap"]
