"""The study's objective for every configuration it could launch, with an interval.

Per level the objective reads: tau from the drafter's acceptance model (`acceptance`), seconds
per iteration from the cost model (`cost`, at the CUDA-graph batch the level's steps replay:
`Load`), speed = tau / t (t: the step, over the requests in it for the output speed); the
objective is the weighted sum of the levels' speeds (`weighted_*`), or the one level's
(`tok_s`, `speedup` in tok/s, `throughput`). An unmeasured configuration's load at a level is
the requests its KV pool admits at the fraction it runs at (`admission`), where the launches
reported their pools and running requests, so two launches apart only in the fraction are two
pools, not one configuration's noise; else the level's usual load. Every prediction is SAMPLES
joint draws (acceptance rates, the sibling factor, the cost coefficients and each form's
misfit): its mean and its 2.5-97.5% band are what the console, the proposer and the stopping
rule read. The Pareto objectives (`tok_s+throughput`, `per_level_speed`) have no single value to
predict: the model sampler refuses them.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.sglang.graphs import padded_batch
from harness.sglang.speculative import dominated_by, draft_tree_capacity, forced_draft_tokens
from sweep.study.model import admission
from sweep.study.model.acceptance import AcceptanceModel, Measured
from sweep.study.model.cost import LINE_TERMS, WORK_TERMS, CostModel, CostPoint, features
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
    tokens whatever is asked; above, at most the tree's capacity, and no tree SGLang verifies as
    a smaller one's: harness.sglang.speculative.dominated_by) times the other knobs' values."""
    p = space.params
    shapes: list[Shape] = []
    for s in sorted(int(v) for v in p[STEPS].levels()):
        for k in p[TOPK].levels():
            forced = forced_draft_tokens(s, k)
            if forced is not None:
                shapes.append((s, int(k), forced))
                continue
            top = draft_tree_capacity(s, k)
            shapes += [
                (s, int(k), int(d))
                for d in sorted(p[DRAFT].levels())
                if 2 <= d <= top and dominated_by(s, int(k), int(d)) is None
            ]
    shapes = list(dict.fromkeys(shapes))
    choices = [[(n, v) for v in p[n].choices] for n in others]
    return [Config(sh, tuple(combo)) for sh in shapes for combo in itertools.product(*choices)]


