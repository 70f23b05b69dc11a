"""The console's start-up lines: one per phase (none lost between two polls), with when it began
and what the study's earlier starts lead to expect."""

from __future__ import annotations

from harness.server.startup import StartupTracker
from sweep.readout.console import console, expected_startup
from sweep.readout.trial_lines import ConsoleReporter


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_expected_times_are_the_medians_of_earlier_starts_that_got_ready():
    def marks(weights, kv):
        return [
            {"phase": "launching", "at_s": 0.0},
            {"phase": "loading weights", "at_s": weights},
            {"phase": "allocating the KV pool", "at_s": kv},
            {"phase": "ready", "at_s": kv + 1},
        ]

    starts = [(marks(2, 40), 60.0), (marks(4, 50), 70.0), (marks(3, 45), 65.0)]
    starts.append(([{"phase": "loading weights", "at_s": 900.0}], None))  # stalled: not counted
    expected = expected_startup(starts)
    assert expected["loading weights"] == 3 and expected["allocating the KV pool"] == 45
    assert expected["ready"] == 65
    assert expected_startup([]) == {}


def test_every_phase_gets_a_line_with_its_expected_time():
    clock = Clock()
    tracker = StartupTracker(started=0.0, clock=clock)
    expected = {"allocating the KV pool": 45.0, "ready": 65}
    reporter = ConsoleReporter(False, expected_startup=expected)
    with console.capture() as captured:
        clock.now = 3
        tracker.feed("[2026-05-01 10:00:00] Load weight begin. avail mem=95.59 GB")
        clock.now = 44
        tracker.feed("[2026-05-01 10:00:41] KV Cache is allocated. #tokens: 9")
        reporter.server_phase(tracker)  # one poll saw two phases begin
        reporter.server_phase(tracker)  # nothing new: nothing printed
    lines = captured.get().splitlines()
    assert lines == [
        "    start-up: loading weights  at 3s wall (ready ~1m05s)",
        "    start-up: allocating the KV pool  at 44s wall (usually 45s; ready ~1m05s)",
    ]
