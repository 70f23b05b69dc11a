"""sweep.reproduce's verdict: consistent when the difference is inside its own 95% interval."""

from __future__ import annotations

import random

from harness.record.stats import summarize
from sweep.reproduce.remeasure import reproduces


def test_verdict_uses_the_interval_of_the_difference():
    assert reproduces(90.0, 2.0, 92.5, 2.0)  # outside 90 +- 2, inside +-2.83 of the difference
    assert not reproduces(90.0, 2.0, 93.0, 2.0)
    assert reproduces(90.0, 0.0, 90.0, 0.0)


def _verdicts(rng: random.Random, recorded_mean: float, new_mean: float, sd: float, n: int):
    for _ in range(n):
        a = summarize([rng.gauss(recorded_mean, sd) for _ in range(5)])
        b = summarize([rng.gauss(new_mean, sd) for _ in range(5)])
        yield reproduces(a.mean, a.ci95, b.mean, b.ci95)


def test_honest_repeats_pass_and_real_changes_are_caught():
    rng = random.Random(0)
    honest = sum(_verdicts(rng, 90, 90, 3, 2000)) / 2000
    assert honest > 0.95  # t intervals on 5 runs are wide: at least 95% of repeats agree
    changed = sum(_verdicts(rng, 90, 95, 1, 500)) / 500
    assert changed < 0.02  # a 5 tok/s change under 1 tok/s noise is caught