@dataclass(frozen=True)
class Load:
    """What a decode step of one level ran: its requests and the CUDA-graph batch they padded to
    (through the sizes the launch captured; the requests themselves where none were reported or
    the batch ran eager above them). The requests are the decode lines' mean where requests
    waited (the KV pool or the request cap held the rest back), else the level's concurrency
    under the cap: every request in flight runs, and the mean's dips between one request's end
    and the next one's prefill are not a smaller graph's worth."""

    batch: float
    padded: float

    @staticmethod
    def of(observation: Observation, concurrency: int) -> Load:
        level = observation.levels[concurrency]
        cap = observation.max_running
        batch = float(min(concurrency, cap) if cap else concurrency)
        if level.running and (level.queue is None or level.queue > 0):
            batch = level.running
        graph = padded_batch(max(1, round(batch)), observation.graph_bs)
        return Load(batch, float(graph) if graph is not None else batch)


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
        self.depth = max(int(v) for v in space.params[STEPS].levels())
        self.indicators = _indicator_levels(space, others)
        self.acceptance: dict[tuple[int, Any], AcceptanceModel] = {}
        self.cost: dict[int, CostModel] = {}
        self.usual: dict[int, Load] = {}  # per level: the load an unmeasured launch is predicted at
        self.staircase: set[int] = set()  # the levels whose launches ran different padded batches
        self.n = 0
        usable = [o for o in observations if all(c in o.levels for c in target.levels)]
        self.observations = usable
        self.admission = admission.fit(usable, target.levels)
        # the CUDA-graph sizes the latest launch that reported them captured
        self.graph_bs = next((o.graph_bs for o in reversed(usable) if o.graph_bs), ())
        for c in target.levels:
            self._fit_level(c, usable)
        self.ready = bool(usable) and len(self.cost) == len(target.levels)

    def _fit_level(self, c: int, obs: list[Observation]) -> None:
        by_drafter: dict[Any, list[Measured]] = {}
        measured = []
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
            measured.append((o, Load.of(o, c), level.tau / speed, rel))
        if not measured:
            return
        # the level's usual load: what its launches ran, the median one
        self.usual[c] = Load(
            float(np.median([load.batch for _, load, _, _ in measured])),
            float(np.median([load.padded for _, load, _, _ in measured])),
        )
        if len({load.padded for _, load, _, _ in measured}) > 1:
            self.staircase.add(c)
        points = [
            CostPoint(self.row(o.shape, o.others, c, load), t * self.streams(load), rel)
            for o, load, t, rel in measured
        ]
        for drafter, measured in by_drafter.items():
            self.acceptance[(c, drafter)] = AcceptanceModel(measured, self.depth, self.rng)
        bounded = WORK_TERMS if c in self.staircase else LINE_TERMS
        self.cost[c] = CostModel(points, self.rng, bounded)
        self.n = max(self.n, len(points))

    def streams(self, load: Load) -> float:
        """What the step is divided by in t: the requests in it for the output speed over all
        streams, 1 for the per-user speed."""
        return load.batch if self.target.speed == "output" else 1.0

    def row(self, shape: Shape, others, c: int, load: Load | None = None) -> list[float]:
        """The cost model's row of a configuration at level `c` under `load` (None: the
        level's usual one); the line where the level's launches all ran one padded batch."""
        if c not in self.staircase:
            return features(shape, others, self.indicators)
        padded = self.usual[c].padded if load is None else load.padded
        return features(shape, others, self.indicators, padded / self.usual[c].padded - 1.0)

    def cost_samples(
        self, c: int, configs: list[Config], loads: list[Load] | None = None, n: int = SAMPLES
    ) -> np.ndarray:
        """Draws of t (n x configs) at level `c`: the step at each configuration's load (None:
        the level's usual one), over the requests in it for the output speed."""
        loads_ = loads or [self.usual[c]] * len(configs)
        rows = np.array(
            [self.row(cf.shape, cf.others, c, ld) for cf, ld in zip(configs, loads_, strict=True)]
        )
        per = np.array([self.streams(ld) for ld in loads_])
        return self.cost[c].samples(rows, n) / per

    def _acceptance(self, c: int, drafter: Any) -> AcceptanceModel:
        if (c, drafter) not in self.acceptance:  # a drafter not measured yet: no chain known
            self.acceptance[(c, drafter)] = AcceptanceModel([], self.depth, self.rng)
        return self.acceptance[(c, drafter)]

    def samples(
        self, configs: list[Config], n: int = SAMPLES, fractions: list[float | None] | None = None
    ) -> np.ndarray:
        """Objective draws, n x len(configs): the levels' speeds, weighted; `fractions`: the
        fraction each would run at (the requests its pool admits are its load, `loads`; None:
        the largest pool reported)."""
        out = np.zeros((n, len(configs)))
        levels = self.level_samples(configs, n, fractions)
        for w, speeds in zip(self.target.weights, levels.values(), strict=True):
            out += w * speeds
        return out

    def level_samples(
        self, configs: list[Config], n: int = SAMPLES, fractions: list[float | None] | None = None
    ) -> dict[int, np.ndarray]:
        """Each level's speed draws (decode or output tok/s, the target's), n x len(configs):
        tau / t at that level, the joint draws the objective weights together."""
        out: dict[int, np.ndarray] = {}
        fractions = fractions or [None] * len(configs)
        for c in self.target.levels:
            t = self.cost_samples(c, configs, self.loads(c, fractions), n=n)
            taus = np.empty_like(t)
            for drafter in {cf.drafter for cf in configs}:
                model = self._acceptance(c, drafter)
                rates, rho = model.rate_samples(n), model.rho_samples(n)
                for i, cf in enumerate(configs):
                    if cf.drafter == drafter:
                        taus[:, i] = model.tau_samples(cf.shape, rates, rho)
            out[c] = taus / t
        return out

    def loads(self, c: int, fractions: list[float | None]) -> list[Load] | None:
        """Each configuration's load at level `c`: the requests its pool admits at its fraction
        (`admission`) where the output speed over all streams is read and the launches reported
        running requests; None (the level's usual load) otherwise."""
        if self.target.speed != "output" or c == 1 or c not in self.usual:
            return None
        out = []
        for f in fractions:
            batch = self.admission.admitted(c, f)
            if batch is None:
                return None
            graph = padded_batch(max(1, round(batch)), self.graph_bs)
            out.append(Load(batch, float(graph) if graph is not None else batch))
        return out

    def summary(self, configs: list[Config]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(median, low, high) per configuration: the 50%, 2.5% and 97.5% points of the draws
        (the median: a ratio tau / t with an uncertain t has a long upper tail)."""
        draws = self.samples(configs)
        low, mid, high = np.percentile(draws, [2.5, 50, 97.5], axis=0)
        return mid, low, high
