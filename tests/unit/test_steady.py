"""The steady-state loop and window (harness.measure.steady) and a steady run's numbers
(harness.measure.metrics) without a server."""

from __future__ import annotations

import asyncio

import pytest

from harness.measure.metrics import summarize_run
from harness.measure.steady import equal_length_levels, is_cut, keep_in_flight, steady_window
from harness.measure.timeline import Timeline
from harness.record.results import RequestRecord
from harness.spec import BenchmarkSpec


def fake_sender(lengths, fail=False):
    """`send` for keep_in_flight: request k takes lengths[k] event-loop turns."""
    state = {"next": 0, "in_flight": 0, "most": 0}

    async def send(on_start):
        k = state["next"]
        state["next"] += 1
        record = RequestRecord("measure", 1, 3, f"p{k}", float(k), None, None)
        line = Timeline(record)
        on_start(line)
        state["in_flight"] += 1
        state["most"] = max(state["most"], state["in_flight"])
        try:
            for turn in range(lengths[k % len(lengths)]):
                line.points.append((float(k + turn), turn + 1))
                await asyncio.sleep(0)
        finally:
            state["in_flight"] -= 1
        if fail:
            record.error = "HTTP 500: no"
        else:
            record.end_s, record.completion_tokens = float(k + 100), len(line.points)
        return line

    return send, state


def test_keep_in_flight_holds_c_and_cuts_the_rest():
    send, state = fake_sender([3, 7, 5, 11, 2])
    started, cut = asyncio.run(keep_in_flight(send, 3, stop_after=9, max_failures=9))
    done = [line for line in started if line.record.ok]
    assert state["most"] == 3 and len(done) == 9 and len(cut) == 2  # nothing completes late
    assert all(is_cut(line.record.error) for line in cut)
    assert all(line.record.first_token_s == line.points[0][0] for line in cut if line.points)
    assert state["in_flight"] == 0  # the cut ones were cancelled, not left running


def test_keep_in_flight_ends_on_failures():
    send, _ = fake_sender([2], fail=True)
    started, cut = asyncio.run(keep_in_flight(send, 2, stop_after=10, max_failures=4))
    assert 4 <= len(started) - len(cut) <= 5  # the loop stopped: no request ever completes


def line(start, first, end, tokens, points=()):
    record = RequestRecord("measure", 1, 2, "p", start, first, end, completion_tokens=tokens)
    return Timeline(record, list(points))


def test_the_window_opens_at_the_c_th_completion_and_counts_only_its_tokens():
    lines = [
        line(0, 1, 4, 4, [(1, 1), (2, 2), (3, 3), (4, 4)]),
        line(0, 1, 6, 6, [(t, t) for t in range(1, 7)]),
        line(4, 5, 8, 4, [(5, 1), (6, 2), (7, 3), (8, 4)]),
        line(6, 7, 9, 3, [(7, 1), (8, 2), (9, 3)]),
    ]
    cut = line(8, None, None, None, [(9, 1), (10, 2)])
    cut.record.error = "cut: still running when the measurement window closed"
    window = steady_window([*lines, cut], concurrency=2, completions=2)
    assert window == (6, 9)  # the 2nd completion to the 4th
    summary = summarize_run(1, 2, [*lines, cut], window, None, None, steady=True)
    # Tokens in (6, 9]: request 3 at 7, 8; request 4 at 7, 8, 9; the cut one at 9.
    assert summary.output_tok_s == pytest.approx(6 / 3)
    assert summary.window_completions == 2 and summary.cut == 1 and summary.requests == 4
    assert summary.errors == 0
    assert summary.tpot_p["p50"] == pytest.approx((1.0 + 1.0) / 2)  # 3 s / 3, 2 s / 2
    assert summary.window == [6, 9]


def test_requests_per_level_above_1_sizes_the_window():
    spec = BenchmarkSpec(model="m", concurrency=(1, 8, 64), requests_per_level=(30, 20, 64))
    assert (spec.requests_at(1), spec.window_at(8), spec.window_at(64)) == (30, 20, 64)
    assert BenchmarkSpec(model="m", concurrency=(1, 8, 64)).window_at(64) == 64
    assert BenchmarkSpec(model="m", concurrency=(4,)).window_at(4) == 16
    assert BenchmarkSpec(model="m", concurrency=(4,), window_completions=5).window_at(4) == 5


def _done(concurrency: int, tokens: int, phase: str = "measure") -> RequestRecord:
    return RequestRecord(phase, 1, concurrency, "p", 0.0, 0.5, 9.0, completion_tokens=tokens)


def test_equal_lengths_above_one_in_flight_are_named_with_their_length():
    cut = [_done(32, 512) for _ in range(31)] + [_done(32, 388)]  # 31 of 32 at the cap
    natural = [_done(8, 150 + 37 * k) for k in range(16)]  # lengths of their own
    single = [_done(1, 512) for _ in range(4)]  # one in flight: no waves to form
    warm = [_done(64, 512, phase="warmup") for _ in range(64)]  # never measured
    assert equal_length_levels(cut + natural + single + warm) == {32: 512}


def test_equal_lengths_need_a_wave_of_completions_and_ninety_percent():
    assert equal_length_levels([_done(32, 512) for _ in range(31)]) == {}  # fewer than C
    mostly = [_done(16, 512) for _ in range(14)] + [_done(16, 300), _done(16, 301)]
    assert equal_length_levels(mostly) == {}  # 14 of 16 (87.5%) is under 90%
    assert equal_length_levels(mostly + [_done(16, 512) for _ in range(4)]) == {16: 512}
