"""The trial lines of a sweep: progress per trial (i/N, ETA, live tok/s; the Reporter run_trial
calls) and the one line each trial ends with.

A sweep's console is one line per trial (`verbose=false`, the default): the configuration, its
outcome, tok/s with its interval, accept length and the ratio to the baseline. On a terminal the
trial's progress (start-up phase, run i of n, requests) redraws in place on one line that the
trial's line then replaces; in a log a start-up phase earns a line of its own only when it runs
slow against the study's earlier starts (or, with none to compare, long enough to look stalled).
A warning is said once per sweep, and only one that bears on the numbers (every trial's warnings
stay in its result.json). `verbose=true` prints every phase, run and model prediction as a line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.markup import escape

from harness.record import labels
from harness.record.results import Outcome, RequestRecord, RunSummary, TrialResult
from harness.server.startup import LAUNCHING, READY, StartupTracker
from harness.spec import TrialSpec
from sweep.readout.console import (
    OUTCOME_STYLE,
    console,
    fmt_duration,
    fmt_tok_s,
    ran_as,
    simulated_timing_line,
    timing_moves_numbers,
)
from sweep.readout.memory_lines import memory_line
from sweep.readout.ranking import SINGLE_STREAM, Ranking

TRUNCATION_WARNING = 0.25  # share of outputs cut while reasoning that earns a console warning
# A start-up phase is slow against the study's usual when it has lasted SLOW_FACTOR times its
# usual length and SLOW_MARGIN_S more (a few seconds of jitter on a short phase is not news);
# with no earlier start to compare, after STALL_LINE_S without moving on.
SLOW_FACTOR = 2.0
SLOW_MARGIN_S = 30.0
STALL_LINE_S = 120.0


@dataclass
class Header:
    """What a trial is, said before it starts: its place in the sweep, its name, its values."""

    label: str  # "1/12", "baseline", "baseline re-check"
    name: str
    description: str
    eta_s: float | None = None

    def text(self) -> str:
        title = f"{self.label}] {self.name}" if self.name else f"{self.label}]"
        return f"[bold]\\[{title}[/bold]  {self.description}"


@dataclass
class SweepConsole:
    """What the trial lines of one sweep share: whether to print everything, the warnings said
    already, and each trial's header until its line is printed."""

    verbose: bool = False
    warned: set[str] = field(default_factory=set)
    headers: dict[str, Header] = field(default_factory=dict)

    def once(self, warning: str) -> bool:
        """True the first time a warning is to be said in this sweep (always when verbose)."""
        if self.verbose:
            return True
        first = warning not in self.warned
        self.warned.add(warning)
        return first


def transient(text: str) -> None:
    """A progress line redrawn in place (terminals only): padded so a shorter one leaves nothing
    of the longer one before it."""
    width = max(console.width - 1, 20)
    console.print(text[:width].ljust(width), end="\r", markup=False, highlight=False)


