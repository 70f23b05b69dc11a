"""What a study knows when the model sampler proposes: its observations, the configurations
still to launch, the best value so far, and how screened ones are predicted.

A configuration is a candidate until it is measured in full or launched ATTEMPTS times without
a measurement (an OOM at one fraction may start at another: the memory policy moves the
fraction). A screened configuration (one run, `observations.SCREENED`) stays a candidate; the
model's draws for it are combined with its own run (`anchored`). Earlier studies' trials
(transfer) are in the fit with numbers apart from this study's, never an answer.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

import numpy as np
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import FrozenTrial, TrialState

from sweep.config.fraction import FRACTION
from sweep.study.model import observations
from sweep.study.model.observations import SCREENED, run_noise
from sweep.study.model.predict import Config, Predictor, Target, configurations
from sweep.study.search.memory import fraction_grid
from sweep.study.search.space import STEPS, SearchSpace

ATTEMPTS = 2  # a configuration is launched at most this often without a measurement


class StudyModel(Protocol):
    """What the knowledge reads of the model sampler (sweep.study.model.sampler.ModelSampler)."""

    space: SearchSpace
    objective: Any
    target: Target
    seed: int
    transferred: list[FrozenTrial]


def measured_metric(trials: list[FrozenTrial], metric: str) -> list[tuple[FrozenTrial, float]]:
    """The feasible measured trials and their objective metric (OOMs, crashes, SLO misses out)."""
    return [
        (t, float(t.user_attrs["metric"]))
        for t in trials
        if t.state == TrialState.COMPLETE
        and t.user_attrs.get("outcome") == "ok"
        and t.user_attrs.get("metric_name") == metric
        and "metric" in t.user_attrs
        and all(v <= 0 for v in t.constraints.values())
    ]


class Knowledge:
    """What the study knows when trial `number` is proposed (-1: between trials)."""

    def __init__(
        self,
        trials: list[FrozenTrial],
        others: tuple[str, ...],
        number: int,
        study: StudyModel,
    ):
        self.trials, self.others, self.study = trials, others, study
        self.space = study.space
        own = observations.read(trials, others)
        earlier = [
            replace(o, number=-1 - i)  # apart from this study's trial numbers
            for i, o in enumerate(observations.read(study.transferred, others))
        ]
        self.observations = own + earlier
        # how far one run strays on this box: what a screened run is worth against the model
        self.noise = run_noise(self.observations, study.target.levels, study.target.speed)
        self.earlier_chains = {o.steps for o in earlier if o.topk == 1}
        self.screened = {Config(o.shape, o.others) for o in own if o.screened}
        self.screened_fractions = {
            Config(o.shape, o.others): o.fraction for o in own if o.screened and o.fraction
        }
        self.fraction_grid = _fraction_grid(self.space)
        # the launches that ran out of memory: (trial number, shape, fraction), GPU and KV pool
        self.gpu_ooms: list[tuple[int, tuple[int, int, int], float]] = []
        self.kv_floor: float | None = None
        for t in trials:
            cand = t.user_attrs.get("candidate") or {}
            m = cand.get("mem_fraction_static")
            if m is None or t.user_attrs.get("outcome") != "oom":
                continue
            if t.user_attrs.get("oom_kind") == "gpu" and cand.get("steps") is not None:
                shape = (int(cand["steps"]), int(cand["topk"]), int(cand["draft_tokens"] or 1))
                self.gpu_ooms.append((t.number, shape, float(m)))
            elif t.user_attrs.get("oom_kind") == "kv_pool":
                self.kv_floor = max(float(m), self.kv_floor or 0.0)
        self.screened_values = screened_values(trials, own, study.objective.metrics[0])
        # each level's one-run speed of the screened configurations (the per-level rules)
        self.screened_levels = {
            c: {
                Config(o.shape, o.others): speed
                for o in own
                if o.screened
                and c in o.levels
                and (speed := o.levels[c].speed(study.target.speed)[0]) is not None
            }
            for c in study.target.levels
        }
        # what has been launched of each kind (here or in an earlier study)
        self.forms = {o.topk for o in self.observations} | {
            pair for o in self.observations for pair in o.others
        }
        self.chain_steps = {o.steps for o in self.observations if o.topk == 1}
        # measured in full; a screened configuration may be launched once more, in full
        measured = {(o.shape, o.others) for o in own if not o.screened}
        attempts: dict[tuple, int] = {}
        for t in trials:
            cand = t.user_attrs.get("candidate")
            if not cand or cand.get("steps") is None or t.number == number:
                continue
            key = (
                (int(cand["steps"]), int(cand["topk"]), int(cand["draft_tokens"])),
                tuple((n, t.params.get(n)) for n in others),
            )
            running = t.state == TrialState.RUNNING
            attempts[key] = attempts.get(key, 0) + (ATTEMPTS if running else 1)
        self.attempted = attempts
        # chains measured here (in full or screened) or being measured now
        self.measured_chains = {o.steps for o in own if o.topk == 1} | {
            int(t.user_attrs["candidate"]["steps"])
            for t in trials
            if t.state == TrialState.RUNNING
            and t.number != number
            and (t.user_attrs.get("candidate") or {}).get("topk") == 1
        }
        # not proposed: what is measured, launched ATTEMPTS times, or starts nowhere in the space
        # (every fraction above the KV pool's floor at or above a GPU OOM of a launch needing no
        # more memory)
        self.candidates = [
            c
            for c in configurations(self.space, others)
            if (c.shape, c.others) not in measured
            and attempts.get((c.shape, c.others), 0) < ATTEMPTS
            and not (self.fraction_grid and self.fraction(c) is None)
        ]
        self.predictor: Predictor | None = None
        if self.observations:
            self.predictor = Predictor(
                self.observations,
                study.target,
                self.space,
                others,
                seed=study.seed + max(number, 0),
                noise=self.noise,
            )

    def draws(
        self, configs: list[Config], fractions: list[float | None] | None = None
    ) -> np.ndarray:
        """The predictor's objective draws, each at `fractions` (default: the fraction it would
        run at, `fraction`), those of screened configurations anchored to their own run
        (`anchored`)."""
        assert self.predictor is not None
        fractions = fractions or [self.fraction(c) for c in configs]
        draws = self.predictor.samples(configs, fractions=fractions)
        return anchored(draws, configs, self.screened_values, self.noise)

    def fraction(self, config: Config) -> float | None:
        """The memory fraction `config` would run at, as far as the study can say: a screened
        configuration's screen's (its full launch runs there, `sweep.study.trial.screened`);
        else the largest in the space above the KV pool's floor and below every GPU OOM of a
        launch needing no more memory beyond the pool (no more draft tokens, the memory
        policy's groups): the policy holds the fraction where the pool holds the load and raises
        it towards there where it binds. None where no fraction is left; the space's own where
        it does not search the fraction."""
        if config in self.screened_fractions:
            return self.screened_fractions[config]
        if not self.fraction_grid:
            return None
        draft = config.shape[2]
        ooms = [m for _, shape, m in self.gpu_ooms if shape[2] <= draft]
        left = [
            v
            for v in self.fraction_grid
            if (not ooms or v < min(ooms) - 1e-9)
            and (self.kv_floor is None or v > self.kv_floor + 1e-9)
        ]
        return max(left) if left else None

    def known_to_start(self, config: Config) -> bool:
        """Whether a launch at least as large as `config` (steps x topk draft branches, draft
        tokens) has started at a fraction at least the one `config` would run at (`fraction`):
        then its start-up fits in memory as far as the study can tell. Always True until a
        launch has run out of GPU memory; on a card the weights fill, the knowledge gradient
        weighs what a run would tell, not whether the server starts, and a screen spent on a
        tree that runs out of memory tells nothing (`ModelSampler._choose`)."""
        if not self.gpu_ooms:
            return True
        f = self.fraction(config)
        if f is None:
            return False
        return any(
            as_large(o.shape, config.shape) and (o.fraction or 0.0) >= f - 1e-9
            for o in self.observations
        )

    def oom_beside(self, config: Config) -> tuple[int, tuple[int, int, int], float] | None:
        """The launch that ran out of GPU memory, at the lowest fraction, which `config` is at
        least as large as in every term a start-up's memory grows with (steps x topk draft
        branches, draft tokens; the CUDA-graph batch is the setup's): proposing it needs a
        reason, which the console names (`watch`). None where there is none."""
        beside = [(n, shape, m) for n, shape, m in self.gpu_ooms if as_large(config.shape, shape)]
        return min(beside, key=lambda x: x[2], default=None)

    def level_draws(self, configs: list[Config]) -> dict[int, np.ndarray]:
        """Each level's speed draws (`Predictor.level_samples`), those of screened
        configurations anchored to their own run at that level."""
        assert self.predictor is not None
        fractions = [self.fraction(c) for c in configs]  # as `draws`: where each would run
        return {
            c: anchored(draws, configs, self.screened_levels[c], self.noise)
            for c, draws in self.predictor.level_samples(configs, fractions=fractions).items()
        }

    def opening(self) -> Config | None:
        """Chains until two lengths are measured (here, as a prior, or in an earlier study; or
        being measured now): the longest first (its histogram gives P(>=k) at every depth),
        then the one-step chain (the cost line's other end); where one of them cannot be
        measured (launched ATTEMPTS times and out of memory each time: on a card the weights
        fill, the fraction is still being found), the next chain in from that end (from the
        short end where both failed). A prior chain is one of the two: a prior costs a launch,
        and the line through 3 and 5 steps is extrapolated to 1 rather than interpolated, a wider
        band the model pays for only if the short chains are worth proposing."""
        steps_searched = [int(v) for v in self.space.params[STEPS].levels()]
        depth, low = max(steps_searched), min(steps_searched)
        first = tuple((n, self.space.params[n].choices[0]) for n in self.others)
        chains = self.measured_chains | self.earlier_chains
        if len(chains) >= 2:
            return None
        # a failed end is replaced from its side: the next-longest where the one-step chain is
        # measured, else the next-shortest (shorter chains need less memory beyond the pool)
        inner = [s for s in sorted(steps_searched) if low < s < depth]
        inward = inner[::-1] if low in chains else inner
        for steps in (depth, low, *inward):
            config = Config((steps, 1, steps + 1), first)
            if steps not in chains and config in self.candidates:
                return config
        return None

    def unmeasured_form(self, config: Config) -> bool:
        """True when its prediction is extrapolated: nothing launched shares its topk or one
        of its other knobs' values, or it is a chain shorter or longer than every chain
        launched (the cost line extended past its points)."""
        s, k, _ = config.shape
        steps = self.chain_steps
        outside = k == 1 and (not steps or not min(steps) <= s <= max(steps))
        return outside or k not in self.forms or any(p not in self.forms for p in config.others)

    def best_value(self) -> float | None:
        """The best value measured, in full or screened (one run). A screen above every full
        launch is the level a proposal has to beat: scored against the full launches alone,
        the screen itself would promise its own lead again as gain, and be relaunched in full
        before anything new is tried."""
        metric = self.study.objective.metrics[0]
        values = [v for _, v in measured_metric(self.trials, metric)]
        values += [
            float(t.user_attrs["metric"])
            for t in self.trials
            if t.user_attrs.get(SCREENED)
            and t.user_attrs.get("metric_name") == metric
            and "metric" in t.user_attrs
        ]
        return max(values, default=None)

    def launch_hours(self, predicted: np.ndarray) -> np.ndarray:
        """GPU-hours of a launch predicted to reach `predicted`: the study's launches, their
        benchmark share scaled by measured / predicted speed (a faster server finishes sooner)."""
        metric = self.study.objective.metrics[0]
        value = dict((t.number, v) for t, v in measured_metric(self.trials, metric))
        rows = []
        for o in self.observations:
            if o.number in value and o.bench_s and o.startup_s is not None and o.gpu_hours:
                rows.append((o.gpu_hours, o.bench_s / (o.bench_s + o.startup_s), value[o.number]))
        if not rows:
            return np.ones_like(predicted)
        out = np.zeros_like(predicted)
        for hours, share, measured in rows:
            out += hours * ((1 - share) + share * measured / np.maximum(predicted, 1e-9))
        return out / len(rows)


def as_large(shape: tuple[int, int, int], other: tuple[int, int, int]) -> bool:
    """Whether a launch of `shape` (steps, topk, draft tokens) needs at least the memory
    beyond the KV pool that `other` does, in every term a start-up's memory grows with: steps x
    topk draft branches and draft tokens (the CUDA-graph batch is the setup's)."""
    return shape[0] * shape[1] >= other[0] * other[1] and shape[2] >= other[2]


def _fraction_grid(space: SearchSpace) -> list[float]:
    """The fractions the space searches (the memory policy's grid), empty where it does not."""
    p = space.params.get(FRACTION)
    if p is None:
        return []
    if p.type == "categorical":
        return fraction_grid(CategoricalDistribution(list(p.choices)))
    assert p.low is not None and p.high is not None
    return fraction_grid(FloatDistribution(p.low, p.high, step=p.step))


def screened_values(trials: list[FrozenTrial], own, metric: str) -> dict[Config, float]:
    """Each screened configuration's one-run value of the objective (`own`: this study's
    observations of `trials`)."""
    one_run = {
        t.number: float(t.user_attrs["metric"])
        for t in trials
        if t.user_attrs.get(SCREENED)
        and t.user_attrs.get("metric_name") == metric
        and "metric" in t.user_attrs
    }
    return {
        Config(o.shape, o.others): one_run[o.number]
        for o in own
        if o.screened and o.number in one_run
    }


def anchored(
    draws: np.ndarray, configs: list[Config], values: dict[Config, float], noise: float
) -> np.ndarray:
    """Draws for the configurations already screened, combined with their one-run value: the
    draws' mean and variance (the model's estimate and its uncertainty) and the run (its
    relative spread `noise`, `observations.run_noise`) as two normal estimates weighted by
    precision, the draws shifted to the combined mean and shrunk to its spread. Where the
    model's form misses (siblings that do not share one factor, a step cost that is not linear),
    the configuration's own measurement then corrects it; where the model is sure, one noisy run
    barely moves it."""
    out = draws.copy()
    for i, config in enumerate(configs):
        y = values.get(config)
        if y is None:
            continue
        m, vm = float(out[:, i].mean()), float(out[:, i].var())
        vy = (noise * y) ** 2
        w = vy / (vm + vy) if vm + vy > 0 else 1.0  # the model's weight
        out[:, i] = w * m + (1 - w) * y + (out[:, i] - m) * np.sqrt(w)
    return out


__all__ = ["ATTEMPTS", "Knowledge", "anchored", "as_large", "measured_metric", "screened_values"]
