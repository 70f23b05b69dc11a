"""The closing trials table: every trial of the study, fastest by its objective first."""

from __future__ import annotations

from rich.table import Table

from harness.record import labels
from harness.record.results import Outcome, TrialResult
from sweep.readout.console import OUTCOME_STYLE, fmt_tok_s, simulated_timing_caption
from sweep.readout.ranking import SINGLE_STREAM, Ranking


def summary_table(
    results: list[TrialResult],
    baseline: TrialResult | None,
    simulated: bool,
    notes: dict[str, str] | None = None,  # trial name -> a note (e.g. over a latency limit)
    ranking: Ranking = SINGLE_STREAM,  # the study's objective: the column and the order
    reference: TrialResult | None = None,  # without a baseline: the trial "vs ref" divides by
) -> Table:
    title = "Trials, fastest first" + (
        " — SIMULATED, not a hardware measurement" if simulated else ""
    )
    # Above the table, not its caption: the caption is the request caps'
    # (sweep.study.answer.summary).
    if distorted := simulated_timing_caption([*results, *([baseline] if baseline else [])]):
        title += f"\n[yellow]{distorted}[/]"
    table = Table(title=title, title_justify="left")
    columns = (
        "trial",
        "steps/topk/draft",
        "mem",
        "hicache",
        "outcome",
        ranking.column,
        "accept",
        "vs ref" if baseline is None and reference is not None else "vs base",
        "note",
    )
    for column in columns:
        left = column in ("trial", "outcome", "note")
        table.add_column(column, justify="left" if left else "right", no_wrap=True)
    base = ranking.value(baseline if baseline is not None else reference)

    def order(r: TrialResult) -> float:
        measured = r.outcome in (Outcome.OK, Outcome.PRUNED)
        value = ranking.value(r)
        return (-1.0 if value is None else value) if measured else -2.0

    rows = ([baseline] if baseline else []) + sorted(results, key=order, reverse=True)
    # screening launches whose run a full launch of the same configuration pooled in
    pooled_into = {s["trial"]: r.name for r in results for s in r.screens}
    for r in rows:
        p = r.effective or r.params
        spec = r.params.get("speculative_algorithm") is not None
        measured = r.outcome in (Outcome.OK, Outcome.PRUNED)
        note = ""
        if r.related:
            note = f"as {r.related}" if r.outcome is Outcome.DUPLICATE else f"from {r.related}"
        elif r.name in pooled_into:
            note = f"pooled into {pooled_into[r.name]}"  # its one run, screened
        elif r.outcome is Outcome.PRUNED and not r.screens:
            note = "screened" if "screened" in r.warnings else f"{len(r.runs)} runs"
        if r.screens or r.resolve:  # runs pooled from more than one launch
            runs = len({run.run for run in r.runs})
            note = f"{runs} runs, {1 + len(r.screens) + len(r.resolve)} launches"
        if notes and r.name in notes and r.role != "baseline":
            note = f"[red]infeasible[/red] {notes[r.name]}"
        elif baseline is None and r is reference:
            note = "reference"
        # A rate and its ratio only where the outcome stands behind them (an interrupted trial's
        # partial runs are neither)
        shown = measured or r.outcome is Outcome.DUPLICATE
        cells = [
            "baseline" if r.role == "baseline" else r.name,
            labels.speculation(p) if spec else "off",
            f"{p.get('mem_fraction_static')}",
            str(p.get("hicache_size", 0)),
            f"[{OUTCOME_STYLE.get(r.outcome, 'white')}]{r.outcome}[/]",
            fmt_tok_s(r, ranking) if shown else "-",
            f"{r.metrics['accept_len']:.2f}" if shown and "accept_len" in r.metrics else "-",
            f"{ranking.value(r) / base:.2f}×"  # type: ignore[operator]
            if shown and base and ranking.value(r) is not None
            else "-",
            note,
        ]
        table.add_row(*cells, style="bold" if r is baseline else None)
    return table
