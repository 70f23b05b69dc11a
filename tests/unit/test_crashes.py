"""The failure signature: two runs of one failure compare equal, two failures do not."""

from __future__ import annotations

import pytest

from harness.record.results import Outcome, TrialResult
from sweep.study.trial.crashes import failure_signature

REFUSAL = "ValueError: trtllm_mha backend only supports topk = 1 for speculative decoding."


def result(outcome: Outcome, excerpt: str | None, error: str = "server exited") -> TrialResult:
    return TrialResult(
        name="t",
        role="trial",
        outcome=outcome,
        engine="sim",
        simulated=True,
        clock_scale=1.0,
        params={},
        error=error,
        log_excerpt=excerpt,
    )


def traceback(head: str, last: str) -> str:
    return "\n".join(
        [head, "Traceback (most recent call last):", '  File "x.py", line 3, in f', last]
    )


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (  # timestamps, pids and addresses differ between two runs
            traceback("[2026-12-01 10:00:01] pid=4242 start", REFUSAL),
            traceback("[2026-12-02 11:30:59] pid=777 start", REFUSAL),
        ),
        (
            "[2026-12-01 10:00:01 TP0] Scheduler hit an exception: RuntimeError: CUDA error: "
            "an illegal memory access at 0x7f00aa after 12.5 s",
            "[2026-12-01 10:09:41 TP0] Scheduler hit an exception: RuntimeError: CUDA error: "
            "an illegal memory access at 0x7f11bb after 3.25 s",
        ),
    ],
)
def test_two_runs_of_one_failure_have_one_signature(a, b):
    assert failure_signature(result(Outcome.CRASH, a)) == failure_signature(
        result(Outcome.CRASH, b)
    )


def test_the_signature_is_the_outcome_and_the_exception_line():
    sig = failure_signature(result(Outcome.CRASH, traceback("[2026-12-01 10:00:01] x", REFUSAL)))
    assert sig == f"crash: {REFUSAL}"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (result(Outcome.CRASH, REFUSAL), result(Outcome.CRASH, "ValueError: other refusal")),
        (result(Outcome.CRASH, None, "x"), result(Outcome.TIMEOUT, None, "x")),
    ],
)
def test_different_failures_differ(a, b):
    assert failure_signature(a) != failure_signature(b)


@pytest.mark.parametrize("outcome", [Outcome.OK, Outcome.OOM, Outcome.ERROR, Outcome.INVALID])
def test_only_crashes_and_timeouts_have_a_signature(outcome):
    assert failure_signature(result(outcome, REFUSAL)) is None


def test_without_a_log_the_error_is_the_cause():
    sig = failure_signature(result(Outcome.TIMEOUT, "", "server not ready after 600.2 s\nlog tail"))
    assert sig == "timeout: server not ready after <n> s"


def stall(at: str, silent: int, after: int) -> str:
    """harness.server.process's message for a start-up silent for engine.stall_timeout_s."""
    return (
        f"stalled at {at}: no output for {silent} s (wall, {after} s after launch; "
        "engine.stall_timeout_s=600); raise engine.stall_timeout_s if ..."
    )


def test_a_stall_is_its_phase_whatever_its_bar_had_reached():
    bar = "[2026-12-01 10:00:01] Load weight begin.\rLoading safetensors checkpoint shards:  39%"
    first = result(Outcome.TIMEOUT, bar, stall("loading weights 39% (25/64 shards)", 600, 655))
    again = result(Outcome.TIMEOUT, bar, stall("loading weights 41% (26/64 shards)", 601, 700))
    assert (
        failure_signature(first)
        == failure_signature(again)
        == "timeout: stalled at loading weights"
    )
    elsewhere = result(Outcome.TIMEOUT, bar, stall("capturing target verify CUDA graph", 600, 900))
    assert failure_signature(elsewhere) == "timeout: stalled at capturing target verify CUDA graph"
