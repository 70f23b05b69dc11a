"""The sweep's console, one line per trial: the trial's header and its outcome on one line, a
start-up phase said only when it runs slow against the study's usual (or, with no usual, long
enough to look stalled), each warning once per sweep and only one that bears on the numbers, and
what SGLang ran where it is not what the trial asked for. `verbose` prints everything."""

from __future__ import annotations

from harness.record.results import Outcome, RunSummary, TrialResult
from harness.server.startup import StartupTracker
from sweep.readout.console import console, ran_as, timing_moves_numbers
from sweep.readout.trial_lines import ConsoleReporter, Header, SweepConsole

HEADER = Header("3/12", "trial_0002", "steps=3 topk=1 draft=4 mem=0.85 hicache=0")
SPEC = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
        "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}  # fmt: skip


def result(*warnings: str, concurrency: int = 1, effective=None, **metrics) -> TrialResult:
    runs = [RunSummary(k, concurrency, 3, 0, 6000, 80.0, 80.0, 80.0, 0.1, 2.0, None)
            for k in (1, 2, 3)]  # fmt: skip
    metrics = {"tok_s": 80.0, "tok_s_ci95": 1.5, "accept_len": 2.05, **metrics}
    return TrialResult("trial_0002", "trial", Outcome.OK, "sim", True, 10.0, dict(SPEC),
                       metrics=metrics, runs=runs, warnings=list(warnings),
                       effective=effective or {}, wall_s=10.0)  # fmt: skip


def base() -> TrialResult:
    return TrialResult("baseline", "baseline", Outcome.OK, "sim", True, 9.0, {},
                       metrics={"tok_s": 90.0, "tok_s_ci95": 1.0})  # fmt: skip


def printed(reporter: ConsoleReporter, *results: TrialResult) -> list[str]:
    with console.capture() as out:
        for r in results:
            reporter.trial_done(r, base())
    return [line for line in out.get().splitlines() if line.strip()]


def test_a_trial_is_one_line_its_header_and_its_outcome():
    lines = printed(ConsoleReporter(True, sweep=SweepConsole(), header=HEADER), result())
    assert lines == [
        "[3/12] trial_0002  steps=3 topk=1 draft=4 mem=0.85 hicache=0  ok  80.0 ± 1.5 tok/s, "
        "accept len 2.05, 0.89× baseline  (10s)"
    ]


def test_verbose_keeps_the_arrow_line_under_the_header():
    lines = printed(ConsoleReporter(True, sweep=SweepConsole(verbose=True), header=HEADER),
                    result())  # fmt: skip
    assert lines[0].startswith("    → ok  80.0 ± 1.5 tok/s")


def test_a_warning_is_said_once_per_sweep_and_verbose_says_it_every_time():
    shared = SweepConsole()
    first = printed(ConsoleReporter(True, sweep=shared, header=HEADER), result("client_bound"))
    again = printed(ConsoleReporter(True, sweep=shared, header=HEADER), result("client_bound"))
    assert sum("client was busy" in line for line in first) == 1
    assert not any("client was busy" in line for line in again)
    loud = SweepConsole(verbose=True)
    for _ in range(2):
        lines = printed(ConsoleReporter(True, sweep=loud, header=HEADER), result("client_bound"))
        assert any("client was busy" in line for line in lines)


def test_a_busy_host_is_news_only_where_it_can_move_a_number():
    # concurrency 1: every chunk re-stamped on the simulator's clock, the gaps closed: no line
    single = result("simulator_behind", sim_behind_share=0.48, host_load_1m=5.0, host_cores=2)
    assert not timing_moves_numbers(single)
    quiet = ConsoleReporter(True, sweep=SweepConsole())
    assert not any("distorted" in line for line in printed(quiet, single))
    # several requests in flight meet the engine's batches on the wall clock: said
    loaded = result("simulator_behind", concurrency=32, sim_behind_share=0.48, host_load_1m=5.0,
                    host_cores=2)  # fmt: skip
    assert timing_moves_numbers(loaded)
    quiet = ConsoleReporter(True, sweep=SweepConsole())
    assert any("distorted" in line for line in printed(quiet, loaded))
    # an overloaded host whose simulator kept its clock: recorded, not said
    calm = result("host_overloaded", concurrency=32, host_load_1m=5.0, host_cores=2)
    assert not timing_moves_numbers(calm)


def test_the_line_says_when_sglang_ran_something_else():
    asked = result(effective={"speculative_num_steps": 3, "speculative_eagle_topk": 1,
                              "speculative_num_draft_tokens": 4})  # fmt: skip
    assert ran_as(asked) is None
    changed = result(effective={"speculative_num_steps": 3, "speculative_eagle_topk": 1,
                                "speculative_num_draft_tokens": 2})  # fmt: skip
    assert ran_as(changed) == "3/1/2"
    bypassed = result(effective={"speculative_num_steps": None})
    assert ran_as(bypassed) == "off"
    lines = printed(ConsoleReporter(True, sweep=SweepConsole(), header=HEADER), changed)
    assert "SGLang ran it as 3/1/2" in lines[0]


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def phases(clock: Clock) -> StartupTracker:
    tracker = StartupTracker(started=0.0, clock=clock)
    clock.now = 3
    tracker.feed("[2026-05-01 10:00:00] Load weight begin. avail mem=95.59 GB")
    return tracker


def polled(reporter: ConsoleReporter, tracker: StartupTracker, clock: Clock, *at: float):
    with console.capture() as out:
        for now in at:
            clock.now = now
            reporter.server_phase(tracker)
    return [line for line in out.get().splitlines() if line.strip()]


def test_a_phase_is_said_only_when_slow_against_the_studys_usual():
    usual = {"loading weights": 2.0, "allocating the KV pool": 12.0, "ready": 20.0}  # 10 s long
    clock = Clock()
    tracker = phases(clock)
    reporter = ConsoleReporter(False, expected_startup=usual, sweep=SweepConsole(),
                               header=HEADER)  # fmt: skip
    assert reporter.usual_length("loading weights") == 10.0
    # within 2 x 10 s + 30 s of its begin (at 3 s): nothing in a log
    assert polled(reporter, tracker, clock, 10, 30, 52) == []
    lines = polled(reporter, tracker, clock, 54, 80, 200)  # past 53 s: said once
    assert lines == [
        "    [3/12] trial_0002: start-up: loading weights for 51s (usually 10s in this study)"
    ]


def test_with_no_earlier_start_a_phase_is_said_when_it_looks_stalled():
    clock = Clock()
    tracker = phases(clock)
    reporter = ConsoleReporter(False, sweep=SweepConsole(), header=HEADER)
    assert polled(reporter, tracker, clock, 60, 122) == []
    lines = polled(reporter, tracker, clock, 124, 300)
    assert len(lines) == 1 and "no earlier start of this study to compare" in lines[0]


def test_verbose_prints_every_phase():
    clock = Clock()
    tracker = phases(clock)
    reporter = ConsoleReporter(False, sweep=SweepConsole(verbose=True))
    assert polled(reporter, tracker, clock, 4) == ["    start-up: loading weights  at 3s wall"]
