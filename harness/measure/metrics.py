"""Pure measurement arithmetic: a run's numbers from its request timelines, the trial's from runs.

Every time here is on the server's clock (`harness.measure.clock`). A request's timeline
(`harness.measure.timeline`) is the list of (arrival time, cumulative tokens) of its stream chunks,
so rates can be computed for exactly the tokens that arrived inside a window: counting completions
instead (the seeds' 1190 tok/s against a real ~600) credits a window with tokens generated before
it. A run's latencies are percentiles (`PERCENTILES`) of its requests'; the trial's metrics
(`aggregate_metrics`) are means and 95% intervals over its complete runs per level.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from harness.measure.steady import CUT
from harness.measure.timeline import Timeline
from harness.record.results import RequestRecord, RunSummary
from harness.record.stats import summarize

PERCENTILES = (50, 90, 99)


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    k = (len(ordered) - 1) * p / 100
    low, high = math.floor(k), math.ceil(k)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


def percentiles(values: Sequence[float]) -> dict[str, float]:
    return {f"p{p}": percentile(values, p) for p in PERCENTILES} if values else {}


def tokens_in_window(timelines: Sequence[Timeline], start: float, end: float) -> int:
    """Tokens that arrived in (start, end]: what the window really produced."""
    total = 0
    for line in timelines:
        before = 0
        for t, cumulative in line.points:
            if t <= start:
                before = cumulative
            elif t <= end:
                total += cumulative - before
                before = cumulative
    return total


def naive_window_rate(records: Sequence[RequestRecord], start: float, end: float) -> float:
    """The pitfall, for comparison: completions in the window x their mean length / window."""
    done = [r for r in records if r.ok and r.end_s is not None and start < r.end_s <= end]
    if not done or end <= start:
        return 0.0
    mean_tokens = sum(r.completion_tokens or 0 for r in done) / len(done)
    return len(done) * mean_tokens / (end - start)


def inter_token_latencies(
    timelines: Sequence[Timeline], window: tuple[float, float] | None = None
) -> list[float]:
    """Gaps between chunks, split evenly over the tokens a chunk carries (as bench_serving); with
    a window, only the gaps whose later chunk arrived inside it."""
    gaps = []
    for line in timelines:
        for (t0, n0), (t1, n1) in zip(line.points, line.points[1:], strict=False):
            new = n1 - n0
            if new > 0 and (window is None or window[0] < t1 <= window[1]):
                gaps += [(t1 - t0) / new] * new
    return gaps


def summarize_run(
    run: int,
    concurrency: int,
    timelines: Sequence[Timeline],
    window: tuple[float, float],
    accept_len: float | None,
    accept_source: str | None,
    steady: bool = False,
) -> RunSummary:
    """A run's numbers. `steady` (C > 1, `harness.measure.steady`): every number is of what happened
    inside the window: tokens that arrived in it (cut requests' included), first tokens and
    chunk gaps that arrived in it, and decode/TPOT of the requests that completed in it."""
    start, end = window
    cut = [t for t in timelines if t.record.error == CUT]
    records = [t.record for t in timelines if t.record.error != CUT]
    ok = [r for r in records if r.ok]
    in_window = [r for r in ok if start < r.end_s <= end] if steady else ok  # type: ignore[operator]
    decode = [(r.completion_tokens - 1, r.decode_seconds()) for r in in_window]  # type: ignore[operator]
    decode = [(t, s) for t, s in decode if s and s > 0 and t > 0]
    e2e = [(r.completion_tokens, r.end_s - r.start_s) for r in in_window]  # type: ignore[operator]
    firsts = ok + [t.record for t in cut] if steady else ok
    ttfts = [
        r.first_token_s - r.start_s
        for r in firsts
        if r.first_token_s is not None and (not steady or start < r.first_token_s <= end)
    ]
    counted = [t for t in timelines if t.record.ok or t.record.error == CUT]
    produced = tokens_in_window(counted, start, end)
    return RunSummary(
        run=run,
        concurrency=concurrency,
        requests=len(records),
        errors=len(records) - len(ok),
        output_tokens=sum(r.completion_tokens or 0 for r in ok),
        # Token-weighted: total decode tokens over total decode time, as a user's stopwatch would.
        decode_tok_s=sum(t for t, _ in decode) / sum(s for _, s in decode) if decode else None,
        e2e_tok_s=sum(t for t, _ in e2e) / sum(s for _, s in e2e) if e2e else None,
        output_tok_s=produced / (end - start) if ok and end > start else None,
        ttft_s=sum(ttfts) / len(ttfts) if ttfts else None,
        accept_len=accept_len,
        accept_len_source=accept_source,
        truncated=sum(1 for r in ok if r.finish_reason == "length" and r.reasoning_ended is False),
        ttft_p=percentiles(ttfts),
        itl_p=percentiles(inter_token_latencies(counted, (start, end) if steady else None)),
        tpot_p=percentiles([s / t for t, s in decode]),
        window=[start, end] if steady and end > start else None,
        window_completions=len(in_window) if steady else None,
        cut=len(cut),
    )


def aggregate_metrics(runs: Sequence[RunSummary], objective_concurrency: int) -> dict[str, float]:
    """Flat metric dict: objective-level names (`tok_s`, ...) plus one set per level. Incomplete
    runs (a stalled request) are counted in `incomplete_runs` and left out of everything else."""
    metrics: dict[str, float] = {}
    if any(r.incomplete for r in runs):
        metrics["incomplete_runs"] = float(sum(r.incomplete for r in runs))
        runs = [r for r in runs if not r.incomplete]
    for concurrency in sorted({r.concurrency for r in runs}):
        level = [r for r in runs if r.concurrency == concurrency]
        suffix = f"_c{concurrency}"
        for name in ("decode_tok_s", "e2e_tok_s", "output_tok_s", "accept_len"):
            values = [getattr(r, name) for r in level if getattr(r, name) is not None]
            if values:
                stat = summarize(values)
                metrics[name + suffix] = stat.mean
                if name in ("decode_tok_s", "output_tok_s") and math.isfinite(stat.ci95):
                    metrics[name + suffix + "_ci95"] = stat.ci95
        requests = sum(r.requests for r in level)
        ok = requests - sum(r.errors for r in level)
        metrics["error_rate" + suffix] = (requests - ok) / requests if requests else 0.0
        metrics["truncation_rate" + suffix] = sum(r.truncated for r in level) / ok if ok else 0.0
        ttfts = [r.ttft_s for r in level if r.ttft_s is not None]
        if ttfts:
            metrics["ttft_ms" + suffix] = 1000 * sum(ttfts) / len(ttfts)
        for kind in ("ttft", "itl", "tpot"):
            for p in PERCENTILES:
                values = [getattr(r, f"{kind}_p").get(f"p{p}") for r in level]
                values = [v for v in values if v is not None and math.isfinite(v)]
                if values:  # the median over runs of each run's percentile
                    metrics[f"{kind}_ms_p{p}{suffix}"] = 1000 * percentile(values, 50)

    level = [r for r in runs if r.concurrency == objective_concurrency]
    values = [r.decode_tok_s for r in level if r.decode_tok_s is not None]
    if values:
        stat = summarize(values)
        metrics["tok_s"] = stat.mean
        metrics["tok_s_runs"] = float(stat.n)
        if stat.n > 1:
            metrics["tok_s_ci95"] = stat.ci95
            metrics["tok_s_std"] = stat.std
            metrics["tok_s_cv"] = stat.cv
    suffix = f"_c{objective_concurrency}"
    for key in ("accept_len", "e2e_tok_s", "truncation_rate", "error_rate"):
        if key + suffix in metrics:
            metrics[key] = metrics[key + suffix]
    return metrics
