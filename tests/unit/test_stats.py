from __future__ import annotations

import math

import pytest

from harness.record.stats import consistent, paired_ratio, summarize, t975


def test_summary_of_known_values():
    stat = summarize([10.0, 12.0, 14.0])
    assert stat.mean == 12.0
    assert stat.std == pytest.approx(2.0)
    assert stat.cv == pytest.approx(2.0 / 12.0)
    assert stat.ci95 == pytest.approx(4.303 * 2.0 / math.sqrt(3))


def test_one_run_has_an_infinite_interval():
    stat = summarize([90.0])
    assert stat.mean == 90.0 and math.isinf(stat.ci95) and math.isnan(stat.std)


def test_t_quantiles_approach_normal():
    assert t975(1) == 12.706
    assert t975(200) == pytest.approx(1.972, abs=0.002)


def test_empty_is_an_error():
    with pytest.raises(ValueError):
        summarize([])


def test_speedup_interval_of_a_constant_baseline_is_the_trials_t_interval():
    # A baseline without spread: Fieller reduces to the trial's own t-interval over its mean.
    ratio = paired_ratio({1: 10.0, 2: 12.0, 3: 14.0}, {1: 5.0, 2: 5.0, 3: 5.0})
    half = 4.303 * 2.0 / math.sqrt(3) / 5.0
    assert ratio.value == pytest.approx(2.4) and ratio.pairs == 3
    assert (ratio.low, ratio.high) == (pytest.approx(2.4 - half), pytest.approx(2.4 + half))


def test_speedup_interval_is_where_the_paired_difference_is_not_significant():
    trial = {1: 95.0, 2: 121.0, 3: 80.0, 4: 104.0, 5: 112.0}
    base = {1: 80.0, 2: 99.0, 3: 70.0, 4: 85.0, 5: 96.0}
    ratio = paired_ratio(trial, base)

    def t_of(r: float) -> float:  # the paired t statistic of trial - r * baseline
        stat = summarize([trial[k] - r * base[k] for k in trial])
        return stat.mean / (stat.std / math.sqrt(stat.n))

    assert abs(t_of(ratio.low)) == pytest.approx(t975(4), rel=1e-6)
    assert abs(t_of(ratio.high)) == pytest.approx(t975(4), rel=1e-6)
    assert ratio.low < ratio.value < ratio.high


def test_pairing_removes_the_variance_both_sides_share():
    # Prompts differ in speed by +-20%; the trial is 1.2x on every one of them.
    base = {r: v for r, v in enumerate([70.0, 95.0, 80.0, 110.0, 88.0], 1)}
    trial = {r: 1.2 * v + (0.3 if r % 2 else -0.3) for r, v in base.items()}
    paired = paired_ratio(trial, base)
    unpaired = paired_ratio(trial, {r + 100: v for r, v in base.items()})  # no common runs
    assert paired.pairs == 5 and unpaired.pairs == 0
    assert paired.high - paired.low < 0.02 < unpaired.high - unpaired.low
    assert paired.low < 1.2 < paired.high and unpaired.low < 1.2 < unpaired.high


def test_a_ratio_of_positive_quantities_has_no_negative_bound():
    # the TTFT p99 of three runs, one of them an outlier: the trial's mean is not distinguishable
    # from zero, so Fieller's lower root is negative; the interval starts at 0 instead
    trial, reference = {1: 0.5, 2: 0.4, 3: 6.0}, {1: 1.0, 2: 1.1, 3: 0.9}
    ratio = paired_ratio(trial, reference)
    assert ratio.low == 0.0 and ratio.high > 5 and ratio.pairs == 3
    assert ratio.value == pytest.approx(6.9 / 3.0)


def test_speedup_without_two_runs_has_no_interval():
    ratio = paired_ratio({1: 100.0}, {1: 80.0})
    assert ratio.value == pytest.approx(1.25) and math.isnan(ratio.low) and math.isnan(ratio.high)


def test_consistency_is_judged_by_the_interval_of_the_difference():
    assert consistent(90.0, 2.0, 92.5, 2.0)  # outside 90 +- 2, inside +-2.83
    assert not consistent(90.0, 2.0, 93.0, 2.0)
