"""The search stops at a settled answer either way (sweep.study.model.stopping, judged against the
baseline as the Deploy line judges: sweep.study.answer.settled), and a screened configuration's
run counts once it is launched in full (sweep.study.loop.screens, sweep.study.answer.pooling)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import optuna
import pytest

from harness.record.results import Outcome, RunSummary, TrialResult
from harness.record.stats import summarize
from sweep.readout.trials_table import summary_table
from sweep.study.answer import pooling
from sweep.study.answer.settled import slower_best
from sweep.study.loop import screens
from sweep.study.model import observations, stopping
from sweep.study.model.sampler import ModelSampler, model_sampler
from sweep.study.trial.objective import Objective
from tests.unit.test_model_sampler import SPACE, _before, _search

OBJECTIVE = Objective("tok_s", 64)


@pytest.fixture(scope="module")
def unreachable():
    """A search whose target nobody reaches: it runs until the model's stopping rule ends it."""
    return _search(optimum=1e9)


# -- the stopping rules ------------------------------------------------------------------------
def test_speculation_off_is_named_where_nothing_left_reaches_the_baseline(unreachable):
    _, study = unreachable
    sampler = model_sampler(study.sampler)
    winner = stopping.decide(sampler, study)
    assert winner is not None and winner.rule == stopping.WINNER
    above = stopping.Below("trial_0004", 0.9, winner.highest_upper + 0.1)
    off = stopping.decide(sampler, study, above)
    assert off is not None and off.rule == stopping.OFF and off.below == above
    assert off.ruled_out == winner.ruled_out > 0
    line = off.line("tok/s")
    assert line.startswith("model: speculation off is settled: trial_0004 reads 0.90×")
    assert "configurations ruled out" in line and "baseline's lower bound" in line
    # A configuration left whose upper bound reaches the baseline: the baseline rule holds back,
    # and the winner's rule decides as before.
    within = stopping.Below("trial_0004", 0.9, winner.highest_upper - 0.1)
    assert stopping.decide(sampler, study, within).rule == stopping.WINNER


def test_the_baseline_rule_ends_a_search_the_winner_rule_would_continue(unreachable):
    """Midway the best's lower bound is below what is left, but everything left is below a
    baseline that the best trails: that is the answer "speculation off", settled."""
    _, study = unreachable
    midway = _before(study, 8, ModelSampler(SPACE, OBJECTIVE, seed=0))
    sampler = model_sampler(midway.sampler)
    assert stopping.decide(sampler, midway) is None  # the winner's rule: keep searching
    far = stopping.Below("trial_0000", 0.5, 1e12)
    decided = stopping.decide(sampler, midway, far)
    assert decided is not None and decided.rule == stopping.OFF
    assert decided.ruled_out == len(sampler.state(midway.trials, ("hicache_size",), -1).candidates)
    assert stopping.decide(sampler, midway, stopping.Below("trial_0000", 0.5, 0.0)) is None


# -- judged as the Deploy line judges ----------------------------------------------------------
def _result(name: str, speeds: list[float], role: str = "trial") -> TrialResult:
    runs = [RunSummary(k, 1, 3, 0, 100, v, v, v, 0.1, 2.0, "meta") for k, v in enumerate(speeds, 1)]
    stat = summarize(speeds)
    params = {} if role == "baseline" else {"speculative_algorithm": "EAGLE3"}
    return TrialResult(
        name, role, Outcome.OK, "sim", True, 10.0, params, runs=runs,
        metrics={"tok_s": stat.mean, "tok_s_ci95": stat.ci95}, folder="", number=0,
    )  # fmt: skip


BASE = [88.0, 90.0, 87.5, 89.0, 88.5]


def test_a_best_slower_beyond_the_paired_interval_settles_speculation_off():
    baseline = _result("baseline", BASE, "baseline")
    slow = _result("trial_0001", [v * 0.9 for v in BASE])
    slower = _result("trial_0002", [v * 0.8 for v in BASE])
    found = slower_best([slower, slow], baseline, OBJECTIVE)
    assert found is not None and found.best == "trial_0001"
    assert found.speedup == pytest.approx(0.9)
    stat = summarize(BASE)
    assert found.baseline_lower == pytest.approx(stat.mean - stat.ci95)


def test_a_best_within_the_baseline_s_noise_or_faster_settles_nothing():
    baseline = _result("baseline", BASE, "baseline")
    level = _result("trial_0001", [89.0, 88.0, 89.0, 88.0, 89.5])  # the interval includes 1x
    faster = _result("trial_0002", [v * 1.2 for v in BASE])
    assert slower_best([level], baseline, OBJECTIVE) is None
    assert slower_best([faster, _result("t", [v * 0.8 for v in BASE])], baseline, OBJECTIVE) is None
    assert slower_best([level], None, OBJECTIVE) is None  # nothing to be slower than


def _profiled(name: str, scale: float, role: str = "trial") -> TrialResult:
    """A load-profile launch at 1 and 8 in flight: output tok/s per run at each level."""
    result = _result(name, [v * scale for v in BASE], role)
    result.runs = [
        RunSummary(k, c, 3, 0, 100, v, v, v * c, 0.1, 2.0, "meta")
        for c in (1, 8)
        for k, v in enumerate([v * scale for v in BASE], 1)
    ]
    for c in (1, 8):
        stat = summarize([v * scale * c for v in BASE])
        result.metrics |= {f"output_tok_s_c{c}": stat.mean, f"output_tok_s_c{c}_ci95": stat.ci95}
    return result


