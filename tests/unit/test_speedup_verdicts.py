"""Every speedup carries its paired 95% interval (console, summary, MLflow metrics), and the
baseline's drift is judged by the interval of the difference."""

from __future__ import annotations

import pytest

from harness.measure.metrics import aggregate_metrics
from harness.record.results import Outcome, RunSummary, TrialResult
from sweep.readout.verdict import drift_line, ratio_interval, summary_lines


def run(number: int, tok_s: float, concurrency: int = 1, incomplete: bool = False) -> RunSummary:
    return RunSummary(
        number, concurrency, 3, 0, 300, tok_s, tok_s, tok_s, 0.1, None, None, incomplete=incomplete
    )


def result(name: str, values: list[float], role: str = "trial") -> TrialResult:
    runs = [run(i, v) for i, v in enumerate(values, 1)]
    return TrialResult(
        name, role, Outcome.OK, "sim", True, 1.0, {}, metrics=aggregate_metrics(runs, 1), runs=runs
    )


# Prompts differ in speed run to run; the trial is about 1.2x on each of them.
BASE = [70.0, 95.0, 80.0, 110.0, 88.0]
TRIAL = [84.5, 113.7, 96.3, 131.7, 105.9]


def test_the_best_speedup_has_a_paired_interval():
    baseline = result("baseline", BASE, role="baseline")
    lines, metrics = summary_lines([result("trial_0000", TRIAL)], baseline, None)
    speedup = metrics["best_speedup_vs_baseline"]
    low, high = (
        metrics["best_speedup_vs_baseline_ci95_low"],
        metrics["best_speedup_vs_baseline_ci95_high"],
    )
    assert speedup == pytest.approx(sum(TRIAL) / sum(BASE))
    assert 1.15 < low < speedup < high < 1.25  # tight: the pairs cancel the prompts' spread
    text = " ".join(" ".join(lines).split())
    assert f"95% interval {ratio_interval(low, high)}" in text
    assert "faster beyond the 95% interval" in text  # the means' own intervals overlap


def test_a_replaced_run_is_paired_by_its_number():
    baseline = result("baseline", BASE, role="baseline")
    trial = result("trial_0000", TRIAL)
    trial.runs[2].incomplete = True  # run 3 stalled; run 6 replaced it
    trial.runs.append(run(6, 100.0))
    _, metrics = summary_lines([trial], baseline, None)
    assert metrics["best_speedup_vs_baseline_ci95_low"] > 1.1  # pairs 1, 2, 4, 5


def test_drift_is_judged_by_the_interval_of_the_difference():
    before = result("baseline", [88.0, 90.0, 92.0, 89.0, 91.0], role="baseline")
    ci = before.metrics["tok_s_ci95"]  # 1.96
    within = result("recheck", [x + 2.2 for x in [88.0, 90.0, 92.0, 89.0, 91.0]])
    line, drift = drift_line(before, within)  # outside the first interval, inside the difference's
    assert ci < 2.2 and drift == pytest.approx(100 * 2.2 / 90)
    assert "no drift beyond the 95% interval of the difference" in line
    beyond = result("recheck", [x + 3.0 for x in [88.0, 90.0, 92.0, 89.0, 91.0]])
    line, _ = drift_line(before, beyond)
    assert "drift beyond the 95% interval of the difference; conditions changed" in line


def test_an_interval_that_would_round_to_one_keeps_a_third_decimal():
    assert ratio_interval(1.0035, 1.1526) == "1.004–1.153×"
    assert ratio_interval(1.04, 1.15) == "1.04–1.15×"


def loaded(name: str, single: list[float], at_64: list[float], role: str = "trial") -> TrialResult:
    """A trial measured at 1 and 64 in flight: decode tok/s at 1, output tok/s at 64."""
    runs = [run(i, v) for i, v in enumerate(single, 1)]
    for i, v in enumerate(at_64, 1):
        r = run(i, v / 64, concurrency=64)
        r.output_tok_s = v
        runs.append(r)
    return TrialResult(
        name, role, Outcome.OK, "sim", True, 1.0, {}, metrics=aggregate_metrics(runs, 1), runs=runs
    )


def test_best_follows_a_throughput_objective_not_single_stream_speed():
    """With search.objective=throughput the verdict names the trial with the most output at the
    objective's level, and its speedup pairs that level's runs (datagen: the fastest single
    stream is not the one that serves the most)."""
    from sweep.readout.ranking import Ranking

    baseline = loaded("baseline", BASE, [1000.0, 1010.0, 990.0], role="baseline")
    fast_single = loaded("trial_0000", TRIAL, [900.0, 905.0, 895.0])
    big_pool = loaded("trial_0001", BASE, [1300.0, 1310.0, 1290.0])
    _, single = summary_lines([fast_single, big_pool], baseline, None)
    lines, metrics = summary_lines([fast_single, big_pool], baseline, None, ranking=Ranking(64))
    text = " ".join(" ".join(lines).split())
    assert single["best_tok_s"] == fast_single.metrics["tok_s"]  # the default: single stream
    assert "Best:[/bold] trial_0001" in text and "output at 64 in flight" in text
    assert metrics["best_output_tok_s_c64"] == pytest.approx(1300.0)
    assert 1.28 < metrics["best_speedup_vs_baseline"] < 1.32
    assert "faster beyond the 95% interval" in text
