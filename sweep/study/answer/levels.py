"""The recommendation per level: what to deploy at each concurrency the trials measured.

At each level C of benchmark.concurrency, the measured trials (outcome ok) that meet the latency
limits at C (search.slo; a limit set at another level does not apply here) are ranked by the
level's metric: per-user decode tok/s at C = 1, output tok/s (what the server delivers) above,
and per-user decode tok/s at every level when the study optimises per-user speed. The best one
is recommended only if it beats the baseline beyond noise: the lower end of its paired 95%
speedup interval (run r of both sent the same prompts, harness.record.stats.paired_ratio) above 1,
or, without pairs, its lower bound above the baseline's upper bound. Otherwise the answer at C is
"speculation off": no configuration beat the baseline's interval there.

Above SGLang's running-request cap with speculation (48, harness.sglang.speculative) the study's
baseline runs that cap too by default (search.baseline_equal_caps), which no deployment without
speculation does: SGLang sizes its limit from the KV pool. So where a study also measured the
baseline at SGLang's own limit (`uncapped`: sweep.study.loop.baseline, only when a level is above
the cap), a level above the equal cap is answered against it, the deployment's question ("is
speculation worth turning on here?"), and the equal-cap comparison (the same queueing on both
sides: "is a verify step faster than a decode step at the same batch?") stands beside it
(`LevelRow.equal_caps`). At levels within the cap both are the same server and one is shown.

`per_level(...)` gives the rows; `as_dict` is what the summary JSON, MLflow's parent run
(levels.json + one metric per level) and the report's speedup-vs-concurrency figure read.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.table import Table

from harness.record import labels
from harness.record.results import Outcome, RunSummary, TrialResult
from harness.record.stats import paired_ratio, summarize
from sweep.study.trial.objective import Objective

OFF = "speculation off"


@dataclass
class Pick:
    trial: str
    config: str  # labels.config_text
    short: str  # "3/1/4 mem 0.85" (steps/topk/draft; hicache when on) for the console
    params: dict[str, Any]
    value: float
    ci95: float | None
    speedup: float | None = None
    low: float | None = None  # the paired 95% speedup interval (None: not bounded)
    high: float | None = None


@dataclass
class LevelRow:
    concurrency: int
    metric: str  # RunSummary field ranked at this level
    baseline: float | None
    baseline_ci95: float | None
    best: Pick | None  # the fastest feasible measured trial (whether or not it beats the baseline)
    recommend: str  # the trial to deploy, or OFF
    reason: str
    excluded: list[str] = field(default_factory=list)  # over a latency limit at this level
    baseline_violates: list[str] = field(default_factory=list)
    # Which baseline `baseline` and the speedups are against: "equal_caps" (the study's, with the
    # trials' max_running_requests) or "uncapped" (SGLang's own limit, what a deployment runs).
    baseline_kind: str = "equal_caps"
    equal_caps: EqualCaps | None = None  # beside an uncapped answer: the equal-cap comparison


@dataclass
class EqualCaps:
    """The equal-cap comparison at a level answered against the uncapped baseline."""

    cap: int | None
    baseline: float | None
    baseline_ci95: float | None
    speedup: float | None
    low: float | None
    high: float | None
    recommend: str


def level_metric(objective: Objective | None, concurrency: int) -> str:
    speed = objective is not None and objective.name in ("weighted_speed", "per_level_speed")
    return "decode_tok_s" if concurrency == 1 or speed else "output_tok_s"


def runs_at(runs: list[RunSummary], concurrency: int, metric: str) -> dict[int, float]:
    """Run number -> the metric, complete runs at this level only."""
    return {
        r.run: getattr(r, metric)
        for r in runs
        if r.concurrency == concurrency and not r.incomplete and getattr(r, metric) is not None
    }


def stat(runs: dict[int, float]) -> tuple[float, float | None] | None:
    if not runs:
        return None
    s = summarize(list(runs.values()))
    return s.mean, s.ci95 if math.isfinite(s.ci95) else None


def violations_at(objective: Objective | None, result: TrialResult, level: int) -> list[str]:
    if objective is None or not objective.slo:
        return []
    if objective.slo_level is not None and objective.slo_level != level:
        return []
    suffix = f" @ {level}"
    return [v for v in objective.violations(result) if v.endswith(suffix)]


def levels_of(results: list[TrialResult], baseline: TrialResult | None) -> list[int]:
    found = {r.concurrency for t in [*results, baseline] if t is not None for r in t.runs}
    return sorted(found)


def per_level(
    results: list[TrialResult],
    baseline: TrialResult | None,
    objective: Objective | None,
    uncapped: TrialResult | None = None,
    cap: int | None = None,
) -> list[LevelRow]:
    """One row per level against `baseline`; with `uncapped` (the baseline at SGLang's own
    running-request limit) and the equal `cap`, a level above the cap is answered against
    `uncapped`, the equal-cap comparison beside it."""
    rows = _rows(results, baseline, objective)
    if uncapped is None or uncapped.outcome is not Outcome.OK or cap is None:
        return rows
    deployed = {r.concurrency: r for r in _rows(results, uncapped, objective)}
    out = []
    for row in rows:
        other = deployed.get(row.concurrency)
        if row.concurrency <= cap or other is None or other.baseline is None:
            out.append(row)
            continue
        other.baseline_kind = "uncapped"
        best = row.best
        other.equal_caps = EqualCaps(
            cap=cap,
            baseline=row.baseline,
            baseline_ci95=row.baseline_ci95,
            speedup=best.speedup if best else None,
            low=best.low if best else None,
            high=best.high if best else None,
            recommend=row.recommend,
        )
        out.append(other)
    return out


def _rows(
    results: list[TrialResult], baseline: TrialResult | None, objective: Objective | None
) -> list[LevelRow]:
    measured = [r for r in results if r.outcome is Outcome.OK and r.role != "baseline"]
    base_ok = baseline is not None and baseline.outcome is Outcome.OK
    rows = []
    for level in levels_of(measured, baseline if base_ok else None):
        metric = level_metric(objective, level)
        base_runs = runs_at(baseline.runs, level, metric) if base_ok else {}  # type: ignore[union-attr]
        base = stat(base_runs)
        excluded, ranked = [], []
        for r in measured:
            found = stat(runs_at(r.runs, level, metric))
            if found is None:
                continue
            if violations_at(objective, r, level):
                excluded.append(r.name)
                continue
            ranked.append((found, r))
        ranked.sort(key=lambda item: item[0][0], reverse=True)
        best = None
        if ranked:
            (value, ci), top = ranked[0]
            p = top.effective or top.params
            config = labels.config_text(p)
            hicache = p.get("hicache_size") or 0
            short = f"{labels.speculation(p)} mem {p.get('mem_fraction_static')}" + (
                f" hicache {hicache}" if hicache else ""
            )
            best = Pick(top.name, config, short, dict(top.params), value, ci)
            if base is not None:
                ratio = paired_ratio(runs_at(top.runs, level, metric), base_runs)
                best.speedup = value / base[0]
                if math.isfinite(ratio.low) and math.isfinite(ratio.high):
                    best.low, best.high = ratio.low, ratio.high
        recommend, reason = verdict(best, base)
        rows.append(
            LevelRow(
                concurrency=level,
                metric=metric,
                baseline=base[0] if base else None,
                baseline_ci95=base[1] if base else None,
                best=best,
                recommend=recommend,
                reason=reason,
                excluded=sorted(excluded),
                baseline_violates=violations_at(objective, baseline, level) if base_ok else [],  # type: ignore[arg-type]
            )
        )
    return rows


def verdict(best: Pick | None, base: tuple[float, float | None] | None) -> tuple[str, str]:
    if best is None:
        return OFF, "no configuration was measured here within the limits"
    if base is None:
        return best.trial, "no baseline measured at this level: the fastest, not a comparison"
    if best.low is not None:
        if best.low > 1:
            return best.trial, "its paired 95% interval is above 1x"
        return OFF, "no configuration beats the baseline: the best one's interval reaches 1x"
    base_high = base[0] + (base[1] if base[1] is not None else math.inf)
    low = best.value - (best.ci95 if best.ci95 is not None else math.inf)
    if low > base_high:
        return best.trial, "its lower bound is above the baseline's upper bound (unpaired)"
    return OFF, "no configuration beats the baseline beyond the runs' intervals"


def as_dict(rows: list[LevelRow]) -> list[dict[str, Any]]:
    return [asdict(r) for r in rows]


def metrics(rows: list[LevelRow]) -> dict[str, float]:
    """The parent run's per-level numbers: best_speedup_c{C} (+ _ci95_low/_high), speculate_c{C}
    (1 on, 0 off), best_{metric}_c{C}."""
    out: dict[str, float] = {}
    for row in rows:
        c = row.concurrency
        out[f"speculate_c{c}"] = 0.0 if row.recommend == OFF else 1.0
        if row.best is None:
            continue
        out[f"best_{row.metric}_c{c}"] = row.best.value
        if row.best.speedup is not None:
            out[f"best_speedup_c{c}"] = row.best.speedup
        if row.best.low is not None and row.best.high is not None:
            out[f"best_speedup_c{c}_ci95_low"] = row.best.low
            out[f"best_speedup_c{c}_ci95_high"] = row.best.high
        if row.equal_caps is not None and row.equal_caps.speedup is not None:
            out[f"best_speedup_equal_caps_c{c}"] = row.equal_caps.speedup
    return out


def fmt_value(value: float | None, ci: float | None) -> str:
    if value is None:
        return "-"
    digits = 0 if value >= 1000 else 1
    return f"{value:.{digits}f} ± {ci:.{digits}f}" if ci is not None else f"{value:.{digits}f}"


def fmt_speedup(pick: Pick | None) -> str:
    if pick is None or pick.speedup is None:
        return "-"
    if pick.low is None or pick.high is None:
        return f"{pick.speedup:.2f}×"
    return f"{pick.speedup:.2f}× [{pick.low:.2f}, {pick.high:.2f}]"


def table(
    rows: list[LevelRow], simulated: bool, slo: str = "", equal_cap: int | None = None
) -> Table:
    """The per-level answer on the console: one row per concurrency. `equal_cap`: the request
    cap the baseline shared with the trials (sweep.study.answer.equal_caps), said where a
    level is above it."""
    title = "Recommendation per level" + (" — SIMULATED" if simulated else "")
    metric = {r.metric for r in rows if r.concurrency > 1}
    notes = ["tok/s: per-user decode at 1, " + ("per-user" if metric == {"decode_tok_s"} else
             "output (the server's)") + " above; speedup: paired 95% interval"]  # fmt: skip
    notes += [f"limits: {slo}"] if slo else []
    above = [
        r.concurrency
        for r in rows
        if equal_cap and r.concurrency > equal_cap and r.baseline_kind == "equal_caps"
    ]
    uncapped = [r for r in rows if r.baseline_kind == "uncapped"]
    if uncapped:
        where = ", ".join(str(r.concurrency) for r in uncapped)
        cap = uncapped[0].equal_caps.cap if uncapped[0].equal_caps else None
        notes.append(
            f"at {where}: against the baseline at SGLang's own running-request limit (what a "
            f"deployment without speculation runs); 'equal caps': against the baseline capped "
            f"at {cap} like the speculative server (the same queueing on both sides)"
        )
    if above:
        notes.append(
            f"at {', '.join(map(str, above))}: both servers ran {equal_cap} and queued the rest "
            "(SGLang's cap with speculation, given to the baseline: search.baseline_equal_caps); "
            "without speculation SGLang would run them all (search.baseline_equal_caps=false "
            "measures that baseline; server.max_running_requests raises both)"
        )
    for row in rows:
        if row.excluded:
            notes.append(f"over the limits at {row.concurrency}: {', '.join(row.excluded)}")
        if row.baseline_violates:
            notes.append(f"the baseline is over the limits at {row.concurrency} too")
    t = Table(title=title, title_justify="left", caption="\n".join(notes) or None)
    t.caption_justify = "left"
    best_column = "best (steps/topk/draft)"
    columns = ("C", "baseline", best_column, "tok/s ±95%", "speedup [95%]", "deploy")
    if uncapped:
        columns = (*columns, "equal caps")
    for column in columns:
        left = column in (best_column, "deploy")
        t.add_column(column, justify="left" if left else "right", no_wrap=True, min_width=2)
    for row in rows:
        best = row.best
        off = row.recommend == OFF
        cells = [
            str(row.concurrency),
            fmt_value(row.baseline, row.baseline_ci95),
            f"{best.trial} {best.short}" if best else "-",
            fmt_value(best.value, best.ci95) if best else "-",
            fmt_speedup(best),
            f"[yellow]{OFF}[/yellow]" if off else f"[green]{row.recommend}[/green]",
        ]
        if uncapped:
            cells.append(fmt_equal_caps(row.equal_caps))
        t.add_row(*cells)
    return t


def fmt_equal_caps(equal: EqualCaps | None) -> str:
    """'1.12× [1.05, 1.19] vs 1450' beside an uncapped answer; '-' where the two are one."""
    if equal is None or equal.speedup is None:
        return "-"
    interval = f" [{equal.low:.2f}, {equal.high:.2f}]" if equal.low is not None else ""
    return f"{equal.speedup:.2f}×{interval} vs {fmt_value(equal.baseline, None)}"
