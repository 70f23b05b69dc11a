"""The simulated scheduler's order of work, as SGLang 0.5.23's (managers/scheduler.py
get_next_batch_to_run: "Run prefill first if possible"; is_fully_idle with the overlap queue)."""

from __future__ import annotations

import asyncio

from harness.sim.cli import build_parser, resolve
from harness.sim.engine import Engine, InstantClock
from harness.sim.model.profiles import HARDWARE, TARGETS
from harness.sim.oracle import build_model

ARGV = [
    "--model-path", "moonshotai/Kimi-K2.5", "--tp-size", "8", "--trust-remote-code",
    "--mem-fraction-static", "0.85",  # the seeds': SGLang 0.5.23's default leaves no KV pool
]  # fmt: skip


def _engine(*extra: str) -> tuple[Engine, InstantClock]:
    ns = build_parser().parse_args([*ARGV, *extra])
    hw, target = HARDWARE[ns.sim_hardware], TARGETS[ns.sim_target]
    args = resolve(ns, target.architecture, hw.gpu_memory_mib).args
    model = build_model(args, ns, "LL")
    clock = InstantClock()
    engine = Engine(
        model,
        clock,
        max_running_requests=args["max_running_requests"],
        kv_tokens=model.memory_plan(args["mem_fraction_static"]).kv_tokens,
        decode_log_interval=10**9,
        seed=0,
        drift_sigma=0.0,
    )
    return engine, clock


def test_a_request_arriving_during_a_prefill_is_prefilled_before_the_next_decode_step():
    engine, _ = _engine()

    async def drive() -> tuple[list[float], list[float]]:
        loop = asyncio.create_task(engine.run())
        first = engine.new_request("first prompt", 8, ignore_eos=True, thinking=False)
        engine.submit(first)
        while engine.waiting:  # until the first one's prefill has started
            await asyncio.sleep(0)
        second = engine.new_request("second prompt", 8, ignore_eos=True, thinking=False)
        engine.submit(second)  # arrives while the first one's prefill runs
        times: dict[str, list[float]] = {"first": [], "second": []}
        for name, request in (("first", first), ("second", second)):
            while True:
                chunk = await request.queue.get()
                times[name].append(chunk.at)
                if chunk.finish_reason is not None:
                    break
        loop.cancel()
        return times["first"], times["second"]

    first, second = asyncio.run(drive())
    # The second request's first token (its prefill) comes before the first request's second
    # token (a decode step): SGLang runs a new prefill batch before decoding.
    assert second[0] <= first[1]


def test_the_overlap_scheduler_is_not_fully_idle_until_its_last_step_drained():
    engine, _ = _engine()
    assert engine.overlap

    async def drive() -> tuple[bool, bool, bool]:
        loop = asyncio.create_task(engine.run())
        request = engine.new_request("a prompt", 4, ignore_eos=True, thinking=False)
        engine.submit(request)
        while (await request.queue.get()).finish_reason is None:
            pass
        busy_after_last_response = engine.idle and not engine.fully_idle
        refused = engine.flush()
        became_idle = await engine.wait_fully_idle(30.0)
        loop.cancel()
        return busy_after_last_response, refused, became_idle and engine.flush()

    busy, refused, flushed = asyncio.run(drive())
    assert busy and not refused and flushed
