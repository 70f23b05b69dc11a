"""Under a load profile the search stops when every level is settled (sweep.study.model.stopping,
`decide_levels`): each level by speculation off or by its winner, on the model's per-level
predictions, fitted by the model sampler to a search on the simulator's model of the H100 box
under load (benchmarks/_search_arms' copy of the sweeper's loop); and each level's "slower than
the baseline beyond its interval" judged from the runs at that level (sweep.study.answer.settled).
"""

from __future__ import annotations

import random

import numpy as np
import optuna
import pytest

from benchmarks._search_arms import BY_NAME, run_arm
from benchmarks._search_landscape import SETUPS, Landscape, Oracle
from harness.record.results import Outcome, RunSummary, TrialResult
from harness.record.stats import summarize
from sweep.study.answer.settled import slower_per_level
from sweep.study.model import stopping
from sweep.study.model.knowledge import Knowledge
from sweep.study.model.sampler import model_sampler
from sweep.study.trial.objective import Objective
from tests.unit.test_model_sampler import BASE, Recorder

LAUNCHES = 16  # a search midway: one level settled by its winner, the others not yet


@pytest.fixture(scope="module")
def profile():
    """A model-sampler search of LAUNCHES launches on the load landscape (1, 8, 32, 64 in
    flight, weighted output throughput), and its model's state between trials."""
    sim = Recorder(Landscape("multi", Oracle(SETUPS["h100_sxm"])), 1e12, random.Random(0))
    captured = {}
    original = optuna.create_study

    def create_study(**kwargs):
        captured["study"] = original(**kwargs)
        return captured["study"]

    optuna.create_study = create_study
    try:
        run_arm(BY_NAME["model"], sim, {**BASE, "memory": "auto"}, 0, LAUNCHES, [])
    finally:
        optuna.create_study = original
    study = captured["study"]
    sampler = model_sampler(study.sampler)
    state = stopping._state(sampler, study)
    assert state is not None and state.candidates
    return study, sampler, state


def _per_level(sampler, state):
    """(best measured lower bound, highest unmeasured upper bound) per level, read here from
    the trials' per-level measurements and the model's per-level draws."""
    metric = sampler.objective.metrics[0]
    measured = [t for t, _ in stopping.measured_metric(state.trials, metric)]
    draws = state.level_draws(state.candidates)
    out = {}
    for c in sampler.target.levels:
        obs = [t.user_attrs["model_obs"]["levels"][str(c)] for t in measured]
        lower = max(o["output"] - o["output_ci"] for o in obs)
        out[c] = (lower, float(np.percentile(draws[c], 97.5, axis=0).max()))
    return out


def test_the_per_level_predictions_are_the_weighted_objective_s_parts(profile):
    study, sampler, state = profile
    trials = study.get_trials(deepcopy=False)
    a, b = (Knowledge(trials, state.others, -1, sampler) for _ in range(2))
    configs = a.candidates[:10]
    weighted = a.predictor.samples(configs)  # the same seed: the same joint draws
    parts = b.predictor.level_samples(configs)
    assert list(parts) == list(sampler.target.levels) == [1, 8, 32, 64]
    summed = sum(w * parts[c] for c, w in zip(parts, sampler.target.weights, strict=True))
    assert np.allclose(weighted, summed)
    assert parts[64].mean() > parts[1].mean()  # output tok/s grows with the streams in flight


def test_every_level_must_be_settled_and_each_says_which_rule(profile):
    study, sampler, state = profile
    bounds = _per_level(sampler, state)
    winners = [c for c, (lower, upper) in bounds.items() if upper < lower]
    open_levels = [c for c in bounds if c not in winners]
    assert winners and open_levels  # midway: the case the per-level rule is for
    assert stopping.decide(sampler, study) is None  # no level armed: the open ones continue
    # Every open level trailing a baseline no unmeasured configuration reaches: settled.
    far = {c: stopping.Below(f"trial_{c:04d}", 0.9, 1e12) for c in open_levels}
    decided = stopping.decide(sampler, study, levels_below=far)
    assert isinstance(decided, stopping.ProfileStop)
    assert decided.ruled_out == len(state.candidates)
    rules = {level.level: level.rule for level in decided.levels}
    assert rules == {c: stopping.WINNER if c in winners else stopping.OFF for c in bounds}
    for level in decided.levels:
        if level.rule == stopping.WINNER:
            assert level.lower_bound == pytest.approx(bounds[level.level][0])
            assert level.highest_upper < level.lower_bound
    line = decided.line("output tok/s")
    assert line.startswith("model: every level is settled: at 1 ")
    assert all(f"at {c} " in line for c in bounds)
    assert f"{len(state.candidates)} configurations ruled out" in line
    # One open level left unarmed, or armed by a baseline that what is left reaches: not settled.
    assert stopping.decide(sampler, study, levels_below=dict(list(far.items())[1:])) is None
    reached = {**far, open_levels[0]: stopping.Below("trial_0001", 0.9, 0.0)}
    assert stopping.decide(sampler, study, levels_below=reached) is None


# -- each level judged from its own runs -------------------------------------------------------
BASE_RUNS = [88.0, 90.0, 87.5, 89.0, 88.5]


def _launch(name: str, scale: dict[int, float], role: str = "trial") -> TrialResult:
    """A load-profile launch at 1, 8 and 64 in flight: output tok/s per run at each level, run r
    the same prompts as run r elsewhere (the baseline's runs times the level's `scale`)."""
    runs = [
        RunSummary(k, c, 3, 0, 100, v, v, v * c * scale[c], 0.1, 2.0, "meta")
        for c in scale
        for k, v in enumerate(BASE_RUNS, 1)
    ]
    params = {} if role == "baseline" else {"speculative_algorithm": "EAGLE3"}
    return TrialResult(name, role, Outcome.OK, "sim", True, 10.0, params, runs=runs, folder="")


def test_each_level_is_judged_against_the_baseline_the_per_level_answer_uses():
    profile = Objective("weighted_throughput", 64, levels=[1, 8, 64])
    baseline = _launch("baseline", {1: 1.0, 8: 1.0, 64: 1.0}, "baseline")
    uncapped = _launch("uncapped", {1: 1.0, 8: 1.0, 64: 1.3}, "baseline")
    trials = [
        _launch("trial_0001", {1: 0.8, 8: 1.2, 64: 1.1}),
        _launch("trial_0002", {1: 0.9, 8: 0.7, 64: 1.05}),
    ]
    found = slower_per_level(trials, baseline, profile, "output", uncapped, cap=48)
    assert set(found) == {1, 64}  # at 8 trial_0001 is faster
    assert found[1].best == "trial_0002" and found[1].speedup == pytest.approx(0.9)
    stat = summarize(BASE_RUNS)
    assert found[1].baseline_lower == pytest.approx(stat.mean - stat.ci95)
    # above the equal cap the uncapped baseline is the one compared with: 1.1 / 1.3
    assert found[64].best == "trial_0001" and found[64].speedup == pytest.approx(1.1 / 1.3)
    assert slower_per_level(trials, baseline, profile, "output").keys() == {1}
