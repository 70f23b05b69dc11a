"""What makes one benchmark run of the simulator differ from the next: its acceptance, not its
step time (benchmarks/_search_sim draws a run's noise from this)."""

from __future__ import annotations

import asyncio
import statistics

from tests.sim._engine import collect, engine

SPECULATIVE = (
    "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/drafter",
    "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
    "--speculative-num-draft-tokens", "4",
)  # fmt: skip


def _runs(runs: int, requests: int, tokens: int) -> list[tuple[float, float]]:
    """(decode tok/s, accept length) of each run: `requests` one after another, as the
    single-stream benchmark sends them, without drift."""
    e = engine(*SPECULATIVE)
    out = []

    def accepted() -> tuple[int, int]:  # (accepted tokens, verify steps) so far
        c = e.counters
        return (
            c.spec_accept_tokens + c.pending_accept_tokens,
            c.spec_forward_ct + c.pending_forward_ct,
        )

    async def drive() -> None:
        loop = asyncio.create_task(e.run())
        for r in range(runs):
            before, decoded, seconds = accepted(), 0, 0.0
            for i in range(requests):
                prompt = f"Prove it, case {r}.{i}. " * 20
                request = e.new_request(prompt, tokens, thinking=True, ignore_eos=True)
                e.submit(request)
                times = await collect(request)
                decoded += request.generated - 1
                seconds += times[-1] - times[0]
            after = accepted()
            out.append((decoded / seconds, (after[0] - before[0]) / (after[1] - before[1])))
        loop.cancel()

    asyncio.run(drive())
    return out


def _spread(xs: list[float]) -> float:
    return statistics.stdev(xs) / statistics.mean(xs)


def test_a_run_strays_by_its_acceptance_and_its_step_time_stays():
    """Without drift, runs of 3 x 1024 tokens differ by percents in speed and as much in accept
    length; the step time (accept length / speed) moves a tenth as much: a run's sampling noise
    is its acceptance."""
    runs = _runs(8, 3, 1024)
    speed = _spread([s for s, _ in runs])
    accept = _spread([a for _, a in runs])
    step = _spread([a / s for s, a in runs])
    assert speed > 0.01 and abs(accept - speed) < 0.2 * speed
    assert step < 0.1 * speed
