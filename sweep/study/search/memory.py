"""The memory knobs, chosen from what they can change: an Optuna sampler around the study's own.

`mem_fraction_static` and `hicache_size` change a server's speed little: the fraction sizes the
KV pool (how many requests fit at once) and decides whether the server starts at all, HiCache adds
a host tier for evicted prefixes (a small tax on every step). Neither changes acceptance or the
cost of a decode step at a given batch. So spending the sampler's trials on them only pays where
capacity can move the objective: where the KV pool binds at the highest level the objective
reads. `search.memory`:

- `auto` (the default): `pin` when the objective reads only concurrency 1; over a load profile,
  decided per study from the servers that started (`sweep.study.trial.capacity`): `pin` while none
  has started (the reference is what starts first) and while every started server's reported KV pool
  (`max_total_num_tokens`) holds, with a margin, what the highest level keeps in flight; `ceiling`
  from the first one whose pool does not (there a larger pool admits more requests at once). A
  measured reason: on the PCIe box the pool holds 116k tokens at 0.85 against ~40k with 48
  running, and bisecting the fraction there took 15.58 GPU-hours where the pinned search took
  6.05 (search_efficiency, multi-level). Without the benchmark's lengths (`demand`) the pool
  cannot be judged, and auto is `ceiling` over a load profile, as before.
- `pin`: the fraction is held at a known-feasible value, the one the study's first started trial
  ran with (else the enqueued prior's, else the first trial's, else the lower quarter of the
  range), moved only where the group's learned boundary (`sweep.study.trial.feasibility`) says it
  would not start; HiCache is held at its smallest choice (off). The sampler's budget all goes to
  the speculative parameters.
- `ceiling`: HiCache is sampled like any other parameter; the fraction is proposed near the
  trial's group's OOM boundary, bisecting between its largest start and its smallest GPU OOM (a
  group without evidence of its own starts from the other groups'), and, once the bracket is
  closed on an OOM that only another group's evidence gives, that fraction is proposed once to
  check it (`recheck`).
- `sample`: the study's sampler samples them like every other parameter (the behaviour before
  this module).

While no trial has started, a reference known to fail (a GPU OOM at or below it, a KV pool too
small at or above it: the weights leave it no room) is moved by bisection, to the middle of the
grid between the largest KV-pool failure and the smallest GPU OOM: on a card where the configured
fraction does not start, each failure halves the bracket rather than moving one grid step; a
group that ran out where the others start is bisected the same way between the floor and its own
OOM. The priors (`sweep.study.search.priors`, which enqueue their fraction as the PRIOR_FRACTION
user attribute, not as a fixed parameter the sampler never sees) are not spent at a fraction known
to fail: a prior runs at its fraction unless such a failure is known, else at the reference.

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
from sweep.study.trial import capacity
from sweep.study.trial.candidates import Candidate
from sweep.study.trial.capacity import Demand
from sweep.study.trial.feasibility import STARTED, Boundary, Feasibility, group_of
from sweep.study.trial.screened import screen_fraction

HICACHE = "hicache_size"
PRIOR_FRACTION = f"prior.{FRACTION}"  # an enqueued prior's fraction, as a user attribute
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
    """`pin`, `ceiling` or `sample` as asked; `auto` is `pin` at concurrency 1 and stays `auto`
    (decided per study by the reported KV pool, `MemorySampler.policy`) over a load profile."""
    if mode not in MODES:
        raise ValueError(f"search.memory={mode!r}: use one of {', '.join(MODES)}")
    if mode != "auto":
        return mode
    return "auto" if max(objective_levels(objective)) > 1 else "pin"


def policies(mode: str, objective, demand: Demand | None) -> tuple[str, ...]:
    """The policies the sampled trials of a new study run under, in order: `("pin",)`,
    `("ceiling",)` or `("sample",)`; auto over a load profile is `("pin", "ceiling")` (pinned
    until a started server's KV pool binds, `MemorySampler.policy`), or `("ceiling",)` where the
    benchmark's lengths are unknown and the pool cannot be judged."""
    resolved = resolve_mode(mode, objective)
    if resolved != "auto":
        return (resolved,)
    return ("ceiling",) if demand is None else ("pin", "ceiling")


def held_by(policy: str) -> set[str]:
    """The knobs `policy` holds at one value: both under `pin` (the fraction moved only down where
    it would not start); none under `ceiling` (the fraction bisected up towards the OOM boundary,
    HiCache sampled) or `sample`."""
    return {FRACTION, HICACHE} if policy == "pin" else set()


def held_hicache(dist: BaseDistribution) -> Any:
    """The HiCache size `pin` holds: the smallest numeric choice (0: off), or the range's low."""
    if isinstance(dist, CategoricalDistribution):
        numeric = [c for c in dist.choices if isinstance(c, int | float)]
        return min(numeric) if numeric else dist.choices[0]
    return dist.low  # type: ignore[attr-defined]


def opening_fraction(grid: list[float], prior: float | None = None) -> float:
    """The reference a study holds before any trial has run: the first enqueued prior's fraction
    (snapped to the grid), else the lower quarter of the range."""
    return _snap(float(prior), grid) if prior is not None else grid[len(grid) // 4]


def fraction_grid(dist: BaseDistribution) -> list[float]:
    """The fractions the policy chooses from: the choices, the step grid, or 13 points."""
    if isinstance(dist, CategoricalDistribution):
        return sorted(float(c) for c in dist.choices if c is not None)
    assert isinstance(dist, FloatDistribution)
    if dist.step:
        n = round((dist.high - dist.low) / dist.step)
        return [round(dist.low + i * dist.step, 6) for i in range(n + 1)]
    return [round(dist.low + i * (dist.high - dist.low) / 12, 6) for i in range(13)]


class MemorySampler(BaseSampler):
    """`mode`: `pin`, `ceiling`, or `auto` (each trial gets `policy(study)`: `ceiling` once the
    KV pool binds at `level` for `demand`, else `pin`)."""

    def __init__(self, base: BaseSampler, mode: str, level: int = 1, demand: Demand | None = None):
        assert mode in ("pin", "ceiling", "auto")
        self.base, self.mode, self.level, self.demand = base, mode, level, demand
        # what the wrapped sampler chose for each trial (a knob suggested after the fraction,
        # HiCache, is known from here before it is suggested)
        self.relative: dict[int, dict[str, Any]] = {}

    def policy(self, study: Study) -> str:
        """`pin` or `ceiling` for the study's next trial, read from its trials (so a resumed
        study, or another worker, decides the same)."""
        if self.mode != "auto":
            return self.mode
        if self.demand is None:
            return "ceiling"  # the pool cannot be judged: auto's rule before it could
        trials = study.get_trials(deepcopy=False)
        return "ceiling" if capacity.binds(trials, self.level, self.demand) else "pin"

    def managed(self, study: Study) -> set[str]:
        """Out of the wrapped sampler's space: the fraction always, and what the policy holds."""
        return {FRACTION} | held_by(self.policy(study))

    def reseed_rng(self) -> None:
        self.base.reseed_rng()

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial):
        space = self.base.infer_relative_search_space(study, trial)
        managed = self.managed(study)
        return {k: v for k, v in space.items() if k not in managed}

    def sample_relative(self, study: Study, trial: FrozenTrial, search_space) -> dict[str, Any]:
        values = self.base.sample_relative(study, trial, search_space)
        self.relative[trial.number] = dict(values)
        return values

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution
    ) -> Any:
        policy = self.policy(study)
        if param_name not in (FRACTION, HICACHE) or (param_name == HICACHE and policy != "pin"):
            return self.base.sample_independent(study, trial, param_name, param_distribution)
        if param_name == HICACHE:
            return held_hicache(param_distribution)
        value = self.fraction(study, trial, fraction_grid(param_distribution), policy)
        if isinstance(param_distribution, CategoricalDistribution):
            return min(param_distribution.choices, key=lambda c: abs(float(c) - value))
        return value

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self.base.before_trial(study, trial)

    def after_trial(self, study, trial, state, values) -> None:
        self.base.after_trial(study, trial, state, values)

    # -- the fraction ------------------------------------------------------------------------------
    def fraction(
        self, study: Study, trial: FrozenTrial, grid: list[float], policy: str | None = None
    ) -> float:
        policy = policy or self.policy(study)
        trials = [t for t in study.get_trials(deepcopy=False) if t.number != trial.number]
        feasibility = Feasibility([t for t in trials if t.state in _FINISHED])
        reference = _reference(trials, trial, grid)
        if not any(t.user_attrs.get("outcome") in STARTED for t in trials):
            reference = _between_failures(reference, feasibility, grid)
        prior = trial.user_attrs.get(PRIOR_FRACTION)
        if prior is not None and policy != "pin" and not _known_to_fail(prior, feasibility):
            reference = _snap(float(prior), grid)  # a prior runs where it was configured to
        probe = _probe(trials, trial, self.relative.get(trial.number, {}))
        if probe is None:
            return reference
        screened = screen_fraction(trials, probe)
        if screened is not None:  # its full launch: the same server as its screen
            return _snap(screened, grid)
        b = feasibility.boundary(probe)
        allowed = [
            v for v in grid if (b.ooms is None or v < b.ooms) and (b.floor is None or v > b.floor)
        ]
        if not allowed:
            return reference  # everything predicted to fail: the verdict decides
        if policy == "pin" or prior is not None:
            return _held(reference, b, allowed)
        low = b.fits if b.fits is not None else reference
        above = [v for v in allowed if v > low]
        if above:
            return above[len(above) // 2]  # bisect the bracket (fits, ooms)
        if b.ooms is not None and not b.ooms_direct and not feasibility.rechecked(probe):
            return b.ooms  # only another group says it fails here: check it once
        return low if low in allowed else max(allowed)


def _held(reference: float, b: Boundary, allowed: list[float]) -> float:
    """The reference where its group starts there; else the group's largest known start; else
    the middle of the allowed bracket (between the KV-pool floor and the smallest GPU OOM), so a
    reference that fails is bisected towards a start, not stepped a grid point per failure."""
    if reference in allowed:
        return reference
    if b.fits in allowed:
        return b.fits  # type: ignore[return-value]
    return allowed[len(allowed) // 2]


def _reference(trials: list[FrozenTrial], trial: FrozenTrial, grid: list[float]) -> float:
    """The fraction of the study's first started trial; else the enqueued prior's (this trial's
    own, else the study's first); else its first trial's; else the lower quarter of the range
    (snapped to the grid)."""
    ordered = sorted(trials, key=lambda t: t.number)
    for t in ordered:
        if t.user_attrs.get("outcome") in STARTED and FRACTION in t.params:
            return _snap(float(t.params[FRACTION]), grid)
    for t in (trial, *ordered):
        if t.user_attrs.get(PRIOR_FRACTION) is not None:
            return opening_fraction(grid, t.user_attrs[PRIOR_FRACTION])
    for t in ordered:
        if FRACTION in t.params:
            return _snap(float(t.params[FRACTION]), grid)
    return opening_fraction(grid)


def _known_to_fail(fraction: float, feasibility: Feasibility) -> bool:
    """Did any group run out of GPU memory at or below `fraction`, or find its KV pool too small
    at or above it (the pool's floor does not depend on the group: it is the weights' share)?"""
    for p in feasibility.points:
        m = p.candidate.mem_fraction_static
        if m is None:
            continue
        if (p.oom_kind == "gpu" and m <= fraction + 1e-9) or (
            p.oom_kind == "kv_pool" and m >= fraction - 1e-9
        ):
            return True
    return False


def _between_failures(reference: float, feasibility: Feasibility, grid: list[float]) -> float:
    """With no start known yet: the reference, or, where it is known to fail (a GPU OOM at or
    below it, a KV pool too small at or above it), the middle of the grid between the largest
    KV-pool failure and the smallest GPU OOM. Each failure halves the bracket: on a card where
    the configured fraction leaves the weights no KV room, the next launch goes halfway up, not
    one grid step (a step per failure took 8 failed launches from 0.85 to 0.93)."""
    if not _known_to_fail(reference, feasibility):
        return reference
    fractions = [
        (p.candidate.mem_fraction_static, p.oom_kind)
        for p in feasibility.points
        if p.candidate.mem_fraction_static is not None
    ]
    ooms = min((m for m, kind in fractions if kind == "gpu"), default=None)
    floor = max((m for m, kind in fractions if kind == "kv_pool"), default=None)
    inside = [
        v for v in grid if (ooms is None or v < ooms - 1e-9) and (floor is None or v > floor + 1e-9)
    ]
    return inside[len(inside) // 2] if inside else reference


def _snap(value: float, grid: list[float]) -> float:
    return min(grid, key=lambda v: abs(v - value))


def _probe(
    trials: list[FrozenTrial], trial: FrozenTrial, relative: dict[str, Any] | None = None
) -> Candidate | None:
    """The candidate `trial` is becoming, as far as its values tell (those suggested, and
    `relative`: what the wrapped sampler chose for it; the setup from the study's latest
    candidate; the fraction not yet chosen)."""
    latest = max(
        (t for t in trials if "candidate" in t.user_attrs), key=lambda t: t.number, default=None
    )
    if latest is None:
        return None
    c = Candidate.from_dict(latest.user_attrs["candidate"])
    params = {**(relative or {}), **trial.params}
    draft = trial.user_attrs.get(f"derived.{DRAFT}", params.get(DRAFT, c.draft_tokens))
    return replace(
        c,
        steps=params.get(STEPS, c.steps),
        topk=params.get(TOPK, c.topk),
        draft_tokens=draft,
        hicache_size=params.get(HICACHE, c.hicache_size),
        mem_fraction_static=None,
    )


def wrap(base: BaseSampler, mode: str, objective, demand: Demand | None = None) -> BaseSampler:
    """`base` with the memory knobs chosen as `search.memory` says; `demand`: what one request
    of the benchmark holds in the KV pool (`capacity.demand_for`), which `auto` judges it by."""
    resolved = resolve_mode(mode, objective)
    if resolved == "sample":
        return base
    return MemorySampler(base, resolved, max(objective_levels(objective)), demand)


__all__ = [
    "MODES",
    "PRIOR_FRACTION",
    "MemorySampler",
    "fraction_grid",
    "group_of",
    "held_by",
    "held_hicache",
    "objective_levels",
    "opening_fraction",
    "policies",
    "resolve_mode",
    "wrap",
]
