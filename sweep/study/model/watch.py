"""The model beside the measurements: what it predicted for each trial, and when it ends a sweep.

Every sweep (whatever its sampler) fits the model to the trials measured so far and, before a
launch, predicts the trial's objective with its 95% band; after the measurement the console
prints the two side by side (`model predicted 84.1 [80.2, 88.0] tok/s from 3 trials; measured
83.0, inside`), so a user sees how far the model can be trusted on this box before it steers
anything. With `search.sampler=model` the line also says why the trial was proposed, and the
stopping rules (`stopping`: speculation off, or the winner) are checked before each launch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from harness.record.results import Outcome, TrialResult
from sweep.study.model import stopping
from sweep.study.model.knowledge import Knowledge
from sweep.study.model.predict import Config, Target, target_for
from sweep.study.model.sampler import model_sampler
from sweep.study.search.space import DRAFT, STEPS, TOPK, SearchSpace
from sweep.study.trial.candidates import Candidate

_SPEC = (STEPS, TOPK, DRAFT)


@dataclass(frozen=True)
class Forecast:
    mean: float  # the draws' median
    low: float
    high: float
    trials: int  # measured trials the model was fitted to
    reason: str | None = None  # why the model sampler proposed it (None: another sampler)
    earlier: int = 0  # of `trials`, those from earlier studies (sweep.study.model.transfer)
    why_screened: str | None = None  # a model proposal screened: why
    beside_oom: str | None = None  # a model proposal at least as large as an OOM: the reason


def beside_oom_line(
    config: Config, oom: tuple[int, tuple[int, int, int], float], fraction: float | None
) -> str:
    """Why a proposal at least as large as a launch that ran out of GPU memory is launched: the
    fraction it runs at is below the one that ran out (memory is monotone in the fraction, so
    it may start there), with the model's reason to try it (its predicted gain per GPU-hour, or
    an exploration draw)."""
    number, (s, k, d), ran_out = oom
    where = f"at {fraction:.2f}, below it" if fraction is not None else "at the policy's fraction"
    if fraction is not None and fraction >= ran_out - 1e-9:
        where = f"at {fraction:.2f}, to check the OOM the memory policy predicts there"
    return (
        f"model: {config.label().split(' ')[0]} is at least as large as trial_{number:04d} "
        f"({s}/{k}/{d}), which ran out of GPU memory at {ran_out:.2f}; launched {where}"
    )


class ModelWatch:
    def __init__(self, space: SearchSpace, objective, stop: bool = True):
        self.space, self.objective, self.stop = space, objective, stop
        self.target = target_for(objective)
        self.unit = "output tok/s" if self.target and self.target.speed == "output" else "tok/s"
        self.usable = self.target is not None and STEPS in space.params and TOPK in space.params

    def others(self, study: Study) -> tuple[str, ...]:
        managed = getattr(study.sampler, "managed", None)
        held = set(managed(study)) if managed is not None else set()
        return tuple(
            sorted(
                n
                for n, p in self.space.params.items()
                if n not in _SPEC and p.type == "categorical" and n not in held
            )
        )

    def forecast(self, study: Study, trial: FrozenTrial, candidate: Candidate) -> Forecast | None:
        """The model's prediction for the trial about to launch (None: nothing to fit yet): what
        the model sampler would know (`Knowledge`, the same observations, run noise and anchored
        screens), fitted whatever the study's sampler is."""
        if not self.usable or candidate.steps is None or candidate.topk is None:
            return None
        assert self.target is not None
        others = self.others(study)
        sampler = model_sampler(study.sampler)
        earlier = sampler.transferred if sampler is not None else []
        known = _Watched(self.space, self.objective, self.target, earlier)
        state = Knowledge(study.get_trials(deepcopy=False), others, trial.number, known)
        if state.predictor is None or not state.predictor.ready:
            return None
        shape = (candidate.steps, candidate.topk, candidate.draft_tokens or candidate.steps + 1)
        config = Config(shape, tuple((n, trial.params.get(n)) for n in others))
        draws = state.draws([config], [candidate.mem_fraction_static])  # the fraction it runs at
        low, mid, high = np.percentile(draws[:, 0], [2.5, 50, 97.5])
        proposal = sampler.proposals.get(trial.number) if sampler is not None else None
        reason = proposal.reason if proposal is not None else None
        why = proposal.why_screened if proposal is not None else None
        fitted = state.predictor.observations
        earlier_n = sum(o.number < 0 for o in fitted)
        beside = None
        if proposal is not None and proposal.beside_oom is not None:
            beside = beside_oom_line(config, proposal.beside_oom, candidate.mem_fraction_static)
        return Forecast(
            float(mid), float(low), float(high), len(fitted), reason, earlier_n, why, beside
        )

    def screens(self, study: Study, trial: FrozenTrial) -> bool:
        """Whether the model sampler proposed this trial as a one-run screening launch."""
        sampler = model_sampler(study.sampler)
        proposal = sampler.proposals.get(trial.number) if sampler is not None else None
        return proposal is not None and proposal.screen

    def measured(self, result: TrialResult) -> float | None:
        metric = self.objective.metrics[0]
        value = {**result.metrics, **self.objective.derived(result)}.get(metric)
        return value if result.outcome in (Outcome.OK, Outcome.PRUNED) else None

    def missed(self, forecast: Forecast | None, result: TrialResult) -> bool:
        """The measurement fell outside the forecast's band: what the one-line console says."""
        value = self.measured(result)
        return (
            forecast is not None
            and value is not None
            and not (forecast.low <= value <= forecast.high)
        )

    def line(self, forecast: Forecast | None, result: TrialResult) -> str | None:
        if forecast is None:
            return None
        f = forecast
        text = (
            f"model predicted {f.mean:.1f} [{f.low:.1f}, {f.high:.1f}] {self.unit} from "
            f"{f.trials} trial{'s' if f.trials != 1 else ''}"
            + (f" ({f.earlier} from earlier studies)" if f.earlier else "")
        )
        if f.reason:
            why = f"; screened: {f.why_screened}" if f.why_screened else ""
            text = f"{text} (proposed: {_REASONS.get(f.reason, f.reason)}{why})"
        if (value := self.measured(result)) is not None:
            inside = "inside" if f.low <= value <= f.high else "outside the band"
            runs = " (stopped early)" if result.outcome is Outcome.PRUNED else ""
            text += f"; measured {value:.1f}{runs}, {inside}"
        return text

    def stop_line(
        self,
        study: Study,
        budget,
        starts_left: int,
        below: stopping.Below | None = None,
        levels_below: dict[int, stopping.Below] | None = None,
    ) -> str | None:
        """The line that ends the sweep when one of the model's stopping rules holds, else None;
        `below` arms the speculation-off rule (`stopping.decide`), `levels_below` each level's
        under a load profile. Only with the model sampler:
        the stopping switch is its option (search.sampler.stop), and another sampler's sweep,
        which the model only watches, runs its search.n_trials."""
        sampler = model_sampler(study.sampler)
        if not self.stop or sampler is None:
            return None
        decision = stopping.decide(sampler, study, below, levels_below)
        if decision is None:
            return None
        trials = study.get_trials(deepcopy=False)
        if budget.active:
            saved = budget.remaining(trials) or 0.0
            what = f"{saved:.2f} GPU-hours of search.budget_gpu_hours={budget.total:g} unspent"
        else:
            spent = [
                float(t.user_attrs["gpu_hours"])
                for t in trials
                if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
                and t.user_attrs.get("gpu_hours")
            ]
            mean = sum(spent) / len(spent) if spent else 0.0
            what = (
                f"{starts_left} of search.n_trials' starts unspent (~{starts_left * mean:.2f} "
                "GPU-hours at this study's mean launch)"
            )
        return f"{decision.line(self.unit)}; the sweep stops here, {what}"


@dataclass(frozen=True)
class _Watched:
    """What `Knowledge` reads of a study (`knowledge.StudyModel`), whatever its sampler: seed 0,
    so the fit's draws are seeded by the trial number alone, as the model sampler's are at
    search.seed=0; earlier studies' trials are the model sampler's (transfer), else none."""

    space: SearchSpace
    objective: object
    target: Target
    transferred: list[FrozenTrial]
    seed: int = 0


_REASONS = {
    "opening": "opening, a chain the model needs, screened with one run",
    "prior": "a prior from search.enqueue",
    "model": "the most expected gain per GPU-hour",
    "informative": "the screen that tells most about the best",
    "exploration": "exploration, drawn uniformly",
    "random": "drawn uniformly: the model cannot fit yet",
}