class ConsoleReporter:
    """Per-trial progress lines; also the Reporter that `harness.trial.run_trial` calls."""

    def __init__(
        self,
        simulated: bool,
        prefix: str | None = None,
        ranking: Ranking = SINGLE_STREAM,
        expected_startup: dict[str, float] | None = None,  # phase -> usual begin (wall s)
        sweep: SweepConsole | None = None,  # None: a trial of its own, every line printed
        header: Header | None = None,  # what the trial's one line starts with (quiet only)
    ):
        self.expected_startup = expected_startup or {}
        self._shown = 0  # start-up marks printed
        self._slow_said: set[int] = set()  # marks (by index) whose slowness was said
        self.clock_label = "simulated s" if simulated else "s"
        self.ranking = ranking  # what the trial line leads with (the study's objective)
        # Trials side by side (GPU slots) interleave their lines: each line names its trial.
        self.indent = f"    {prefix}: " if prefix else "    "
        self.parallel = prefix is not None
        self.sweep = sweep if sweep is not None else SweepConsole(verbose=True)
        self.header = header
        # progress redrawn in place: a terminal, one trial at a time
        self.live = console.is_terminal and not self.parallel

    @property
    def verbose(self) -> bool:
        return self.sweep.verbose

    def _progress(self, text: str) -> None:
        if self.live:
            lead = f"{self.header.label}] {self.header.name}".strip() if self.header else ""
            transient(f"    [{lead}  {text}" if lead else f"    {text}")

    def trial_header(self, label: str, name: str, description: str, eta_s: float | None = None):
        header = Header(label, name, description, eta_s)
        if self.verbose:
            eta = f"  [dim]ETA {fmt_duration(eta_s)}[/dim]" if eta_s is not None else ""
            console.print(f"{header.text()}{eta}")
        elif self.live:
            eta = f"  ETA {fmt_duration(eta_s)}" if eta_s is not None else ""
            transient(
                f"[{label}] {name}  {description}{eta}".replace("[dim]", "").replace("[/dim]", "")
            )
        return header

    def server_starting(self, spec: TrialSpec) -> None:
        gpus = dict(spec.server.env).get("CUDA_VISIBLE_DEVICES")
        on = f"GPU {gpus}, " if gpus is not None else ""
        starting = f"starting {spec.engine.name} server on {on}port {spec.server.port}"
        if self.verbose:
            console.print(f"{self.indent}{starting} ...")
        else:
            self._progress(starting)

    def server_phase(self, startup: StartupTracker) -> None:
        """Verbose: a line per start-up phase (every phase begun since the last call, so none is
        missed between two polls), with the wall time since launch it began at and, from the
        study's earlier starts, when it usually began and when the server was usually ready.
        Otherwise the phase redraws in place on a terminal, and a line is printed only for a
        phase that runs slow against the study's usual (`slow_line`)."""
        marks = startup.marks[self._shown :]
        self._shown = len(startup.marks)
        if not self.verbose:
            if (slow := self.slow_line(startup)) is not None:
                console.print(f"{self.indent}{slow}", soft_wrap=True)
            else:
                elapsed = fmt_duration(startup.elapsed_s())
                self._progress(f"start-up: {startup.describe()}  {elapsed}")
            return
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
        if not marks and self.live and startup.progress:
            elapsed = fmt_duration(startup.elapsed_s())
            console.print(f"    start-up: {startup.describe()}  {elapsed}", end="\r")

    def usual_length(self, phase: str) -> float | None:
        """How long a phase usually lasts in this study: from its usual begin to the next phase's
        (or to ready); None without an earlier start that went through it."""
        begin = self.expected_startup.get(phase)
        if begin is None:
            return None
        later = [at for p, at in self.expected_startup.items() if p != phase and at > begin]
        return (min(later) - begin) if later else None

    def slow_line(self, startup: StartupTracker) -> str | None:
        """Said once per phase: the current phase has lasted SLOW_FACTOR x its usual length plus
        SLOW_MARGIN_S, or, with no usual to compare, STALL_LINE_S."""
        index = len(startup.marks) - 1
        if index < 0 or index in self._slow_said:
            return None
        mark = startup.marks[index]
        if mark.phase in (LAUNCHING, READY) and index > 0:
            return None
        lasted = startup.elapsed_s() - mark.at_s
        usual = self.usual_length(mark.phase)
        limit = SLOW_FACTOR * usual + SLOW_MARGIN_S if usual is not None else STALL_LINE_S
        if lasted < limit:
            return None
        self._slow_said.add(index)
        compared = (
            f"usually {fmt_duration(usual)} in this study"
            if usual is not None
            else "no earlier start of this study to compare"
        )
        name = f"{self.header.label}] {self.header.name}".strip() if self.header else ""
        who = f"[{name}: " if name and not self.parallel else ""
        who = who.replace("[", "\\[")
        return f"{who}start-up: {startup.describe()} for {fmt_duration(lasted)} ({compared})"

    def server_ready(self, startup_s: float, effective: dict[str, Any]) -> None:
        if not self.verbose:
            return  # the trial's line says what runs; result.json keeps the start-up
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
        if not self.live:  # a \r line cannot be shared
            return
        decode = record.decode_seconds()
        rate = ""
        if decode and record.completion_tokens:
            rate = f", last request {(record.completion_tokens - 1) / decode:.1f} tok/s"
        self._progress(
            f"run {record.run}: {done}/{total} requests @ concurrency {record.concurrency}{rate}"
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
        if not self.verbose:
            self._progress(f"run {summary.run}/{total_runs}{level}: {tok_s}{accept}")
            return
        console.print(
            f"{self.indent}run {summary.run}/{total_runs}{level}: {tok_s}{accept}{errors}"
        )

    def trial_done(self, result: TrialResult, baseline: TrialResult | None) -> None:
        if self.live and not self.verbose:
            transient("")  # the progress line goes; the trial's own line takes its place
        outcome = self.outcome_text(result, baseline)
        if self.verbose or self.header is None:
            console.print(f"{self.indent}→ {outcome}")
        else:
            console.print(f"{self.header.text()}  {outcome}", soft_wrap=True)
        if (memory := memory_line(result)) is not None:  # the KV pool at a level above 1
            console.print(f"{self.indent}{memory}", soft_wrap=True)
        timing = simulated_timing_line(result)
        moves = timing is not None and (self.verbose or timing_moves_numbers(result))
        if moves and self.sweep.once("timing"):
            console.print(f"{self.indent}[yellow]warning:[/] {escape(timing)}", soft_wrap=True)
        truncated = result.metrics.get("truncation_rate", 0.0)
        # One line under the Best line gives the study's share (sweep.readout.verdict): the
        # trial's own is for the verbose console, and result.json.
        if truncated > TRUNCATION_WARNING and self.verbose:
            console.print(
                f"{self.indent}[yellow]warning:[/] {100 * truncated:.0f}% of the outputs were cut "
                "at max_tokens before the reasoning ended; the speed then describes the thinking "
                "phase only. Raise benchmark.max_tokens to measure whole answers.",
                soft_wrap=True,
            )
        self._warnings(result)

    def outcome_text(self, result: TrialResult, baseline: TrialResult | None) -> str:
        """Outcome, speed with its interval, accept length, the ratio to the baseline, wall time."""
        style = OUTCOME_STYLE.get(result.outcome, "white")
        line = f"[{style}]{result.outcome}[/{style}]"
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
            line += f"  {escape(result.error.splitlines()[0])}"
        if (ran := ran_as(result)) is not None:
            line += f"; [yellow]SGLang ran it as {ran}[/]"
        if result.wall_s is not None:
            line += f"  [dim]({fmt_duration(result.wall_s)})[/dim]"
        return line

    def _warnings(self, result: TrialResult) -> None:
        if "stalled_requests" in result.warnings and self.sweep.once("stalled_requests"):
            console.print(
                f"    [yellow]warning:[/] {int(result.metrics.get('incomplete_runs', 0))} run(s) "
                "had a request that stalled past its deadline (benchmark.request_timeout_s); "
                "they are recorded as incomplete and left out of the means.",
                soft_wrap=True,
            )
        if "aborted_requests" in result.warnings and self.sweep.once("aborted_requests"):
            console.print(
                "    [yellow]warning:[/] the server aborted a request mid-stream (its error is in "
                "requests.jsonl); the run is recorded as incomplete, left out of the means and "
                "repeated.",
                soft_wrap=True,
            )
        if "flush_failed" in result.warnings and self.sweep.once("flush_failed"):
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
        if "client_bound" in result.warnings and self.sweep.once("client_bound"):
            busiest = max((r.client_cpu_util or 0.0) for r in result.runs)
            console.print(
                f"{self.indent}[yellow]warning:[/] the benchmark client was busy "
                f"{100 * busiest:.0f}% of a core during a run: the client, not the server, may "
                "have capped this measurement (client_cpu_* in result.json's runs).",
                soft_wrap=True,
            )
        if "equal_lengths" in result.warnings and self.sweep.once("equal_lengths"):
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
