"""The verdict under the trials table: which trial is best by the study's objective, its speedup
over the baseline with the paired interval, where the wall time went, the baseline's drift."""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.record import labels
from harness.record.results import Outcome, TrialResult
from harness.record.stats import consistent, paired_ratio
from sweep.readout.console import fmt_duration
from sweep.readout.memory_lines import kv_bound_lines
from sweep.readout.ranking import SINGLE_STREAM, Ranking


def summary_lines(
    results: list[TrialResult],
    baseline: TrialResult | None,
    recheck: TrialResult | None,
    exclude: set[str] | None = None,  # trials that cannot be best (over a latency limit)
    ranking: Ranking = SINGLE_STREAM,
    drift_from: TrialResult | None = None,  # the baseline's first launch, where runs were pooled
    settled: bool = True,  # False: an interrupted study, whose best says nothing of the answer
) -> tuple[list[str], dict[str, float]]:
    """The verdict under the table, and the numbers the parent run records. The drift is the
    re-check against `drift_from` (default: the baseline): the launch whose prompts it repeats."""
    lines, metrics = [], {}
    ok = [r for r in results if r.outcome is Outcome.OK and "tok_s" in r.metrics]
    best = best_of(results, exclude, ranking)
    base_ok = baseline is not None and baseline.outcome is Outcome.OK
    skipped = sum(
        r.outcome in (Outcome.DUPLICATE, Outcome.PREDICTED_OOM, Outcome.KNOWN_CRASH,
                      Outcome.DOMINATED)
        for r in results
    )  # fmt: skip
    if skipped:  # the trials stopped early or screened say so in the table's note column
        lines.append(
            f"\nServer starts saved: {skipped} (duplicates, dominated trees, predicted OOMs and "
            "known crashes not launched)."
        )
    if base_ok:
        metrics["baseline_tok_s"] = baseline.metrics["tok_s"]  # type: ignore[union-attr]
    if best:
        key = ranking.metric
        metrics[f"best_{key}"] = ranking.value(best)  # type: ignore[assignment]
        lines.append(best_line(best, baseline if base_ok else None, ranking, settled))
        if base_ok and (base := ranking.value(baseline)):
            metrics["best_speedup_vs_baseline"] = ranking.value(best) / base  # type: ignore[operator]
            ratio = paired_ratio(ranking.runs(best), ranking.runs(baseline))  # type: ignore[arg-type]
            if math.isfinite(ratio.low) and math.isfinite(ratio.high):
                metrics["best_speedup_vs_baseline_ci95_low"] = ratio.low
                metrics["best_speedup_vs_baseline_ci95_high"] = ratio.high
    cut = [r.metrics["truncation_rate"] for r in ok if "truncation_rate" in r.metrics]
    if cut and max(cut) > 0:
        lines.append(
            f"Outputs cut at max_tokens while still reasoning: {100 * sum(cut) / len(cut):.0f}% on "
            "average (metric truncation_rate): those speeds are the thinking phase's; raise "
            "benchmark.max_tokens to measure whole answers."
        )
    lines += kv_bound_lines(results)  # which configurations the KV pool limited
    if base_ok and recheck is not None and recheck.outcome is Outcome.OK:
        line, drift = drift_line(drift_from or baseline, recheck)  # type: ignore[arg-type]
        lines.append(line)
        metrics["baseline_drift_pct"] = drift
    return lines, metrics


def best_of(
    results: list[TrialResult], exclude: set[str] | None = None, ranking: Ranking = SINGLE_STREAM
) -> TrialResult | None:
    """The best measured trial by the study's ranking, leaving out `exclude` (over a limit)."""
    ranked = [
        r
        for r in results
        if r.outcome is Outcome.OK
        and "tok_s" in r.metrics
        and r.name not in (exclude or ())
        and ranking.value(r) is not None
    ]
    return max(ranked, key=lambda r: ranking.value(r), default=None)  # type: ignore[arg-type,return-value]


def wall_time_line(results: list[TrialResult], total_s: float) -> str:
    """Where the sweep's wall time went: what a trial really costs, restarts included."""
    measured = [r for r in results if r.wall_s is not None]
    ok = [r for r in measured if r.outcome in (Outcome.OK, Outcome.PRUNED)]
    startups = sum(r.startup_wall_s or 0 for r in ok)
    teardowns = sum(r.teardown_s or 0 for r in measured)
    benchmarks = sum((r.wall_s or 0) - (r.startup_wall_s or 0) - (r.teardown_s or 0) for r in ok)
    # A trial the sweep itself stopped did not fail: its time is told apart, and only when any.
    stopped = [r for r in measured if r.outcome is Outcome.INTERRUPTED]
    failed = [r for r in measured if r not in ok and r not in stopped]
    failures = sum((r.wall_s or 0) - (r.teardown_s or 0) for r in failed)
    interrupted = sum((r.wall_s or 0) - (r.teardown_s or 0) for r in stopped)
    other = max(total_s - startups - teardowns - benchmarks - failures - interrupted, 0.0)
    parts = [
        ("server start-ups", startups),
        ("benchmarks", benchmarks),
        ("failed launches", failures),
        *([("the interrupted trial", interrupted)] if stopped else []),
        ("teardown", teardowns),
        ("tracking and other", other),
    ]
    text = ", ".join(
        f"{name} {fmt_duration(s)} ({100 * s / total_s:.0f}%)" for name, s in parts if total_s
    )
    return f"Wall time {fmt_duration(total_s)}: {text}."


