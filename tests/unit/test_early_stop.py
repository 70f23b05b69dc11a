"""EarlyStop.should_stop on constructed runs, on both sides of its bound: fails if pruning never
or always fires (the whole path through a trial: tests/integration/test_pruning.py)."""

from __future__ import annotations

import math

from harness.record.results import RunSummary
from harness.record.stats import summarize
from harness.spec import EarlyStop


def runs(*values: float, concurrency: int = 1) -> list[RunSummary]:
    return [
        RunSummary(i, concurrency, 3, 0, 300, v, v, 2 * v, 0.1, None, None)
        for i, v in enumerate(values, 1)
    ]


SLOW = (78.0, 80.0, 79.0)  # mean 79, 95% upper bound 81.5


def test_stops_once_the_upper_bound_is_below_the_best_lower_bound():
    upper = summarize(list(SLOW)).mean + summarize(list(SLOW)).ci95
    assert math.isclose(upper, 79.0 + 4.303 / math.sqrt(3), rel_tol=1e-3)
    assert EarlyStop(below=upper + 0.1, concurrency=1).should_stop(runs(*SLOW))
    assert not EarlyStop(below=upper - 0.1, concurrency=1).should_stop(runs(*SLOW))


def test_never_stops_before_min_runs_nor_on_a_wide_interval():
    stop = EarlyStop(below=100.0, concurrency=1)
    assert not stop.should_stop(runs(79.0))  # one run: no interval yet
    assert not stop.should_stop(runs(60.0, 95.0))  # upper bound 77.5 + 222: could still win
    assert stop.should_stop(runs(60.0, 62.0))


def test_watches_its_own_level_and_metric():
    mixed = runs(*SLOW) + runs(200.0, 205.0, 210.0, concurrency=8)
    assert EarlyStop(below=90.0, concurrency=1).should_stop(mixed)
    assert not EarlyStop(below=90.0, concurrency=8).should_stop(mixed)
    # output_tok_s is twice decode_tok_s here: the bound of 90 no longer catches it
    assert not EarlyStop(below=90.0, concurrency=1, metric="output_tok_s").should_stop(mixed)
