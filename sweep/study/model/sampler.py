"""`search.sampler=model`: the next launch is the one the model expects to gain most per GPU-hour.

Opening (nothing to fit yet): chains until two lengths are measured, the longest the space allows
first (its per-step histogram gives P(>=k) at every depth, so every chain is then predicted),
then the one-step chain (a second point on the cost line), an end that cannot start replaced by
the next chain in (`Knowledge.opening`); an enqueued prior chain or an earlier study's is one of
the two. With `screen` (search.sampler.screen, on by default) the opening is
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
  never launched (a topk, a value of another searched knob, a chain past every chain measured),
  and one run would tell more than the model knows (`worth_screening`): where the model is surer
  than a run, the screen cannot change what comes next, and the launch is in full at once;
- informative: when that pick is to be screened, the screen goes where one run is expected to
  raise most the best the model then believes in (`screening.most_informative`, the knowledge
  gradient), among the configurations not screened yet whose run would tell more than the model
  knows and, once a launch has run out of GPU memory, no larger than a launch that started at
  their fraction (else the pick itself); often the pick itself, on a plateau mostly a
  configuration that tells which way the top lies;
- exploration: a share `explore` of proposals (each trial number decides, from the seed) is an
  unmeasured configuration drawn uniformly, whatever the model thinks, so a wrong model meets
  data it did not choose.
What the study knows (candidates, attempts, the best value, screened configurations' own
runs) is `sweep.study.model.knowledge`. Knobs the model does not model (the memory knobs,
numeric ones) are left to a RandomSampler; the driver's verdicts (duplicates, predicted OOMs,
known crashes), early stopping and budgets apply as to any sampler. Why each proposal was made
is kept in `proposals` (trial number -> Proposal) for the console.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
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
from optuna.trial import FrozenTrial

from harness.sglang.speculative import forced_draft_tokens
from sweep.study.model.knowledge import Knowledge
from sweep.study.model.predict import Config, Target, target_for
from sweep.study.model.screening import most_informative, worth_screening
from sweep.study.search.space import DRAFT, STEPS, TOPK, Param, SearchSpace

EXPLORE = 0.1  # the share of proposals drawn uniformly (search.sampler.explore)
_SPEC = (STEPS, TOPK, DRAFT)


@dataclass(frozen=True)
class Proposal:
    config: Config
    # "opening", "model", "informative" (a screen where it tells most, in place of the model's
    # pick), "exploration", "random" (the model cannot fit yet)
    reason: str
    mean: float | None = None
    low: float | None = None
    high: float | None = None
    screen: bool = False  # launch with one run per level (observations.SCREENED)
    gain: float | None = None  # model: the expected improvement over the best measured value
    hours: float | None = None  # model: the launch's predicted GPU-hours
    why_screened: str | None = None  # model: why it is screened, for the console
    # a launch that ran out of GPU memory which this one is at least as large as: (trial number,
    # its shape, the fraction it ran out at); the console names it (`Knowledge.oom_beside`)
    beside_oom: tuple[int, tuple[int, int, int], float] | None = None


def distribution(p: Param) -> BaseDistribution:
    """The distribution Param.suggest asks Optuna for (the relative values must match it)."""
    if p.type == "categorical":
        return CategoricalDistribution(list(p.choices))
    assert p.low is not None and p.high is not None
    if p.type == "int":
        return IntDistribution(int(p.low), int(p.high), log=p.log, step=int(p.step or 1))
    return FloatDistribution(p.low, p.high, log=p.log, step=p.step)


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
            # chain among the priors stands in for one of the opening's two (`Knowledge.opening`)
            self.proposals[trial.number] = Proposal(config, "prior")
            return {}
        trials = study.get_trials(deepcopy=False)
        state = self.state(trials, others, trial.number)
        if not state.candidates:
            return {}  # everything measured: the driver calls what comes a duplicate
        proposal = self._choose(state, trial.number)
        self.proposals[trial.number] = proposal
        return self._values(proposal.config, search_space)

    def state(self, trials: list[FrozenTrial], others: tuple[str, ...], number: int) -> Knowledge:
        return Knowledge(trials, others, number, self)

    def _choose(self, state: Knowledge, number: int) -> Proposal:
        opening = state.opening()
        if opening is not None:
            return Proposal(opening, "opening", screen=self.screen)
        rng = random.Random(self.seed * 1_000_003 + number)
        explore = rng.random() < self.explore
        predictor = state.predictor
        if predictor is None or not predictor.ready or explore:
            pick = state.candidates[rng.randrange(len(state.candidates))]
            reason = "exploration" if explore and predictor is not None else "random"
            return Proposal(pick, reason, beside_oom=state.oom_beside(pick))
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
        # median below the best measured value, in full or screened), or when its
        # prediction is extrapolated (`unmeasured_form`: a first tree's sibling factor and cost
        # term are the prior's, not data), and only when a run would tell more than the model
        # knows. A configuration screened once is measured in full the next time.
        pick = state.candidates[i]
        extrapolated = state.unmeasured_form(pick)
        doubtful = (best is not None and mid < best) or extrapolated
        informative = worth_screening(draws[:, i], state.noise)
        screen = self.screen and doubtful and informative and pick not in state.screened
        why, reason = None, "model"
        if screen:
            why = (
                "extrapolated past what is measured" if extrapolated else "probably not the answer"
            )
            # A screen is spent: where its run tells most about the best (`screening`), which
            # on a plateau is seldom the leading proposal's own neighbourhood; once a launch has
            # run out of GPU memory, only where a launch as large has started (`known_to_start`),
            # else on the leading proposal itself.
            eligible = [
                j
                for j, c in enumerate(state.candidates)
                if c not in state.screened
                and worth_screening(draws[:, j], state.noise)
                and state.known_to_start(c)
            ]
            j = most_informative(draws, state.noise, eligible, rng) if eligible else i
            if j != i:
                why = f"{pick.label()}, the most expected gain per GPU-hour, {why}"
                if state.gpu_ooms:
                    why += "; screened where a launch as large has started"
                i, pick, reason = j, state.candidates[j], "informative"
                low, mid, high = np.percentile(draws[:, i], [2.5, 50, 97.5])
        return Proposal(
            pick,
            reason,
            float(mid),
            float(low),
            float(high),
            screen=screen,
            gain=float(gain[i]) if best is not None else None,
            hours=float(hours[i]),
            why_screened=why,
            beside_oom=state.oom_beside(pick),
        )

    def propose(self, study: Study, number: int, others: tuple[str, ...] = ()) -> Proposal | None:
        """What the sampler would propose for trial `number` now (None: nothing left)."""
        state = self.state(study.get_trials(deepcopy=False), others, number)
        return self._choose(state, number) if state.candidates else None

    def _values(self, config: Config, search_space) -> dict[str, Any]:
        s, k, d = config.shape
        values: dict[str, Any] = {STEPS: s, TOPK: k}
        if DRAFT in search_space:  # a chain's count is SGLang's (steps + 1), not the space's
            dist = search_space[DRAFT]
            if isinstance(dist, CategoricalDistribution):
                values[DRAFT] = d if d in dist.choices else dist.choices[0]
            else:
                values[DRAFT] = min(max(d, int(dist.low)), int(dist.high))
        values.update({n: v for n, v in config.others if n in search_space})
        return values


def model_sampler(sampler) -> ModelSampler | None:
    """The ModelSampler inside a study's sampler (the memory policy wraps it), if any."""
    while sampler is not None and not isinstance(sampler, ModelSampler):
        sampler = getattr(sampler, "base", None)
    return sampler


__all__ = ["EXPLORE", "ModelSampler", "Proposal", "Target", "model_sampler"]
