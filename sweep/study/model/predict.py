"""The study's objective for every configuration it could launch, with an interval.

Per level the objective reads: tau from the drafter's acceptance model (`acceptance`), seconds
per iteration from the cost model (`cost`), speed = tau / t; the objective is the weighted sum of
the levels' speeds (`weighted_*`), or the one level's (`tok_s`, `speedup` in tok/s, `throughput`).
Output speeds over all streams at a level whose running requests the launches reported are fitted
as a step time at the batch each launch ran (the cost model's rows carry the running requests: a
larger batch steps slower) and multiplied back by the requests the candidate's KV pool admits at
the fraction it runs at (`admission`), so two launches apart only in the fraction are two pools,
not one configuration's noise.
Every prediction is SAMPLES joint draws (acceptance rates, the sibling factor, the cost
coefficients and each form's misfit): its mean and its 2.5-97.5% band are what the console, the
proposer and the stopping rule read. The Pareto objectives (`tok_s+throughput`,
`per_level_speed`) have no single value to predict: the model sampler refuses them.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.sglang.speculative import draft_tree_capacity, forced_draft_tokens
from sweep.study.model import admission
from sweep.study.model.acceptance import AcceptanceModel, Measured
from sweep.study.model.cost import CostModel, CostPoint, features
from sweep.study.model.observations import UNKNOWN_NOISE, Observation
from sweep.study.search.memory import objective_levels
from sweep.study.search.space import DRAFT, STEPS, TOPK, SearchSpace

SAMPLES = 256
DRAFTER = "drafter"
Shape = tuple[int, int, int]


@dataclass(frozen=True)
class Target:
    """What the objective reads: levels, their weights, and which speed (decode or output)."""

    levels: tuple[int, ...]
    weights: tuple[float, ...]
    speed: str  # "decode" (per user) or "output" (all streams)


def target_for(objective) -> Target | None:
    name = objective.name
    if name in ("tok_s", "speedup"):
        return Target((min(objective_levels(objective)),), (1.0,), "decode")
    if name == "throughput":
        return Target((int(objective.concurrency),), (1.0,), "output")
    if name in ("weighted_throughput", "weighted_speed"):
        speed = "output" if name == "weighted_throughput" else "decode"
        return Target(tuple(objective.levels), tuple(objective.weights), speed)
    return None


@dataclass(frozen=True)
class Config:
    shape: Shape
    others: tuple[tuple[str, Any], ...] = ()

    @property
    def drafter(self) -> Any:
        return dict(self.others).get(DRAFTER)

    def values(self) -> dict[str, Any]:
        s, k, d = self.shape
        return {STEPS: s, TOPK: k, DRAFT: d, **dict(self.others)}

    def label(self) -> str:
        s, k, d = self.shape
        rest = "".join(f" {n}={v}" for n, v in self.others)
        return f"{s}/{k}/{d}{rest}"


def configurations(space: SearchSpace, others: tuple[str, ...]) -> list[Config]:
    """Every distinct launch of the speculative knobs (at topk 1 SGLang runs steps + 1 draft
    tokens whatever is asked; above, at most the tree's capacity) times the other knobs' values."""
    p = space.params
    shapes: list[Shape] = []
    for s in range(int(p[STEPS].low), int(p[STEPS].high) + 1):
        for k in p[TOPK].choices:
            forced = forced_draft_tokens(s, k)
            if forced is not None:
                shapes.append((s, int(k), forced))
                continue
            top = min(int(p[DRAFT].high), draft_tree_capacity(s, k))
            shapes += [(s, int(k), d) for d in range(max(2, int(p[DRAFT].low)), top + 1)]
    shapes = list(dict.fromkeys(shapes))
    choices = [[(n, v) for v in p[n].choices] for n in others]
    return [Config(sh, tuple(combo)) for sh in shapes for combo in itertools.product(*choices)]


def _indicator_levels(space: SearchSpace, others: tuple[str, ...]) -> list[tuple[str, Any]]:
    return [(n, v) for n in others for v in list(space.params[n].choices)[1:]]


class Predictor:
    """The model fitted to a study's observations; None-safe: `ready` says if it can predict."""

    def __init__(
        self,
        observations: list[Observation],
        target: Target,
        space: SearchSpace,
        others: tuple[str, ...] = (),
        seed: int = 0,
        noise: float = UNKNOWN_NOISE,
    ):
        # noise: one run's relative spread (`observations.run_noise`), a screened trial's weight
        self.target, self.space, self.others = target, space, others
        self.noise = noise
        self.rng = np.random.default_rng(seed)
        self.depth = int(space.params[STEPS].high)
        self.indicators = _indicator_levels(space, others)
        self.acceptance: dict[tuple[int, Any], AcceptanceModel] = {}
        self.cost: dict[int, CostModel] = {}
        self.n = 0
        usable = [o for o in observations if all(c in o.levels for c in target.levels)]
        self.observations = usable
        self.admission = admission.fit(usable, target.levels)
        # levels fitted per running request: output speeds whose running requests every launch
        # reported (single-stream and per-user speeds are one request's already)
        self.per_request = {
            c
            for c in target.levels
            if target.speed == "output"
            and c > 1
            and usable
            and all(o.levels[c].running for o in usable)
        }
        for c in target.levels:
            self._fit_level(c, usable)
        self.ready = bool(usable) and len(self.cost) == len(target.levels)

    def _fit_level(self, c: int, obs: list[Observation]) -> None:
        by_drafter: dict[Any, list[Measured]] = {}
        points = []
        for o in obs:
            level = o.levels[c]
            speed, ci = level.speed(self.target.speed)
            if level.tau is None or not speed:
                continue
            drafter = dict(o.others).get(DRAFTER)
            by_drafter.setdefault(drafter, []).append(
                Measured(o.shape, level.tau, level.at_least, level.steps)
            )
            rel = ci / 1.96 / speed if ci and math.isfinite(ci) else self.noise
            x = features(o.shape, o.others, self.indicators)
            per = 1.0
            if c in self.per_request:  # the step time at the batch the pool admitted
                per = level.running
                x = [*x, level.running]
            points.append(CostPoint(x, level.tau * per / speed, rel))
        if not points:
            return
        for drafter, measured in by_drafter.items():
            self.acceptance[(c, drafter)] = AcceptanceModel(measured, self.depth, self.rng)
        self.cost[c] = CostModel(points, self.rng)
        self.n = max(self.n, len(points))

    def _acceptance(self, c: int, drafter: Any) -> AcceptanceModel:
        if (c, drafter) not in self.acceptance:  # a drafter not measured yet: no chain known
            self.acceptance[(c, drafter)] = AcceptanceModel([], self.depth, self.rng)
        return self.acceptance[(c, drafter)]

    def samples(
        self, configs: list[Config], n: int = SAMPLES, fractions: list[float | None] | None = None
    ) -> np.ndarray:
        """Objective draws, n x len(configs); `fractions`: the fraction each would run at (its
        pool's admitted requests multiply the per-request speed; None: the pool held as
        reported)."""
        out = np.zeros((n, len(configs)))
        fractions = fractions or [None] * len(configs)
        for c, w in zip(self.target.levels, self.target.weights, strict=True):
            admitted = np.ones(len(configs))
            if c in self.per_request:
                admitted = np.array(
                    [self.admission.admitted(c, f) or 1.0 for f in fractions], dtype=float
                )
            rows = np.array([features(cf.shape, cf.others, self.indicators) for cf in configs])
            if c in self.per_request:
                rows = np.column_stack([rows, admitted])
            t = self.cost[c].samples(rows, n)
            taus = np.empty_like(t)
            for drafter in {cf.drafter for cf in configs}:
                model = self._acceptance(c, drafter)
                rates, rho = model.rate_samples(n), model.rho_samples(n)
                for i, cf in enumerate(configs):
                    if cf.drafter == drafter:
                        taus[:, i] = model.tau_samples(cf.shape, rates, rho)
            out += w * admitted * taus / t
        return out

    def summary(self, configs: list[Config]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(median, low, high) per configuration: the 50%, 2.5% and 97.5% points of the draws
        (the median: a ratio tau / t with an uncertain t has a long upper tail)."""
        draws = self.samples(configs)
        low, mid, high = np.percentile(draws, [2.5, 50, 97.5], axis=0)
        return mid, low, high
