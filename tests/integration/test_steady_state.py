"""Steady-state throughput at C > 1 (issue 15) on a real simulator subprocess: C requests in
flight for the whole window, ramp-up and drain left out, and the window's rate the simulator's
modelled steady state."""

from __future__ import annotations

import pytest

from harness.measure.bench import Benchmark
from harness.measure.clock import ServerClock
from harness.measure.steady import is_cut
from harness.server.command import build_server_command, server_flags
from harness.server.process import Server
from harness.sim.oracle import modelled_steady_state
from harness.spec import BenchmarkSpec
from tests.conftest import kimi_server, sim_engine

C, WINDOW, MAX_TOKENS = 8, 16, 512
FLAGS = ("--sim-drift", "0", "--sim-load-s", "1")


def in_flight(records, t: float) -> int:
    return sum(1 for r in records if r.start_s <= t and (r.end_s is None or r.end_s > t))


def test_steady_state_keeps_c_in_flight_and_measures_the_modelled_rate(tmp_path, port):
    """Uneven outputs (no thinking: 150-600 tokens, cut at 512) would drain a wave unevenly; the
    steady loop replaces each finished request at once, so inside the window exactly C are in
    flight, and its rate is the engine's own closed-loop steady state (instant clock) within 3%."""
    server = kimi_server(port)
    # Clock scale 1: the client's turnaround between a completion and its replacement is not
    # multiplied by the scale on the server's clock (about 20 s of wall time, little CPU).
    command = build_server_command(server, sim_engine(1.0, *FLAGS))
    spec = BenchmarkSpec(
        model="m",
        max_tokens=MAX_TOKENS,
        warmup=0,
        runs=1,
        concurrency=(C,),
        window_completions=WINDOW,
        thinking=False,
        lossless_check=0,
    )
    with Server(command, tmp_path / "server.log", ready_timeout_s=60) as srv:
        srv.wait_ready()
        clock = ServerClock.from_server_info(srv.server_info())
        bench = Benchmark(command.base_url, spec, clock, speculative=False)
        result = bench.run()
    (summary,) = result.runs
    records = [r for r in result.records if r.phase == "measure"]
    lengths = {r.completion_tokens for r in records if r.ok}
    assert len(lengths) > WINDOW // 2  # uneven output lengths
    assert summary.window is not None and summary.window_completions == WINDOW
    open_, close = summary.window
    done = sorted(r.end_s for r in records if r.ok)
    # Ramp-up left out: the window opens at the C-th completion, after all first C started.
    assert open_ == done[C - 1] > max(sorted(r.start_s for r in records)[:C])
    # Inside the window exactly C in flight: never more, and the time average C (the only
    # gaps are the client's turnaround between a completion and its replacement).
    grid = [open_ + (close - open_) * (i + 0.5) / 1000 for i in range(1000)]
    counts = [in_flight(records, t) for t in grid]
    assert max(counts) == C
    assert sum(counts) / len(counts) > C - 0.2
    # The drain left out: nothing more was admitted, the rest were cut, not waited for.
    late = [r for r in records if r.ok and r.end_s > close]
    cut = [r for r in records if is_cut(r.error)]
    assert len(cut) + len(late) == C - 1 and len(cut) == summary.cut >= C - 2
    assert summary.requests == len(records) - len(cut) and summary.errors == 0
    # The run's own prompts (harness.measure.prompt_plan), each sent once, in the order they were
    # sent.
    assert len({r.prompt_id for r in records}) == len(records) == 2 * C + WINDOW - 1
    plan = bench.prompt_plan.source("measure", 1, C)
    ordered = [
        "\n".join(m["content"] for m in next(plan).messages) for _ in range(len(records) + C)
    ]
    model = modelled_steady_state(
        [*server_flags(server), *FLAGS], C, ordered, MAX_TOKENS, WINDOW, thinking=False
    )
    assert summary.output_tok_s == pytest.approx(model.output_tok_s, rel=0.03)
    assert summary.decode_tok_s == pytest.approx(model.decode_tok_s, rel=0.05)
    assert set(summary.tpot_p) == {"p50", "p90", "p99"}
    assert f"tpot_ms_p99_c{C}" in result.metrics
