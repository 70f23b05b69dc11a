"""An instant-clock engine for the capacity tests, built the way the served simulator builds it."""

from __future__ import annotations

import asyncio

from harness.sim.capacity.settings import engine_capacity
from harness.sim.cli import build_parser, resolve
from harness.sim.engine import Engine, InstantClock
from harness.sim.model.profiles import HARDWARE, TARGETS
from harness.sim.oracle import build_model, started_plan
from harness.sim.request import SimRequest

KIMI = ["--model-path", "moonshotai/Kimi-K2.5", "--tp-size", "8", "--trust-remote-code"]
# The seeds' fraction: SGLang 0.5.23's own default leaves Kimi-K2.5 no KV pool on their box.
SEEDS_FRACTION = ("--mem-fraction-static", "0.85")


def engine(*extra: str, kv_tokens: int | None = None, log_interval: int = 10**9) -> Engine:
    """Kimi-K2.5 on the seeds' box (SGLang flags + --sim-* in `extra`); `kv_tokens` shrinks the
    pool so a handful of requests fill it."""
    fraction = () if "--mem-fraction-static" in extra else SEEDS_FRACTION
    ns = build_parser().parse_args([*KIMI, *fraction, *extra])
    hw, target = HARDWARE[ns.sim_hardware], TARGETS[ns.sim_target]
    args = resolve(ns, target.architecture, hw.gpu_memory_mib).args
    model = build_model(args, ns, "LL")
    capacity = engine_capacity(args, ns, model, started_plan(model, args))
    if kv_tokens is not None:
        capacity["kv_tokens"] = kv_tokens
    return Engine(
        model,
        InstantClock(),
        max_running_requests=args["max_running_requests"],
        decode_log_interval=log_interval,
        seed=0,
        drift_sigma=0.0,
        **capacity,
    )


async def collect(request: SimRequest) -> list[float]:
    """Every chunk's time until the request finishes."""
    times = []
    while True:
        chunk = await request.queue.get()
        times.append(chunk.at)
        if chunk.finish_reason is not None:
            return times


def run_all(e: Engine, requests: list[SimRequest]) -> list[list[float]]:
    """Submit `requests` at once and run the engine until they all finished."""

    async def drive() -> list[list[float]]:
        loop = asyncio.create_task(e.run())
        for r in requests:
            e.submit(r)
        out = await asyncio.gather(*(collect(r) for r in requests))
        loop.cancel()
        return list(out)

    return asyncio.run(drive())
