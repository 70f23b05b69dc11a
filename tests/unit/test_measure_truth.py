"""Issue 15's measurement arithmetic: latencies at any clock, acceptance by output position,
steady-state windows."""

from __future__ import annotations

import itertools

import pytest

from harness.measure.clock import ServerClock, close_client_gaps, restamp
from harness.measure.timeline import Timeline
from harness.record.results import RequestRecord


def _record(start: float, end: float) -> RequestRecord:
    return RequestRecord("measure", 1, 1, "p", start, None, end, 20, 3, 0, "length")


def test_restamp_keeps_the_clients_share_at_wall_rate():
    """At clock scale 50 the client's 2 ms per chunk read as 100 ms; restamped, 2 ms again."""
    scale, client_wall = 50.0, 0.002
    stamps = [0.03, 0.06, 0.09]  # the server's virtual seconds since it received the request
    start = 10.0
    points = [(start + scale * (s / scale + client_wall), n + 1) for n, s in enumerate(stamps)]
    end = points[-1][0] + scale * 0.001  # usage + [DONE] after the last token: 1 ms wall
    line = Timeline(_record(start, end), points, stamps)
    restamp(line, scale)
    assert [t - start for t, _ in line.points] == pytest.approx([0.032, 0.062, 0.092])
    assert line.record.first_token_s - start == pytest.approx(0.032)
    assert line.record.end_s - start == pytest.approx(0.093)


def _sequential(scale: float, client_gap_wall: float) -> list[Timeline]:
    """Three requests one after another, each 0.09 s of server time plus 1 ms of the client's
    at the end; `client_gap_wall` of the client's wall time between one end and the next send."""
    lines, start = [], 0.0
    for _ in range(3):
        stamps = [0.03, 0.06, 0.09]
        points = [(start + s, n + 1) for n, s in enumerate(stamps)]  # no client share per chunk
        end = points[-1][0] + scale * 0.001
        lines.append(Timeline(_record(start, end), points, stamps))
        start = end + scale * client_gap_wall
    for line in lines:
        restamp(line, scale)
    return lines


def test_a_runs_gaps_between_requests_are_the_clients_wall_time_not_scaled():
    """At scale 50 the client's 10 ms between two requests read 0.5 s of server clock, and a
    concurrency-1 run's tok/s held that gap 50x; moved, the gap is 10 ms again, each request's
    own times (TTFT, ITL) unchanged."""
    scale, gap = 50.0, 0.010
    lines = _sequential(scale, gap)
    own = [[t - line.record.start_s for t, _ in line.points] for line in lines]
    close_client_gaps(lines, scale)
    for before, after in itertools.pairwise(lines):
        assert after.record.start_s - before.record.end_s == pytest.approx(gap)
    assert [[t - line.record.start_s for t, _ in line.points] for line in lines] == own
    assert lines[-1].record.end_s - lines[0].record.start_s == pytest.approx(3 * 0.091 + 2 * gap)


def test_closing_gaps_is_the_identity_at_scale_one_and_leaves_overlaps_alone():
    lines = _sequential(1.0, 0.010)
    starts = [line.record.start_s for line in lines]
    close_client_gaps(lines, 1.0)
    assert [line.record.start_s for line in lines] == starts
    a, b = _record(0.0, 5.0), _record(1.0, 6.0)  # two in flight at once: not the client's gap
    overlapping = [Timeline(a, [(2.0, 1)], [2.0]), Timeline(b, [(3.0, 1)], [2.0])]
    for line in overlapping:
        line.scaled_end_s = line.record.end_s
    close_client_gaps(overlapping, 50.0)
    assert (b.start_s, b.end_s) == (1.0, 6.0)


def test_restamp_is_the_identity_at_scale_one_and_without_stamps():
    points = [(1.5, 1), (1.6, 3)]
    line = Timeline(_record(1.0, 1.7), list(points), [0.4, 0.5])
    restamp(line, 1.0)
    assert line.points == points and line.record.end_s == 1.7
    unstamped = Timeline(_record(1.0, 1.7), list(points))
    restamp(unstamped, 50.0)
    assert unstamped.points == points


def test_only_a_simulator_clock_is_read_as_one():
    assert ServerClock.from_server_info({"simulator": {"clock_scale": 50}}).simulated
    assert not ServerClock.from_server_info({"version": "0.5.23"}).simulated


def _stream(chunk_tokens: list[int], verify_ct: int | None = None) -> Timeline:
    """A request whose chunks carry these token counts (the first: prefill's one token)."""
    total, points = 0, []
    for i, n in enumerate(chunk_tokens):
        total += n
        points.append((float(i), total))
    record = RequestRecord("measure", 1, 1, "p", 0.0, 0.0, float(len(points)), 20, total)
    record.verify_ct = verify_ct
    return Timeline(record, points)


def test_accept_by_position_counts_verify_steps_per_window():
    from harness.measure.acceptance import accept_by_position, decays

    # Window 0 (tokens 0..3): steps of 3 and 1 (starting at 1 and 4... 4 is window 1 at width 4)
    line = _stream([1, 3, 1, 2, 2, 1], verify_ct=5)
    # steps start at positions 1, 4, 5, 7, 9: window 0 holds the step at 1 (3 tokens); window 1
    # (4..7) the steps at 4, 5, 7 (1 + 2 + 2); window 2 the step at 9 (1)
    assert accept_by_position([line], window=4) == pytest.approx([3.0, 5 / 3, 1.0])
    assert decays([3.0, 5 / 3, 1.0]) and not decays([3.0, 2.9])
    # chunks that are not its verify steps (coalesced, --stream-interval > 1): left out
    assert accept_by_position([_stream([1, 3, 1, 2, 2, 1], verify_ct=3)], window=4) == []
    spread = _stream([1, 3, 1])
    spread.exact = False  # token counts spread over the chunks: no step sizes
    assert accept_by_position([spread], window=4) == []


def test_accept_decay_lowers_the_modelled_acceptance_with_position():
    from harness.sim.cli import build_parser, resolve
    from harness.sim.model.profiles import HARDWARE, TARGETS
    from harness.sim.oracle import build_model

    def model(decay: float):
        argv = [
            "--model-path", "moonshotai/Kimi-K2.5", "--tp-size", "8",
            "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/m",
            "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", "4", "--sim-accept-decay", str(decay),
        ]  # fmt: skip
        ns = build_parser().parse_args(argv)
        hw, target = HARDWARE[ns.sim_hardware], TARGETS[ns.sim_target]
        return build_model(resolve(ns, target.architecture, hw.gpu_memory_mib).args, ns, "LL")

    plain, decaying = model(0.0), model(0.3)
    assert decaying.expected_accept_len(0) == pytest.approx(plain.expected_accept_len(0))
    assert decaying.expected_accept_len(2000) < plain.expected_accept_len(2000) - 0.3
