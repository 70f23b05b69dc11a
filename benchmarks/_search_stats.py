"""Medians over seeds with censoring, and their bootstrap intervals (search_efficiency).

A search that never came within 2% of the optimum within its budget is *censored*: it is
counted as +inf (worse than any that got there), never dropped. So a median is finite only
while more than half the seeds got there, and an interval's upper end is inf ("not reached")
when a resample can have more than half censored. Intervals are percentile bootstraps over
seeds (2,000 resamples by default); a ratio of two arms' medians resamples the seeds jointly
(the arms of one seed share its landscape and its draws of noise).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

INF = math.inf


def as_array(values: Sequence[float | None]) -> np.ndarray:
    """Per-seed values, None (censored) as +inf."""
    return np.array([INF if v is None else float(v) for v in values], dtype=float)


def median(values: Sequence[float | None]) -> float:
    if not values:
        raise ValueError("median of no values")
    return float(np.median(as_array(values)))


def _resamples(n: int, rng: np.random.Generator, resamples: int) -> np.ndarray:
    return rng.integers(0, n, size=(resamples, n))


def _interval(stats: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(stats, [tail, 100 - tail], method="inverted_cdf")
    return float(low), float(high)


def bootstrap_median(
    values: Sequence[float | None],
    seed: int = 0,
    resamples: int = 2000,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile-bootstrap interval of the median (bounds may be inf: censored)."""
    data = as_array(values)
    if data.size == 0:
        raise ValueError("interval of no values")
    rng = np.random.default_rng(seed)
    medians = np.median(data[_resamples(data.size, rng, resamples)], axis=1)
    return _interval(medians, level)


def ratio(a: float, b: float) -> float:
    """a / b for medians that may be inf: inf/inf and 0/0 are nan (undetermined)."""
    if (math.isinf(a) and math.isinf(b)) or (a == 0 and b == 0):
        return math.nan
    if b == 0:
        return INF
    return a / b


def bootstrap_ratio(
    a: Sequence[float | None],
    b: Sequence[float | None],
    seed: int = 0,
    resamples: int = 2000,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """median(a) / median(b) and its paired percentile-bootstrap interval (seeds resampled
    jointly: a[i] and b[i] are the same seed). nan where both medians are censored."""
    x, y = as_array(a), as_array(b)
    if x.size != y.size or x.size == 0:
        raise ValueError("paired values: the same seeds, at least one")
    rng = np.random.default_rng(seed)
    idx = _resamples(x.size, rng, resamples)
    mx, my = np.median(x[idx], axis=1), np.median(y[idx], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = np.where(np.isinf(mx) & np.isinf(my), np.nan, mx / my)
    ratios = ratios[~np.isnan(ratios)]
    point = ratio(float(np.median(x)), float(np.median(y)))
    if ratios.size == 0:
        return point, math.nan, math.nan
    low, high = _interval(ratios, level)
    return point, low, high


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile (inverted CDF: an observed value, inf allowed) of finite-or-inf values;
    nan values (undetermined ratios) are left out."""
    data = np.array([v for v in values if not math.isnan(v)], dtype=float)
    if data.size == 0:
        return math.nan
    return float(np.percentile(data, q * 100, method="inverted_cdf"))
