"""The load-profile objectives and latency limits: values, intervals, validation, constraints
told to Optuna so violating trials are infeasible (not penalised)."""

from __future__ import annotations

import math

import optuna
import pytest
from omegaconf import OmegaConf
from optuna.trial import TrialState

from harness.record.results import Outcome, RunSummary, TrialResult
from sweep.study.loop.decisions import SearchDriver
from sweep.study.trial.objective import Objective
from tests.unit.test_search import cand


def measured(**metrics: float) -> TrialResult:
    return TrialResult("t", "trial", Outcome.OK, "sim", True, 1.0, {}, metrics=dict(metrics))


LEVELS = {
    "tok_s": 100.0,
    "tok_s_ci95": 2.0,
    "output_tok_s_c1": 100.0,
    "output_tok_s_c1_ci95": 2.0,
    "output_tok_s_c64": 2000.0,
    "output_tok_s_c64_ci95": 40.0,
    "decode_tok_s_c1": 100.0,
    "decode_tok_s_c64": 30.0,
    "itl_ms_p99_c1": 12.0,
    "itl_ms_p99_c64": 50.0,
    "ttft_ms_p99_c64": 900.0,
}


def cfg(objective="tok_s", concurrency=(1, 64), **search):
    base = {"objective": objective, "throughput_concurrency": 64, **search}
    return OmegaConf.create(base), OmegaConf.create({"concurrency": list(concurrency)})


def test_weighted_throughput_is_the_time_weighted_mean_with_its_interval():
    obj = Objective("weighted_throughput", 64, levels=[1, 64], weights=[3, 1])
    assert obj.weights == [0.75, 0.25] and not obj.multi and not obj.prunable
    r = measured(**LEVELS)
    assert obj.values(r, None) == [pytest.approx(0.75 * 100 + 0.25 * 2000)]
    derived = obj.derived(r)
    assert derived["weighted_throughput_ci95"] == pytest.approx(math.hypot(0.75 * 2, 0.25 * 40))
    assert obj.values(measured(output_tok_s_c1=100.0), None) is None  # a level missing


def test_per_level_speed_is_one_objective_per_level():
    obj = Objective("per_level_speed", 64, levels=[1, 64])
    assert obj.metrics == ["decode_tok_s_c1", "decode_tok_s_c64"] and obj.multi
    assert obj.values(measured(**LEVELS), None) == [100.0, 30.0]
    assert obj.directions == ["maximize", "maximize"]


def test_the_profile_defaults_to_every_benchmarked_level_with_equal_weights():
    obj = Objective.from_config(*cfg("weighted_speed", (1, 8, 64)))
    assert obj.levels == [1, 8, 64] and obj.weights == pytest.approx([1 / 3] * 3)
    assert Objective.from_config(*cfg()).levels == []  # single-level objectives keep no profile


@pytest.mark.parametrize(
    ("objective", "search", "match"),
    [
        ("weighted_throughput", {"load_profile": {"levels": [1, 32]}}, r"load_profile\.levels.*32"),
        ("weighted_throughput", {"load_profile": {"weights": [1]}}, r"load_profile\.weights"),
        ("weighted_throughput", {"load_profile": {"weights": [1, -1]}}, r"load_profile\.weights"),
        ("tok_s", {"load_profile": {"weights": [1, 1]}}, r"load_profile\.weights.*objective"),
        ("tok_s", {"slo": {"itl_ms_p99": 0}}, r"search\.slo\.itl_ms_p99=0"),
        ("tok_s", {"slo": {"itl_ms_p99": 40, "level": 32}}, r"search\.slo\.level=32"),
        ("throughput", {"throughput_concurrency": 32}, r"benchmark\.concurrency=\[1,32\]"),
    ],
)
def test_a_bad_profile_or_limit_is_refused_naming_the_key_and_the_fix(objective, search, match):
    with pytest.raises(ValueError, match=match):
        Objective.from_config(*cfg(objective, **search))


def test_constraints_are_relative_excess_per_limit_and_level():
    obj = Objective.from_config(*cfg(slo={"itl_ms_p99": 40, "ttft_ms_p99": 2000, "level": None}))
    r = measured(**LEVELS)
    r.runs = [RunSummary(1, c, 3, 0, 100, 1.0, 1.0, 1.0, 0.1, None, None) for c in (1, 64)]
    found = obj.constraints(r)
    assert found["slo_itl_ms_p99_c1"] == pytest.approx(12 / 40 - 1)  # met
    assert found["slo_itl_ms_p99_c64"] == pytest.approx(50 / 40 - 1)  # violated
    assert found["slo_ttft_ms_p99_c1"] == 1.0  # not measured: not shown to meet it
    assert obj.violations(r)[0].startswith("itl_ms_p99 50.0 > 40 @ 64")
    at_one = Objective("tok_s", 64, slo={"itl_ms_p99": 40}, slo_level=1)
    assert at_one.constraints(r) == {"slo_itl_ms_p99_c1": pytest.approx(-0.7)}
    assert Objective("tok_s", 64).constraints(r) == {}


def test_a_trial_over_a_limit_is_infeasible_for_optuna_and_never_best():
    obj = Objective("tok_s", 64, slo={"itl_ms_p99": 40}, slo_level=64)
    study = optuna.create_study(directions=["maximize"], sampler=optuna.samplers.TPESampler())
    driver = SearchDriver(study, obj)
    fast = measured(**{**LEVELS, "tok_s": 150.0})  # fastest single stream, ITL 50 ms at 64
    slow = measured(**{**LEVELS, "tok_s": 110.0, "itl_ms_p99_c64": 35.0})
    assert driver.tell(study.ask(), cand(mem=0.85), fast, None) is TrialState.COMPLETE
    driver.tell(study.ask(), cand(mem=0.86), slow, None)
    first = study.trials[0]
    assert first.constraints["slo_itl_ms_p99_c64"] > 0 and first.constraints["oom"] == 0
    assert first.user_attrs["slo_violations"] == ["itl_ms_p99 50.0 > 40 @ 64"]
    assert study.best_trial.number == 1  # the SLO, not the speed, decides
    # A duplicate of the violating trial is as infeasible as its source.
    verdict = driver.verdict(cand(mem=0.85))
    dup = TrialResult("d", "trial", Outcome.DUPLICATE, "sim", True, 1.0, {})
    driver.tell(study.ask(), cand(mem=0.85), dup, None, verdict.source)
    assert study.trials[2].constraints["slo_itl_ms_p99_c64"] > 0


def test_weighted_objectives_record_their_aggregate_and_do_not_prune():
    obj = Objective("weighted_throughput", 64, levels=[1, 64])
    study = optuna.create_study(directions=["maximize"])
    driver = SearchDriver(study, obj)
    driver.tell(study.ask(), cand(), measured(**LEVELS), None)
    attrs = study.trials[0].user_attrs
    assert attrs["metric_name"] == "weighted_throughput" and attrs["metric"] == 1050.0
    assert attrs["metric_ci95"] == pytest.approx(math.hypot(1, 20))
    assert driver.prune_below() is None  # one level's runs cannot bound the aggregate