def test_under_a_load_profile_the_weighted_value_is_judged():
    profile = Objective("weighted_throughput", 64, levels=[1, 8])
    baseline = _profiled("baseline", 1.0, "baseline")
    found = slower_best([_profiled("trial_0001", 0.8)], baseline, profile)
    assert found is not None and found.speedup == pytest.approx(0.8)
    weighted = profile.derived(baseline)
    lower = weighted["weighted_throughput"] - weighted["weighted_throughput_ci95"]
    assert found.baseline_lower == pytest.approx(lower)
    assert slower_best([_profiled("trial_0001", 1.0)], baseline, profile) is None


# -- a screened run counts ---------------------------------------------------------------------
def _launch(folder: Path, name: str, speeds: list[float], first: int, screened: bool):
    result = _result(name, speeds)
    result.runs = [
        RunSummary(k, 1, 3, 0, 100, v, v, v, 0.1, 2.0, "meta") for k, v in enumerate(speeds, first)
    ]
    result.folder = str(folder)
    result.metrics["kv_pool_tokens"] = 116170.0
    if screened:
        result.outcome = Outcome.PRUNED
        result.warnings = ["screened"]
    folder.mkdir(parents=True, exist_ok=True)
    result.write(folder)
    return result


def _told(
    study: optuna.Study, result: TrialResult, key: str, screened: bool, pooled: int | None = None
) -> None:
    trial = study.ask()
    if pooled is not None:
        trial.set_user_attr(observations.POOLED, pooled)
    trial.set_user_attr("folder", result.folder)
    trial.set_user_attr("candidate_key", key)
    trial.set_user_attr("candidate", {"steps": 2, "topk": 2, "draft_tokens": 4})
    trial.set_user_attr(observations.ATTR, {"levels": {"1": {"tau": 2.0, "runs": 1}}})
    if screened:
        trial.set_user_attr(observations.SCREENED, True)
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    else:
        study.tell(trial, result.metrics["tok_s"])


def test_a_screened_run_is_pooled_into_its_full_launch(tmp_path):
    study = optuna.create_study(direction="maximize")
    screen = _launch(tmp_path / "trial_0003", "trial_0003", [78.7], 1, screened=True)
    _told(study, screen, "2/2/4", screened=True)
    assert screens.screen_of(study, "another") is None
    found = screens.screen_of(study, "2/2/4")
    assert found is not None and found.number == 0 and [r.run for r in found.runs] == [1]
    # The full launch measures the runs the screen did not, numbered after its run.
    assert screens.after_screen(found, 5) == ["benchmark.runs=4", "trial.first_run=2"]
    full = _launch(tmp_path / "trial_0005", "trial_0005", [80.1, 79.6, 80.4, 79.9], 2, False)
    pooled = pooling.pool_screen(full, found, 1)
    pooling.write(pooled)
    assert [r.run for r in pooled.runs] == [1, 2, 3, 4, 5]  # run r pairs with run r elsewhere
    everything = summarize([78.7, 80.1, 79.6, 80.4, 79.9])
    assert math.isclose(pooled.metrics["tok_s"], everything.mean)
    assert math.isclose(pooled.metrics["tok_s_ci95"], everything.ci95)  # over 5 runs
    assert pooled.metrics["kv_pool_tokens"] == 116170.0  # no run gives it: the full launch's
    assert pooled.screens == [
        {"trial": "trial_0003", "folder": screen.folder, "runs": [1], "wall_s": None}
    ]
    kept = TrialResult.from_dict(
        json.loads((tmp_path / "trial_0005" / pooling.FIRST_LAUNCH).read_text())
    )
    assert [r.run for r in kept.runs] == [2, 3, 4, 5]  # the launch's own record, kept
    assert [r.run for r in TrialResult.read(tmp_path / "trial_0005").runs] == [1, 2, 3, 4, 5]
    # Told with the screen it pooled (the loop's attribute): the screen is not pooled twice.
    _told(study, pooled, "2/2/4", screened=False, pooled=found.number)
    assert screens.screen_of(study, "2/2/4") is None


def test_the_table_says_how_many_runs_from_how_many_launches(tmp_path):
    screen = _launch(tmp_path / "s", "trial_0003", [78.7], 1, screened=True)
    full = _launch(tmp_path / "f", "trial_0005", [80.1, 79.6, 80.4, 79.9], 2, False)
    pooled = pooling.pool_screen(full, screen, 1)
    table = summary_table([screen, pooled], _result("baseline", BASE, "baseline"), True)
    notes = list(table.columns[-1].cells)
    assert "5 runs, 2 launches" in notes
    assert "pooled into trial_0005" in notes


def test_the_model_reads_a_pooled_screen_through_its_full_launch():
    study = optuna.create_study(direction="maximize")
    level = {"levels": {"1": {"tau": 2.0, "decode": 80.0, "runs": 1}}}
    cand = {"steps": 2, "topk": 2, "draft_tokens": 4}
    for screened in (True, False):
        trial = study.ask()
        trial.set_user_attr(observations.ATTR, level)
        trial.set_user_attr("candidate", cand)
        if screened:
            trial.set_user_attr(observations.SCREENED, True)
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            trial.set_user_attr(observations.POOLED, 0)
            study.tell(trial, 80.0)
    read = observations.read(study.get_trials())
    assert [o.number for o in read] == [1] and not read[0].screened
