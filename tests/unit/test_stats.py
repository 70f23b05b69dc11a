from __future__ import annotations

import math

import pytest

from harness.stats import summarize, t975


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
