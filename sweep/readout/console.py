"""The console everything prints to, and how an outcome, a speed, a duration and a distorted
SIMULATED timing are shown, which the trial lines (sweep.readout.trial_lines) and the closing
trials table (sweep.readout.trials_table) share."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.markup import escape

from harness.record import labels
from harness.record.results import Outcome, TrialResult
from harness.server.startup import READY
from sweep.readout.ranking import SINGLE_STREAM, Ranking

console = Console(highlight=False)
if not console.is_terminal:
    # Logs and CI get a readable table instead of rich's 80-column default.
    console.width = max(console.width, 120)

OUTCOME_STYLE = {
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
    Outcome.DOMINATED: "cyan",
    Outcome.PRUNED: "yellow",
}


def timing_moves_numbers(result: TrialResult) -> bool:
    """Whether the host's CPU can have moved this simulated trial's numbers. The client re-stamps
    every chunk with the simulator's own clock (harness.measure.clock.restamp) and closes the gaps
    between a concurrency-1 run's requests, so there a busy host or a simulator behind its clock
    leaves every rate as the model made it. With several requests in flight their arrivals meet
    the engine's batches on the wall clock: a simulator behind its clock batches differently."""
    levels = {int(run.concurrency) for run in result.runs} or {1}
    return "simulator_behind" in result.warnings and max(levels) > 1


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
    """Over the closing table: how many trials' SIMULATED rates the host's CPU can have moved
    (`timing_moves_numbers`; the per-trial lines scroll away in a long sweep); None when none."""
    results = [r for r in results if r.outcome is not Outcome.DUPLICATE]  # a copy, not a run
    hit = [r for r in results if timing_moves_numbers(r)]
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


def ran_as(result: TrialResult) -> str | None:
    """What the server reported running (steps/topk/draft, or off) where it is not what the trial
    asked for: SGLang adjusts or ignores a speculative flag without failing, and a sweep must
    not credit a configuration with another's speed."""
    effective = result.effective
    if not effective or result.outcome not in (Outcome.OK, Outcome.PRUNED):
        return None
    asked = (
        labels.speculation(result.params) if result.params.get("speculative_algorithm") else "off"
    )
    ran = labels.speculation(effective, missing=None) if effective.get(labels.STEPS) else "off"
    return ran if "None" not in ran and ran != asked else None


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
