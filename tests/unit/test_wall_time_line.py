"""Where a sweep's wall time went: an interrupted trial is not a failed launch."""

from harness.record.results import Outcome, TrialResult
from sweep.readout.verdict import wall_time_line


def result(outcome: Outcome, wall_s: float, startup_s: float = 0.0) -> TrialResult:
    return TrialResult(
        "t",
        "trial",
        outcome,
        "sim",
        True,
        1.0,
        {},
        wall_s=wall_s,
        startup_wall_s=startup_s,
        teardown_s=1.0,
    )


def test_an_interrupted_trial_is_told_apart_from_failed_launches():
    line = wall_time_line([result(Outcome.OK, 40, 10), result(Outcome.INTERRUPTED, 10)], 60)
    assert "failed launches 0s (0%)" in line
    assert "the interrupted trial 9s (15%)" in line
    assert "server start-ups 10s (17%)" in line and "benchmarks 29s (48%)" in line


def test_a_crash_is_a_failed_launch_and_no_interruption_is_mentioned():
    line = wall_time_line([result(Outcome.OK, 40, 10), result(Outcome.CRASH, 10)], 60)
    assert "failed launches 9s (15%)" in line and "interrupted" not in line
