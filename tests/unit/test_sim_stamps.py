"""The simulator's chunk stamps at a fast clock: the wall time the event loop (or the client)
spends is CPU, not simulated server time, so it must not reach the stamps `clock_scale` times
over (harness.measure.clock.restamp keeps it at wall rate from the client's side)."""

from __future__ import annotations

import asyncio
import time

import pytest

from harness.sim.cli import build_parser, resolve
from harness.sim.engine import Engine, VirtualClock
from harness.sim.model.profiles import HARDWARE, TARGETS
from harness.sim.oracle import build_model

ARGV = [
    "--model-path", "moonshotai/Kimi-K2.5", "--tp-size", "8", "--trust-remote-code",
    "--mem-fraction-static", "0.85",  # the seeds': SGLang 0.5.23's default leaves no KV pool
]  # fmt: skip
SCALE = 50.0
CPU_S = 0.01  # wall seconds the event loop is busy elsewhere: 0.5 virtual seconds at SCALE


def _engine() -> Engine:
    ns = build_parser().parse_args(ARGV)
    hw, target = HARDWARE[ns.sim_hardware], TARGETS[ns.sim_target]
    args = resolve(ns, target.architecture, hw.gpu_memory_mib).args
    model = build_model(args, ns, "LL")
    return Engine(
        model,
        VirtualClock(SCALE),
        max_running_requests=args["max_running_requests"],
        kv_tokens=model.memory_plan(args["mem_fraction_static"]).kv_tokens,
        decode_log_interval=10**9,
        seed=0,
        drift_sigma=0.0,
    )


async def _until_parked(engine: Engine, loop_task: asyncio.Task) -> None:
    while not engine.fully_idle:  # polled: the start-up (or the drain) finishes
        await asyncio.sleep(0)
    for _ in range(3):
        await asyncio.sleep(0)


def test_an_idle_engine_picked_up_late_stamps_only_the_prefill():
    engine = _engine()

    async def drive() -> tuple[float, float]:
        task = asyncio.create_task(engine.run())
        await _until_parked(engine, task)
        request = engine.new_request("a prompt", 4, ignore_eos=True, thinking=False)
        engine.submit(request)
        time.sleep(CPU_S)  # the HTTP handler still busy: the engine task runs only after this
        chunk = await request.queue.get()
        task.cancel()
        return chunk.at - request.submitted_at, engine.model.prefill_s(request.prompt_tokens)

    stamp, prefill = asyncio.run(drive())
    # Before: the 0.5 virtual seconds of the loop's wall latency were in the first stamp.
    assert abs(stamp - prefill) < 1e-6


def test_the_next_request_is_received_after_the_last_response_at_wall_rate():
    engine = _engine()

    async def drive() -> float:
        task = asyncio.create_task(engine.run())
        await _until_parked(engine, task)
        first = engine.new_request("a prompt", 4, ignore_eos=True, thinking=False)
        engine.submit(first)
        while (chunk := await first.queue.get()).finish_reason is None:
            pass
        time.sleep(CPU_S)  # the client reads the last response and sends the next request
        second = engine.new_request("another prompt", 4, ignore_eos=True, thinking=False)
        task.cancel()
        return second.submitted_at - chunk.at

    gap = asyncio.run(drive())
    # Before: CPU_S x SCALE = 0.5 virtual seconds; now the client's wall gap (~CPU_S).
    assert CPU_S * 0.9 < gap < CPU_S * 5


def test_restamp_leaves_the_simulators_own_wall_time_out_of_the_clients_share():
    """The simulator sends each chunk late by its timer's granularity (~1 ms at a fast clock,
    where a step is a fraction of a wall millisecond); that lateness is its own, not the
    client's: with its wall seconds per chunk (`walls`) the ITL is the stamps' again."""
    from harness.measure.clock import restamp
    from harness.measure.timeline import Timeline
    from harness.record.results import RequestRecord

    stamps = [0.030, 0.041, 0.052, 0.063]  # virtual: prefill, then 11 ms steps
    late = [0.0, 0.0012, 0.0, 0.0009]  # wall seconds each chunk left after its schedule
    walls = [s / SCALE + d for s, d in zip(stamps, late, strict=True)]
    start, client = 5.0, 0.0003  # the client's own wall seconds (sending, reading)
    points = [(start + SCALE * (w + client), n + 1) for n, w in enumerate(walls)]
    record = RequestRecord("measure", 1, 1, "p", start, None, points[-1][0], 20, 4, 0, "length")
    line = Timeline(record, points, list(stamps), walls=walls)
    restamp(line, SCALE)
    got = [t - start for t, _ in line.points]
    # Before (no walls): the 1.2 ms lateness stood in the client's share, one ITL 1.2 ms long.
    assert got == [pytest.approx(s + client) for s in stamps]
