"""What the user sees: progress per trial (i/N, ETA, live tok/s) and the closing summary."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.table import Table

from harness.results import Outcome, RunSummary, TrialResult
from sweep.config import TrialSpec

console = Console(highlight=False)
if not console.is_terminal:
    # Logs and CI get a readable table instead of rich's 80-column default.
    console.width = max(console.width, 120)

_OUTCOME_STYLE = {
    Outcome.OK: "green",
    Outcome.OOM: "red",
    Outcome.CRASH: "red",
    Outcome.TIMEOUT: "yellow",
    Outcome.INVALID: "yellow",
    Outcome.ERROR: "red",
    Outcome.INTERRUPTED: "yellow",
}


def fmt_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def fmt_tok_s(result: TrialResult) -> str:
    tok_s = result.metrics.get("tok_s")
    if tok_s is None:
        return "-"
    ci = result.metrics.get("tok_s_ci95")
    return f"{tok_s:.1f} ± {ci:.1f}" if ci is not None and math.isfinite(ci) else f"{tok_s:.1f}"


class ConsoleReporter:
    """Per-trial progress lines; also the Reporter that `sweep.trial.run_trial` calls."""

    def __init__(self, simulated: bool):
        self.clock_label = "simulated s" if simulated else "s"

    def trial_header(
        self, index: int, total: int, name: str, description: str, eta_s: float | None
    ):
        eta = f"  [dim]ETA {fmt_duration(eta_s)}[/dim]" if eta_s is not None else ""
        console.print(f"[bold][{index}/{total}][/bold] {name}  {description}{eta}")

    def server_starting(self, spec: TrialSpec) -> None:
        console.print(f"    starting {spec.engine.name} server on port {spec.server.port} ...")

    def server_ready(self, startup_s: float, effective: dict[str, Any]) -> None:
        keys = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
        spec = "/".join(str(effective.get(k)) for k in keys) if effective.get(keys[0]) else "off"
        kv = effective.get("max_total_num_tokens")
        kv_text = f", KV pool {kv:,} tokens" if isinstance(kv, int) else ""
        console.print(
            f"    ready in {startup_s:.0f} {self.clock_label}; effective speculation "
            f"(steps/topk/draft) {spec}{kv_text}"
        )

    def run_done(self, summary: RunSummary, total_runs: int) -> None:
        tok_s = f"{summary.decode_tok_s:.1f} tok/s" if summary.decode_tok_s else "no tokens"
        accept = f", accept len {summary.accept_len:.2f}" if summary.accept_len else ""
        errors = f", [red]{summary.errors} failed[/red]" if summary.errors else ""
        level = f" @ concurrency {summary.concurrency}" if summary.concurrency != 1 else ""
        console.print(f"    run {summary.run}/{total_runs}{level}: {tok_s}{accept}{errors}")

    def trial_done(self, result: TrialResult, baseline_tok_s: float | None) -> None:
        style = _OUTCOME_STYLE.get(result.outcome, "white")
        line = f"    → [{style}]{result.outcome}[/{style}]"
        if result.outcome is Outcome.OK:
            line += f"  {fmt_tok_s(result)} tok/s"
            if "accept_len" in result.metrics:
                line += f", accept len {result.metrics['accept_len']:.2f}"
            if baseline_tok_s:
                line += f", {result.metrics['tok_s'] / baseline_tok_s:.2f}× baseline"
        elif result.error:
            line += f"  {result.error.splitlines()[0]}"
        if result.wall_s is not None:
            line += f"  [dim]({fmt_duration(result.wall_s)})[/dim]"
        console.print(line)


def summary_table(
    results: list[TrialResult], baseline: TrialResult | None, simulated: bool
) -> Table:
    title = "Trials, fastest first" + (
        " — SIMULATED, not a hardware measurement" if simulated else ""
    )
    table = Table(title=title, title_justify="left")
    for column in (
        "trial",
        "steps",
        "topk",
        "draft",
        "mem",
        "hicache",
        "outcome",
        "tok/s (95% CI)",
        "accept",
        "vs base",
    ):
        table.add_column(column, justify="right" if column not in ("trial", "outcome") else "left")
    base = baseline.metrics.get("tok_s") if baseline else None
    rows = ([baseline] if baseline else []) + sorted(
        results,
        key=lambda r: r.metrics.get("tok_s", -1.0) if r.outcome is Outcome.OK else -2.0,
        reverse=True,
    )
    for r in rows:
        p = r.effective or r.params
        spec = r.params.get("speculative_algorithm") is not None
        cells = [
            r.name,
            *(
                str(p.get(k, "-")) if spec else "-"
                for k in (
                    "speculative_num_steps",
                    "speculative_eagle_topk",
                    "speculative_num_draft_tokens",
                )
            ),
            f"{p.get('mem_fraction_static')}",
            str(p.get("hicache_size", 0)),
            f"[{_OUTCOME_STYLE.get(r.outcome, 'white')}]{r.outcome}[/]",
            fmt_tok_s(r),
            f"{r.metrics['accept_len']:.2f}" if "accept_len" in r.metrics else "-",
            f"{r.metrics['tok_s'] / base:.2f}×" if base and "tok_s" in r.metrics else "-",
        ]
        table.add_row(*cells, style="bold" if r is baseline else None)
    return table
