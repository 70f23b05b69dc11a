"""Summary statistics over repeated runs (no SciPy: a t-table is all we need): a run's mean with
its interval, two means' consistency, and a speedup's interval from paired runs."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from harness.record.results import RunSummary, Stat

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


def consistent(a: float, a_ci95: float, b: float, b_ci95: float) -> bool:
    """Are two means, each with its 95% half-width, consistent with each other? Their difference
    has a half-width of about hypot(a_ci95, b_ci95); asking `b` to land inside `a`'s own interval
    instead would call one honest repeat in six a change. (The reproduction verdict and the
    baseline's drift check both ask this.)"""
    return abs(b - a) <= math.hypot(a_ci95, b_ci95)


@dataclass(frozen=True)
class Ratio:
    """A ratio of means (trial / baseline) with its 95% interval; low/high are nan when the
    runs cannot bound it (fewer than two, or a denominator not distinguishable from zero)."""

    value: float
    low: float
    high: float
    pairs: int  # run numbers measured in both (0: the interval treats the runs as unpaired)


def objective_runs(runs: Sequence[RunSummary]) -> dict[int, float]:
    """Run number -> decode tok/s of the complete runs at the objective level (1 if measured,
    else the first), the values `tok_s` is the mean of
    (harness.measure.metrics.aggregate_metrics)."""
    complete = [r for r in runs if not r.incomplete]
    if not complete:
        return {}
    level = 1 if any(r.concurrency == 1 for r in complete) else complete[0].concurrency
    return {
        r.run: r.decode_tok_s
        for r in complete
        if r.concurrency == level and r.decode_tok_s is not None
    }


def paired_ratio(trial: dict[int, float], baseline: dict[int, float]) -> Ratio:
    """mean(trial) / mean(baseline) with Fieller's 95% interval.

    Run r of a trial and run r of the baseline send the same prompts (harness.measure.prompt_plan),
    so the runs measured in both are pairs: the interval is every R for which the per-run
    differences trial_r - R * baseline_r have a mean indistinguishable from zero (a paired t
    test, n - 1 degrees of freedom). Prompt-to-prompt variance, which both sides share, then
    cancels. With fewer than two pairs the runs are treated as independent samples instead
    (Fieller for two means, min(n) - 1 degrees of freedom). Both sides are positive (tok/s,
    seconds), so where the trial's own mean is not distinguishable from zero the interval's low
    end is 0, not the negative root Fieller's quadratic also has."""
    if not trial or not baseline:
        return Ratio(math.nan, math.nan, math.nan, 0)
    value = statistics.fmean(trial.values()) / statistics.fmean(baseline.values())
    common = sorted(trial.keys() & baseline.keys())
    if len(common) >= 2:
        x = [trial[r] for r in common]
        y = [baseline[r] for r in common]
        q = t975(len(common) - 1) ** 2 / len(common)
        sxx, syy = statistics.variance(x), statistics.variance(y)
        sxy = statistics.covariance(x, y)
        low, high = _fieller(statistics.fmean(x), statistics.fmean(y), q * sxx, q * syy, q * sxy)
        return Ratio(value, low, high, len(common))
    nx, ny = len(trial), len(baseline)
    if min(nx, ny) < 2:
        return Ratio(value, math.nan, math.nan, 0)
    t2 = t975(min(nx, ny) - 1) ** 2
    vx = t2 * statistics.variance(trial.values()) / nx
    vy = t2 * statistics.variance(baseline.values()) / ny
    mx, my = statistics.fmean(trial.values()), statistics.fmean(baseline.values())
    return Ratio(value, *_fieller(mx, my, vx, vy, 0.0), 0)


def _fieller(mx: float, my: float, vx: float, vy: float, vxy: float) -> tuple[float, float]:
    """Roots in R of (mx - R my)^2 = vx - 2 R vxy + R^2 vy (the v's already carry t^2 / n), the
    lower one cut at 0: both means are of positive quantities (paired_ratio)."""
    a = my * my - vy
    if a <= 0:  # the baseline's mean is not distinguishable from zero: no bounded interval
        return math.nan, math.nan
    b = mx * my - vxy
    c = mx * mx - vx
    root = math.sqrt(max(b * b - a * c, 0.0))
    return max((b - root) / a, 0.0), (b + root) / a


def speedup_metrics(
    tok_s: float | None,
    runs: Sequence[RunSummary],
    baseline_tok_s: float | None,
    baseline_runs: dict[int, float] | None,
    key: str = "speedup_vs_baseline",
) -> dict[str, float]:
    """`key` (tok_s / the baseline's tok_s) and, when the baseline's runs are known, `key_ci95_low`
    and `key_ci95_high` (paired_ratio). Empty without a baseline or a measured tok_s."""
    if tok_s is None or not baseline_tok_s:
        return {}
    values = {key: tok_s / baseline_tok_s}
    ratio = paired_ratio(objective_runs(runs), baseline_runs or {})
    if math.isfinite(ratio.low) and math.isfinite(ratio.high):
        values[f"{key}_ci95_low"], values[f"{key}_ci95_high"] = ratio.low, ratio.high
    return values