@dataclass(frozen=True)
class AgainstBaseline:
    """A trial against the baseline by the ranking's metric: the paired 95% interval of the
    speedup where run r of both sent the same prompts, else the two means' own intervals."""

    speedup: float
    low: float | None  # the paired interval (None: no pairs)
    high: float | None
    faster: bool  # beyond the interval
    slower: bool


def against_baseline(
    best: TrialResult, baseline: TrialResult | None, ranking: Ranking = SINGLE_STREAM
) -> AgainstBaseline | None:
    """None without a baseline value to compare with. The Best and Deploy lines both judge
    by this."""
    tok, base = ranking.value(best), ranking.value(baseline)
    if baseline is None or tok is None or not base:
        return None
    ratio = paired_ratio(ranking.runs(best), ranking.runs(baseline))
    if math.isfinite(ratio.low) and math.isfinite(ratio.high):
        # Run r of both sent the same prompts: the speedup's interval comes from the pairs.
        return AgainstBaseline(tok / base, ratio.low, ratio.high, ratio.low > 1, ratio.high < 1)
    ci, base_ci = ranking.ci95(best), ranking.ci95(baseline)  # no interval (one run)
    ci = float("nan") if ci is None else ci
    base_ci = float("nan") if base_ci is None else base_ci
    faster, slower = tok - ci > base + base_ci, tok + ci < base - base_ci
    return AgainstBaseline(tok / base, None, None, faster, slower)


def best_line(
    best: TrialResult,
    baseline: TrialResult | None,
    ranking: Ranking = SINGLE_STREAM,
    settled: bool = True,
) -> str:
    tok, ci = ranking.value(best), ranking.ci95(best)
    ci = float("nan") if ci is None else ci
    config = labels.config_text(best.effective or best.params)
    line = f"\n[bold]Best:[/bold] {best.name} ({config}): {tok:.1f} ± {ci:.1f} {ranking.unit}"
    versus = against_baseline(best, baseline, ranking)
    if versus is None:
        return line
    base, base_ci = ranking.value(baseline), ranking.ci95(baseline)  # type: ignore[arg-type]
    base_ci = float("nan") if base_ci is None else base_ci
    line += f", {versus.speedup:.2f}× the baseline ({base:.1f} ± {base_ci:.1f})"
    if versus.low is not None and versus.high is not None:
        line += f", 95% interval {ratio_interval(versus.low, versus.high)}"
    if versus.faster:
        line += " — faster beyond the 95% interval"
    elif versus.slower:
        line += " — [red]slower than the baseline[/red]"
        line += ": speculation does not pay here" if settled else ""
    else:
        line += " — the interval includes 1×: not distinguishable from the baseline"
    return line


def ratio_interval(low: float, high: float) -> str:
    """The interval as "1.04–1.15×", three decimals where two would round an end to 1.00."""
    digits = 3 if "1.00" in (f"{low:.2f}", f"{high:.2f}") else 2
    return f"{low:.{digits}f}–{high:.{digits}f}×"


def drift_line(before: TrialResult, after: TrialResult) -> tuple[str, float]:
    """The re-measured baseline against the first: drift when their difference is outside its
    own 95% interval (harness.record.stats.consistent, as sweep.reproduce judges a reproduction)."""
    old, new = before.metrics["tok_s"], after.metrics["tok_s"]
    ci = before.metrics.get("tok_s_ci95", 0.0)
    new_ci = after.metrics.get("tok_s_ci95", 0.0)
    drift = 100 * (new - old) / old
    text = (
        f"Baseline re-measured: {new:.1f} ± {new_ci:.1f} tok/s vs {old:.1f} ± {ci:.1f} at the "
        f"start ({drift:+.1f}%)"
    )
    if not consistent(old, ci, new, new_ci):
        text += (
            ": drift beyond the 95% interval of the difference; conditions changed during the "
            "sweep."
        )
        return f"[yellow]{text}[/]", drift
    return f"{text}: no drift beyond the 95% interval of the difference.", drift


def no_recommendation(moment: str, spent: int | None, search) -> str:
    """What stands where the Deploy line would: an interrupted study (`moment`: when, e.g.
    "during the baseline") or one that measured nothing has no answer yet. `spent`: the server
    starts the study has spent (sweep.study.answer.all_sweeps), None before it was opened."""
    if spent is None:
        return f"No recommendation: interrupted {moment}."
    budget = search.get("budget_gpu_hours")
    if budget is not None:
        of = f"{spent} trial{'s' if spent != 1 else ''} (budget {budget:g} GPU-hours)"
    elif search.get("n_trials_scope", "study") == "sweep":
        of = f"{spent} trial{'s' if spent != 1 else ''} in the study"
    else:
        of = f"{spent} of {search.n_trials} trials"
    if moment:
        return f"No recommendation: interrupted {moment}, after {of}."
    return f"No recommendation: no trial was measured ({of})."
