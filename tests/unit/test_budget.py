"""GPU-hours per trial and a study-wide budget: launches pay, duplicates and predicted OOMs do
not, a resumed study finishes what is left."""

from __future__ import annotations

import optuna
import pytest

from harness.record.results import Outcome, TrialResult
from sweep.study.loop.budget import MAX_IDLE_PROPOSALS, Budget, gpu_hours, spent
from sweep.study.loop.decisions import SearchDriver
from sweep.study.trial.objective import Objective
from tests.unit.test_search import cand


def launched(outcome=Outcome.OK, startup_s=600.0, wall_s=40.0, startup_wall_s=4.0, scale=200.0):
    r = TrialResult("t", "trial", outcome, "sim", True, scale, {})
    r.startup_s, r.wall_s, r.startup_wall_s = startup_s, wall_s, startup_wall_s
    if outcome is Outcome.OK:
        r.metrics = {"tok_s": 90.0, "tok_s_ci95": 1.0}
    return r


def test_a_launch_costs_its_server_time_on_the_servers_clock_times_the_gpus():
    # 600 s to start (server clock) + 36 s of wall benchmark at clock scale 200 = 7,800 s
    assert gpu_hours(launched(), 8) == pytest.approx(7800 * 8 / 3600)
    assert gpu_hours(launched(Outcome.OOM, wall_s=4.0), 8) == pytest.approx(600 * 8 / 3600)
    for free in (Outcome.DUPLICATE, Outcome.PREDICTED_OOM, Outcome.KNOWN_CRASH, Outcome.INVALID):
        assert gpu_hours(launched(free), 8) == 0.0


def study_with(results) -> optuna.Study:
    s = optuna.create_study(directions=["maximize"])
    driver = SearchDriver(s, Objective("tok_s", 64), gpus_per_trial=8)
    for i, r in enumerate(results):
        t = s.ask()
        source = s.trials[0] if r.outcome is Outcome.DUPLICATE else None
        driver.tell(t, cand(mem=0.80 + i / 100), r, None, source)
    return s


def test_the_study_records_what_each_trial_cost_and_skips_cost_nothing():
    s = study_with([launched(), launched(Outcome.DUPLICATE), launched(Outcome.PREDICTED_OOM)])
    costs = [t.user_attrs["gpu_hours"] for t in s.trials]
    assert costs[0] > 0 and costs[1:] == [0.0, 0.0]
    assert spent(s.trials) == pytest.approx(costs[0])


def test_a_resumed_study_finishes_the_remainder_of_its_budget():
    s = study_with([launched(), launched()])  # 2 x 17.33 GPU-h spent by an earlier sweep
    budget = Budget(40.0)  # the same budget, a new sweep on the same study
    assert budget.remaining(s.trials) == pytest.approx(40.0 - 2 * 7800 * 8 / 3600)
    assert not budget.exhausted(s.trials)
    study_with_more = study_with([launched(), launched(), launched()])
    assert Budget(40.0).exhausted(study_with_more.trials)  # spent: nothing more to launch
    assert not Budget(None).exhausted(study_with_more.trials)  # no budget: n_trials decides


def test_a_budget_stops_when_the_sampler_only_proposes_what_the_study_knows():
    budget = Budget(1000.0)
    for _ in range(MAX_IDLE_PROPOSALS - 1):
        budget.note(launched(Outcome.DUPLICATE))
    assert not budget.exhausted([])
    budget.note(launched(Outcome.PREDICTED_OOM))
    assert budget.exhausted([])
    budget.note(launched())
    assert not budget.exhausted([])


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_a_budget_must_be_a_positive_number_of_gpu_hours(bad):
    with pytest.raises(ValueError, match="budget_gpu_hours"):
        Budget(bad)
