"""Summary statistics over repeated runs (no SciPy: a t-table is all we need)."""

from __future__ import annotations

import math
import statistics

from harness.results import Stat

# Two-sided 95% Student-t quantiles t(0.975, df) for df = 1..30.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t975(df: int) -> float:
    if df < 1:
        raise ValueError("need at least two values for an interval")
    if df <= len(_T975):
        return _T975[df - 1]
    return 1.960 + 2.4 / df  # within 0.1% of the exact quantile for df > 30


def summarize(values: list[float]) -> Stat:
    """Mean, sample std, coefficient of variation and 95% CI half-width of `values`."""
    if not values:
        raise ValueError("no values to summarize")
    n = len(values)
    mean = statistics.fmean(values)
    if n == 1:
        # One run carries no information about its spread: an infinite interval says so.
        return Stat(mean=mean, std=math.nan, cv=math.nan, ci95=math.inf, n=1, values=list(values))
    std = statistics.stdev(values)
    return Stat(
        mean=mean,
        std=std,
        cv=std / mean if mean else math.nan,
        ci95=t975(n - 1) * std / math.sqrt(n),
        n=n,
        values=list(values),
    )
