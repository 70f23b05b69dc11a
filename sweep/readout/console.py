"""What the user sees of the trials: the console everything prints to, progress per trial (i/N,
ETA, live tok/s; the Reporter run_trial calls) and the closing trials table, which share how an
outcome and a speed are shown."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.record import labels
from harness.record.results import Outcome, RequestRecord, RunSummary, TrialResult
from harness.server.startup import LAUNCHING, READY, StartupTracker
from harness.spec import TrialSpec
from sweep.readout.memory_lines import memory_line
from sweep.readout.ranking import SINGLE_STREAM, Ranking

console = Console(highlight=False)
TRUNCATION_WARNING = 0.25  # share of outputs cut while reasoning that earns a console warning
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
    Outcome.DUPLICATE: "cyan",
    Outcome.PREDICTED_OOM: "magenta",
    Outcome.KNOWN_CRASH: "magenta",
    Outcome.PRUNED: "yellow",
}


def simulated_timing_line(result: TrialResult) -> str | None:
    """What a simulated trial's timings are worth when the host, not the model, set them:
    `simulator_behind` (the engine trailed its clock, harness.measure.sim_timing) or
    `host_overloaded` (the load average above the cores while it ran); None otherwise."""
    m = result.metrics
    load = m.get("host_load_1m")
    cores = int(m.get("host_cores", 0))
    host = f"host load {load:.1f} on {cores} cores" if load is not None else "host load unread"
    behind = 100 * m.get("sim_behind_share", 0.0)
    if "simulator_behind" in result.warnings:
        return (
            f"SIMULATED timing distorted: the simulator trailed its clock by {behind:.0f}% "
            f"({host}); its rates are partly the host's CPU, not the configuration's. Lower "
            'engine.clock_scale or use a quieter host (docs/simulator.md, "Falling behind the '
            'clock").'
        )
    if "host_overloaded" in result.warnings:
        return (
            f"SIMULATED timing may be distorted: {host} while it ran (the simulator kept its "
            f"clock within {behind:.1f}%, but the benchmark client shares those cores). Use a "
            'quieter host (docs/simulator.md, "Falling behind the clock").'
        )
    return None


def simulated_timing_caption(results: list[TrialResult]) -> str | None:
    """Over the closing table: how many trials' SIMULATED timings the host distorted (the
    per-trial lines scroll away in a long sweep); None when none did."""
    results = [r for r in results if r.outcome is not Outcome.DUPLICATE]  # a copy, not a run
    hit = [r for r in results if {"simulator_behind", "host_overloaded"} & set(r.warnings)]
    if not hit:
        return None
    worst = max(100 * r.metrics.get("sim_behind_share", 0.0) for r in hit)
    load = max(r.metrics.get("host_load_1m", 0.0) for r in hit)
    cores = int(max(r.metrics.get("host_cores", 0.0) for r in hit))
    return escape(
        f"SIMULATED timing distorted in {len(hit)} of {len(results)} trials: the simulator "
        f"trailed its clock by up to {worst:.0f}% (host load up to {load:.1f} on {cores} cores); "
        "their rates are partly the host's CPU, not their configuration's (docs/simulator.md)."
    )


def fmt_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def fmt_tok_s(result: TrialResult, ranking: Ranking = SINGLE_STREAM) -> str:
    tok_s = ranking.value(result)
    if tok_s is None:
        return "-"
    ci = ranking.ci95(result)
    return f"{tok_s:.1f} ± {ci:.1f}" if ci is not None and math.isfinite(ci) else f"{tok_s:.1f}"


Start = tuple[list[dict[str, Any]], float | None]  # a start's marks and its ready wall seconds


def expected_startup(starts: Iterable[Start]) -> dict[str, float]:
    """When each start-up phase usually begins, and (READY) when the server is usually ready:
    the median over earlier starts that got ready, each a (startup_marks, startup_wall_s) pair
    (wall seconds from launch, as `TrialResult` records them)."""
    begins: dict[str, list[float]] = {}
    for marks, ready_s in starts:
        if ready_s is None:
            continue
        for mark in marks:
            if mark.get("phase") != READY:
                begins.setdefault(str(mark.get("phase")), []).append(float(mark["at_s"]))
        begins.setdefault(READY, []).append(float(ready_s))
    return {phase: statistics.median(values) for phase, values in begins.items()}


class ConsoleReporter:
    """Per-trial progress lines; also the Reporter that `harness.trial.run_trial` calls."""

    def __init__(
        self,
        simulated: bool,
        prefix: str | None = None,
        ranking: Ranking = SINGLE_STREAM,
        expected_startup: dict[str, float] | None = None,  # phase -> usual begin (wall s)
    ):
        self.expected_startup = expected_startup or {}
        self._shown = 0  # start-up marks printed
        self.clock_label = "simulated s" if simulated else "s"
        self.ranking = ranking  # what the trial line leads with (the study's objective)
        # Trials side by side (GPU slots) interleave their lines: each line names its trial.
        self.indent = f"    {prefix}: " if prefix else "    "
        self.parallel = prefix is not None

    def trial_header(self, label: str, name: str, description: str, eta_s: float | None = None):
        eta = f"  [dim]ETA {fmt_duration(eta_s)}[/dim]" if eta_s is not None else ""
        title = f"{label}] {name}" if name else f"{label}]"
        console.print(f"[bold]\\[{title}[/bold]  {description}{eta}")

    def server_starting(self, spec: TrialSpec) -> None:
        gpus = dict(spec.server.env).get("CUDA_VISIBLE_DEVICES")
        on = f"GPU {gpus}, " if gpus is not None else ""
        console.print(
            f"{self.indent}starting {spec.engine.name} server on {on}port {spec.server.port} ..."
        )

    def server_phase(self, startup: StartupTracker) -> None:
        """A line per start-up phase (every phase begun since the last call, so none is missed
        between two polls), with the wall time since launch it began at and, from the study's
        earlier starts, when it usually began and when the server was usually ready; on a
        terminal the phase's progress (weights %, graph batch sizes) redraws in place below."""
        marks = startup.marks[self._shown :]
        self._shown = len(startup.marks)
        ready = self.expected_startup.get(READY)
        for mark in marks:
            if mark.phase in (LAUNCHING, READY):
                continue  # "starting ..." and "ready in ..." say those
            usual = self.expected_startup.get(mark.phase)
            expected = [f"usually {fmt_duration(usual)}"] if usual is not None else []
            if ready is not None:
                expected.append(f"ready ~{fmt_duration(ready)}")
            note = f" ({'; '.join(expected)})" if expected else ""
            console.print(
                f"{self.indent}start-up: {mark.phase}  [dim]at {fmt_duration(mark.at_s)} wall"
                f"{note}[/dim]"
            )
        if not marks and console.is_terminal and not self.parallel and startup.progress:
            elapsed = fmt_duration(startup.elapsed_s())
            console.print(f"    start-up: {startup.describe()}  {elapsed}", end="\r")

    def server_ready(self, startup_s: float, effective: dict[str, Any]) -> None:
        on = effective.get(labels.STEPS)
        spec = labels.speculation(effective, missing=None) if on else "off"
        kv = effective.get("max_total_num_tokens")
        kv_text = f", KV pool {kv:,} tokens" if isinstance(kv, int) else ""
        console.print(
            f"{self.indent}ready in {startup_s:.0f} {self.clock_label}; effective speculation "
            f"(steps/topk/draft) {spec}{kv_text}"
        )

    def request_done(self, record: RequestRecord, done: int, total: int, tokens: int) -> None:
        """A live line while a run's requests finish (terminals only: CI logs stay quiet)."""
        if not console.is_terminal or self.parallel:  # a \r line cannot be shared
            return
        decode = record.decode_seconds()
        rate = ""
        if decode and record.completion_tokens:
            rate = f", last request {(record.completion_tokens - 1) / decode:.1f} tok/s"
        console.print(
            f"    run {record.run}: {done}/{total} requests"
            f" @ concurrency {record.concurrency}{rate}",
            end="\r",
        )

    def run_done(self, summary: RunSummary, total_runs: int) -> None:
        tok_s = f"{summary.decode_tok_s:.1f} tok/s" if summary.decode_tok_s else "no tokens"
        if summary.concurrency > 1 and summary.output_tok_s and summary.decode_tok_s:
            tok_s = f"{summary.output_tok_s:.1f} tok/s output, {summary.decode_tok_s:.1f} per user"
        accept = f", accept len {summary.accept_len:.2f}" if summary.accept_len else ""
        errors = f", [red]{summary.errors} failed[/red]" if summary.errors else ""
        if summary.incomplete:
            errors += " [yellow](incomplete: a request stalled; left out, run repeated)[/yellow]"
        level = f" @ concurrency {summary.concurrency}" if summary.concurrency != 1 else ""
        console.print(
            f"{self.indent}run {summary.run}/{total_runs}{level}: {tok_s}{accept}{errors}"
        )

    def trial_done(self, result: TrialResult, baseline: TrialResult | None) -> None:
        style = _OUTCOME_STYLE.get(result.outcome, "white")
        line = f"{self.indent}→ [{style}]{result.outcome}[/{style}]"
        ranking = self.ranking if self.ranking.value(result) is not None else SINGLE_STREAM
        ok_base = baseline if baseline is not None and baseline.outcome is Outcome.OK else None
        value, base = ranking.value(result), ranking.value(ok_base)
        if result.outcome in (Outcome.OK, Outcome.PRUNED) and value is not None:
            line += f"  {fmt_tok_s(result, ranking)} {ranking.unit}"
            if ranking != SINGLE_STREAM and "tok_s" in result.metrics:
                line += f" ({result.metrics['tok_s']:.1f} tok/s per user)"
            if "accept_len" in result.metrics:
                line += f", accept len {result.metrics['accept_len']:.2f}"
            if base:
                line += f", {value / base:.2f}× baseline"
            if result.outcome is Outcome.PRUNED and "screened" in result.warnings:
                line += "; screened with one run for the model, never an answer"
            elif result.outcome is Outcome.PRUNED:
                line += f"; stopped after {len(result.runs)} runs, it cannot beat the best"
        elif result.error:
            line += f"  {result.error.splitlines()[0]}"
        if result.wall_s is not None:
            line += f"  [dim]({fmt_duration(result.wall_s)})[/dim]"
        console.print(line)
        if (memory := memory_line(result)) is not None:  # the KV pool at a level above 1
            console.print(f"{self.indent}{memory}", soft_wrap=True)
        if (timing := simulated_timing_line(result)) is not None:
            console.print(f"{self.indent}[yellow]warning:[/] {escape(timing)}", soft_wrap=True)
        truncated = result.metrics.get("truncation_rate", 0.0)
        if truncated > TRUNCATION_WARNING:
            console.print(
                f"{self.indent}[yellow]warning:[/] {100 * truncated:.0f}% of the outputs were cut "
                "at max_tokens before the reasoning ended; the speed then describes the thinking "
                "phase only. Raise benchmark.max_tokens to measure whole answers.",
                soft_wrap=True,
            )
        if "stalled_requests" in result.warnings:
            console.print(
                f"    [yellow]warning:[/] {int(result.metrics.get('incomplete_runs', 0))} run(s) "
                "had a request that stalled past its deadline (benchmark.request_timeout_s); "
                "they are recorded as incomplete and left out of the means.",
                soft_wrap=True,
            )
        if "aborted_requests" in result.warnings:
            console.print(
                "    [yellow]warning:[/] the server aborted a request mid-stream (its error is in "
                "requests.jsonl); the run is recorded as incomplete, left out of the means and "
                "repeated.",
                soft_wrap=True,
            )
        if "flush_failed" in result.warnings:
            failed = sum(r.flushed is False for r in result.runs)
            console.print(
                f"    [yellow]warning:[/] /flush_cache was refused before {failed} run(s) after "
                "every retry: those runs may reuse earlier runs' cache and their server-side "
                "speculative counters span earlier runs (flushed/flush_attempts per run in "
                "result.json).",
                soft_wrap=True,
            )
        if "outputs_diverge" in result.warnings:
            console.print(
                f"{self.indent}[bold red]warning:[/] greedy outputs diverge from the baseline's "
                f"after {int(result.metrics.get('lossless_min_agree_tokens', 0))} tokens "
                f"({int(result.metrics.get('lossless_prompts_diverged', 0))} of "
                f"{int(result.metrics.get('lossless_prompts', 0))} prompts): speculation must not "
                "change a greedy output, so this configuration is wrong however fast it is (an "
                "engine or drafter bug). Per prompt: lossless in result.json.",
                soft_wrap=True,
            )
        if "client_bound" in result.warnings:
            busiest = max((r.client_cpu_util or 0.0) for r in result.runs)
            console.print(
                f"{self.indent}[yellow]warning:[/] the benchmark client was busy "
                f"{100 * busiest:.0f}% of a core during a run: the client, not the server, may "
                "have capped this measurement (client_cpu_* in result.json's runs).",
                soft_wrap=True,
            )
        if "equal_lengths" in result.warnings:
            at = ", ".join(
                f"{k.removeprefix('equal_length_c')} ({int(v)} tokens)"
                for k, v in result.metrics.items()
                if k.startswith("equal_length_c")
            )
            console.print(
                f"{self.indent}[yellow]warning:[/] at {at} in flight nearly every output had the "
                "same length (cut at max_tokens, or ignore_eos): the slots finish in waves, and "
                "a window's rate depends on where they fall unless it spans several "
                "(benchmark.window_completions). Answers of their own length avoid it "
                '(docs/benchmark.md, "Equal lengths and waves").',
                soft_wrap=True,
            )
        if "drafter_bypassed" in result.warnings:
            console.print(
                f"{self.indent}[bold red]warning:[/] accept length "
                f"{result.metrics.get('accept_len', 0):.2f}"
                ": the drafter is bypassed (every draft rejected). Check drafter.algorithm "
                "(EAGLE-3 drafters need EAGLE3) with: python -m drafter check --drafter PATH "
                "--model PATH"
            )


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
    for r in rows:
        p = r.effective or r.params
        spec = r.params.get("speculative_algorithm") is not None
        measured = r.outcome in (Outcome.OK, Outcome.PRUNED)
        note = ""
        if r.related:
            note = f"as {r.related}" if r.outcome is Outcome.DUPLICATE else f"from {r.related}"
        elif r.outcome is Outcome.PRUNED:
            note = "screened" if "screened" in r.warnings else f"{len(r.runs)} runs"
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
            f"[{_OUTCOME_STYLE.get(r.outcome, 'white')}]{r.outcome}[/]",
            fmt_tok_s(r, ranking) if shown else "-",
            f"{r.metrics['accept_len']:.2f}" if shown and "accept_len" in r.metrics else "-",
            f"{ranking.value(r) / base:.2f}×"  # type: ignore[operator]
            if shown and base and ranking.value(r) is not None
            else "-",
            note,
        ]
        table.add_row(*cells, style="bold" if r is baseline else None)
    return table
