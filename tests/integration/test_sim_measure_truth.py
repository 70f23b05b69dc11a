"""Issue 15 on a real simulator subprocess: latencies at a fast clock, acceptance by position,
steady state."""

from __future__ import annotations

import pytest

from harness.measure.bench import Benchmark
from harness.measure.clock import ServerClock
from harness.server.command import build_server_command
from harness.server.process import Server
from harness.spec import BenchmarkSpec
from tests.conftest import eagle3, sim_engine


@pytest.mark.parametrize("api", ["chat", "generate"])
def test_ttft_at_a_fast_clock_is_the_servers_plus_the_clients_wall_share(tmp_path, port, api):
    """At clock scale 200 each wall millisecond of client overhead read as 200 ms of TTFT. Now
    TTFT is the server's virtual time to the first chunk plus the client's share at wall rate:
    a few milliseconds, never the 200x."""
    command = build_server_command(eagle3(port), sim_engine(200.0, "--sim-load-s", "1"))
    spec = BenchmarkSpec(model="m", api=api, max_tokens=64, warmup=0, runs=1, requests_per_run=3)
    with Server(command, tmp_path / "server.log", ready_timeout_s=60) as server:
        server.wait_ready()
        clock = ServerClock.from_server_info(server.server_info())
        bench = Benchmark(command.base_url, spec, clock, speculative=True)
        bench.run()
    assert bench.timelines
    for line in bench.timelines:
        record = line.record
        assert len(line.stamps) == len(line.points)
        client_share = record.first_token_s - record.start_s - line.stamps[0]
        assert 0 <= client_share < 0.2  # wall seconds; scaled by 200 it was >= 0.2 per ms


def test_acceptance_by_position_recovers_the_simulators_decay(tmp_path, port):
    """--sim-accept-decay 0.3: each draft's acceptance falls 30% per 1000 output tokens. The
    per-window curve read from the stream follows the model's, relative to the first window
    (which cancels the prompts' own easiness), within 5% in every window."""
    from harness.server.command import server_flags
    from harness.sim.cli import build_parser, resolve
    from harness.sim.model.profiles import HARDWARE, TARGETS
    from harness.sim.oracle import build_model

    flags = ("--sim-accept-decay", "0.3", "--sim-drift", "0", "--sim-load-s", "1")
    server = eagle3(port)
    command = build_server_command(server, sim_engine(200.0, *flags))
    spec = BenchmarkSpec(
        model="m",
        api="generate",
        max_tokens=2048,
        warmup=0,
        runs=1,
        concurrency=(8,),
        requests_per_level=(8,),  # steady state: 8 of ramp-up + 8 in the window (+ 7 cut)
        ignore_eos=True,
        lossless_check=0,
    )
    with Server(command, tmp_path / "server.log", ready_timeout_s=60) as srv:
        srv.wait_ready()
        clock = ServerClock.from_server_info(srv.server_info())
        curve = Benchmark(command.base_url, spec, clock, speculative=True).run().accept_by_window
    ns = build_parser().parse_args([*server_flags(server), *flags])
    hw, target = HARDWARE[ns.sim_hardware], TARGETS[ns.sim_target]
    model = build_model(resolve(ns, target.architecture, hw.gpu_memory_mib).args, ns, "LL")
    expected = [model.expected_accept_len(128 + 256 * w) for w in range(8)]
    assert len(curve) == 8
    assert expected[-1] < 0.8 * expected[0]  # the decay is there to be recovered
    for measured, modelled in zip(curve, expected, strict=True):
        assert measured / curve[0] == pytest.approx(modelled / expected[0], rel=0.05)
