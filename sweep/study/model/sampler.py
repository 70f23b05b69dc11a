"""`search.sampler=model`: the next launch is the one the model expects to gain most per GPU-hour.

Opening (nothing to fit yet): chains until two lengths are tried, the longest the space allows
first (its per-step histogram gives P(>=k) at every depth, so every chain is then predicted),
then the one-step chain (a second point on the cost line); an enqueued prior chain or an earlier
study's is one of the two. With `screen` (search.sampler.screen, on by default) the opening is
screened: one run per level instead of benchmark.runs (most of a launch is the benchmark, not
the start-up), recorded as stopped early and marked `screened`, so it is never an answer; the
model fits it, and a screened configuration stays a candidate to be measured in full, predicted
from the model and its own run together (`anchored`). Enqueued priors are measured in full (they
are there to be compared with, and may be the answer at once). After that, each proposal is:
- model: over every valid configuration not yet measured, the expected improvement over the best
  measured value (the mean of max(0, draw - best) over the prediction's draws), divided by the
  launch's predicted GPU-hours (start-up plus a benchmark whose length scales with 1 / speed, from
  the study's own launches); the largest wins. It is screened, once, when it is probably not the
  answer (its median below the best measured value) or its prediction is extrapolated to a form
  never launched (a topk, a value of another searched knob, a chain past every chain measured);
- exploration: a share `explore` of proposals (each trial number decides, from the seed) is an
  unmeasured configuration drawn uniformly, whatever the model thinks, so a wrong model meets
  data it did not choose.
A configuration is tried at most twice (an OOM at one fraction may start at another: the memory
policy moves the fraction). Knobs the model does not model (the memory knobs, numeric ones) are
left to a RandomSampler; the driver's verdicts (duplicates, predicted OOMs, known crashes),
early stopping and budgets apply as to any sampler. Why each proposal was made is kept in
`proposals` (trial number -> Proposal) for the console.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from harness.sglang.speculative import forced_draft_tokens
from sweep.study.model import observations
from sweep.study.model.cost import UNKNOWN_NOISE
from sweep.study.model.observations import SCREENED
from sweep.study.model.predict import Config, Predictor, Target, configurations, target_for
from sweep.study.space import DRAFT, STEPS, TOPK, Param, SearchSpace

EXPLORE = 0.1  # the share of proposals drawn uniformly (search.sampler.explore)
ATTEMPTS = 2  # a configuration is launched at most this often without a measurement
_SPEC = (STEPS, TOPK, DRAFT)


@dataclass(frozen=True)
class Proposal:
    config: Config
    reason: str  # "opening", "model", "exploration", "random" (the model cannot fit yet)
    mean: float | None = None
    low: float | None = None
    high: float | None = None
    screen: bool = False  # launch with one run per level (observations.SCREENED)
    gain: float | None = None  # model: the expected improvement over the best measured value
    hours: float | None = None  # model: the launch's predicted GPU-hours
    why_screened: str | None = None  # model: why it is screened, for the console


def distribution(p: Param) -> BaseDistribution:
    """The distribution Param.suggest asks Optuna for (the relative values must match it)."""
    if p.type == "categorical":
        return CategoricalDistribution(list(p.choices))
    assert p.low is not None and p.high is not None
    if p.type == "int":
        return IntDistribution(int(p.low), int(p.high), log=p.log, step=int(p.step or 1))
    return FloatDistribution(p.low, p.high, log=p.log, step=p.step)


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


def model_refusal(space: SearchSpace, objective) -> str | None:
    """Why the model cannot propose for this study (None: it can)."""
    if target_for(objective) is None:
        return (
            f"it predicts one value per configuration and search.objective={objective.name} "
            "is a Pareto front"
        )
    if STEPS not in space.params or TOPK not in space.params:
        return "it models the speculative knobs and search.space searches no chain"
    return None


class ModelSampler(BaseSampler):
    def __init__(
        self,
        space: SearchSpace,
        objective,
        seed: int = 0,
        explore: float = EXPLORE,
        screen: bool = True,
    ):
        target = target_for(objective)
        if target is None:
            raise ValueError(
                f"search.sampler.name=model predicts one value per configuration; "
                f"search.objective={objective.name} is a Pareto front. Use tpe or random."
            )
        if STEPS not in space.params or TOPK not in space.params:
            raise ValueError(
                "search.sampler.name=model models the speculative knobs: search.space needs "
                "speculative_num_steps and speculative_eagle_topk."
            )
        if not 0.0 <= explore <= 1.0:
            raise ValueError(f"search.sampler.explore={explore}: a share, 0 to 1.")
        self.space, self.objective, self.target = space, objective, target
        self.seed, self.explore, self.screen = seed, explore, screen
        self.independent = RandomSampler(seed=seed)
        self.proposals: dict[int, Proposal] = {}
        # earlier studies' trials (sweep.study.model.transfer): in the fit, never the answer
        self.transferred: list[FrozenTrial] = []

    def reseed_rng(self) -> None:
        self.independent.reseed_rng()

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial):
        return {
            name: distribution(p)
            for name, p in self.space.params.items()
            if name in _SPEC or p.type == "categorical"
        }

    def sample_independent(self, study, trial, param_name, param_distribution) -> Any:
        return self.independent.sample_independent(study, trial, param_name, param_distribution)

    # -- the proposal --------------------------------------------------------------------------
    def sample_relative(self, study: Study, trial: FrozenTrial, search_space) -> dict[str, Any]:
        if STEPS not in search_space or TOPK not in search_space:
            return {}
        others = tuple(sorted(n for n in search_space if n not in _SPEC))
        fixed = trial.system_attrs.get("fixed_params")
        if fixed and STEPS in fixed and TOPK in fixed:  # enqueued (a prior): its values are set
            s, k = int(fixed[STEPS]), int(fixed[TOPK])
            d = forced_draft_tokens(s, k) or int(fixed.get(DRAFT, s + 1))
            config = Config((s, k, d), tuple((n, fixed.get(n)) for n in others))
            # measured in full (it is there to be compared with, and may be the answer); a
            # chain among the priors stands in for one of the opening's two (`_State.opening`)
            self.proposals[trial.number] = Proposal(config, "prior")
            return {}
        trials = study.get_trials(deepcopy=False)
        state = self.state(trials, others, trial.number)
        if not state.candidates:
            return {}  # everything measured: the driver calls what comes a duplicate
        proposal = self._choose(state, trial.number)
        self.proposals[trial.number] = proposal
        return self._values(proposal.config, search_space)

    def state(self, trials: list[FrozenTrial], others: tuple[str, ...], number: int) -> _State:
        return _State(self, trials, others, number)

    def _choose(self, state: _State, number: int) -> Proposal:
        opening = state.opening()
        if opening is not None:
            return Proposal(opening, "opening", screen=self.screen)
        rng = random.Random(self.seed * 1_000_003 + number)
        explore = rng.random() < self.explore
        predictor = state.predictor
        if predictor is None or not predictor.ready or explore:
            pick = state.candidates[rng.randrange(len(state.candidates))]
            reason = "exploration" if explore and predictor is not None else "random"
            return Proposal(pick, reason)
        draws = state.draws(state.candidates)
        best = state.best_value()
        gain = np.maximum(draws - best, 0.0).mean(axis=0) if best is not None else draws.mean(0)
        hours = state.launch_hours(draws.mean(axis=0))
        score = gain / hours
        if not np.any(gain > 0):  # nothing expected to improve: the highest upper bound
            score = np.percentile(draws, 97.5, axis=0)
        i = int(np.argmax(score))
        low, mid, high = np.percentile(draws[:, i], [2.5, 50, 97.5])
        # Screened (one run, and it stays a candidate) when it is probably not the answer (its
        # median below the best measured value: in full, or before any, screened), or when its
        # prediction is extrapolated (`unmeasured_form`: a first tree's sibling factor and cost
        # term are the prior's, not data). A configuration screened once is measured in full
        # the next time.
        pick = state.candidates[i]
        extrapolated = state.unmeasured_form(pick)
        doubtful = (best is not None and mid < best) or extrapolated
        screen = self.screen and doubtful and pick not in state.screened
        why = None
        if screen:
            why = (
                "extrapolated past what is measured" if extrapolated else "probably not the answer"
            )
        return Proposal(
            pick,
            "model",
            float(mid),
            float(low),
            float(high),
            screen=screen,
            gain=float(gain[i]) if best is not None else None,
            hours=float(hours[i]),
            why_screened=why,
        )

    def propose(self, study: Study, number: int, others: tuple[str, ...] = ()) -> Proposal | None:
        """What the sampler would propose for trial `number` now (None: nothing left)."""
        state = self.state(study.get_trials(deepcopy=False), others, number)
        return self._choose(state, number) if state.candidates else None

    def _values(self, config: Config, search_space) -> dict[str, Any]:
        s, k, d = config.shape
        values: dict[str, Any] = {STEPS: s, TOPK: k}
        if DRAFT in search_space:
            dist = search_space[DRAFT]
            values[DRAFT] = min(max(d, int(dist.low)), int(dist.high))
        values.update({n: v for n, v in config.others if n in search_space})
        return values


class _State:
    """What the study knows when a proposal is made."""

    def __init__(self, sampler: ModelSampler, trials, others: tuple[str, ...], number: int):
        self.sampler, self.trials, self.others = sampler, trials, others
        self.space = sampler.space
        own = observations.read(trials, others)
        earlier = [
            replace(o, number=-1 - i)  # apart from this study's trial numbers
            for i, o in enumerate(observations.read(sampler.transferred, others))
        ]
        self.observations = own + earlier
        self.earlier_chains = {o.steps for o in earlier if o.topk == 1}
        self.screened = {Config(o.shape, o.others) for o in own if o.screened}
        self.screened_values = screened_values(trials, own, sampler.objective.metrics[0])
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
        self.candidates = [
            c
            for c in configurations(self.space, others)
            if (c.shape, c.others) not in measured
            and attempts.get((c.shape, c.others), 0) < ATTEMPTS
        ]
        self.predictor: Predictor | None = None
        if self.observations:
            self.predictor = Predictor(
                self.observations,
                sampler.target,
                self.space,
                others,
                seed=sampler.seed + max(number, 0),
            )

    def draws(self, configs: list[Config]) -> np.ndarray:
        """The predictor's objective draws, those of screened configurations anchored to their
        own run (`anchored`)."""
        assert self.predictor is not None
        return anchored(self.predictor.samples(configs), configs, self.screened_values)

    def opening(self) -> Config | None:
        """Chains until two lengths are tried (here, as a prior, or in an earlier study): the
        longest first (its histogram gives P(>=k) at every depth), then the one-step chain (the
        cost line's other end). A prior chain is one of the two: a prior costs a launch, and
        the line through 3 and 5 steps is extrapolated to 1 rather than interpolated, a wider
        band the model pays for only if the short chains are worth proposing."""
        depth = int(self.space.params[STEPS].high)
        low = int(self.space.params[STEPS].low)
        first = tuple((n, self.space.params[n].choices[0]) for n in self.others)
        chains = {sh[0] for sh, _ in self.attempted if sh[1] == 1} | self.earlier_chains
        if len(chains) >= 2:
            return None
        for steps in (depth, low):
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
        """The best value measured in full; before any, the best screened one (one run: the
        improvement is then scored against a noisier value, not against nothing)."""
        metric = self.sampler.objective.metrics[0]
        values = [v for _, v in measured_metric(self.trials, metric)]
        if not values:
            values = [
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
        metric = self.sampler.objective.metrics[0]
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


def anchored(draws: np.ndarray, configs: list[Config], values: dict[Config, float]) -> np.ndarray:
    """Draws for the configurations already screened, combined with their one-run value: the
    draws' mean and variance (the model's estimate and its uncertainty) and the run (its
    spread UNKNOWN_NOISE) as two normal estimates weighted by precision, the draws shifted to
    the combined mean and shrunk to its spread. Where the model's form misses (siblings that do
    not share one factor, a step cost that is not linear), the configuration's own measurement
    then corrects it; where the model is sure, one noisy run barely moves it."""
    out = draws.copy()
    for i, config in enumerate(configs):
        y = values.get(config)
        if y is None:
            continue
        m, vm = float(out[:, i].mean()), float(out[:, i].var())
        vy = (UNKNOWN_NOISE * y) ** 2
        w = vy / (vm + vy) if vm + vy > 0 else 1.0  # the model's weight
        out[:, i] = w * m + (1 - w) * y + (out[:, i] - m) * np.sqrt(w)
    return out


def model_sampler(sampler) -> ModelSampler | None:
    """The ModelSampler inside a study's sampler (the memory policy wraps it), if any."""
    while sampler is not None and not isinstance(sampler, ModelSampler):
        sampler = getattr(sampler, "base", None)
    return sampler


__all__ = ["EXPLORE", "ModelSampler", "Proposal", "Target", "model_sampler"]
