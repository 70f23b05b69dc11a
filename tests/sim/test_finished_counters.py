"""The Prometheus token, request, verify and cached counters move once per finished request, by
its whole count, as SGLang 0.5.23's tokenizer manager moves them
(`TokenizerMetricsCollector.observe_one_finished_request`), never per scheduler step."""

from __future__ import annotations

import asyncio

from tests.sim._engine import engine

EAGLE3 = (
    "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
    "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
    "--speculative-num-draft-tokens", "4",
)  # fmt: skip
SYSTEM = "You are a careful assistant. Follow the few-shot examples exactly. " * 40


def _snapshot(e) -> tuple[int, int, int, int, int]:
    t = e.totals
    return t.prompt_tokens, t.generation_tokens, t.requests, t.verify_calls, t.cached_device_tokens


def test_no_counter_moves_until_a_request_finishes_then_it_moves_by_the_whole_request():
    e = engine(*EAGLE3)
    assert e.speculative
    chat = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "One?"}]
    warm = e.new_request(chat, 8, ignore_eos=True, thinking=False)  # puts the prefix in the cache
    chat2 = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Two?"}]
    long = e.new_request(chat2, 400, ignore_eos=True, thinking=False)
    seen: list[tuple[int, tuple]] = []  # (tokens the long request had, the counters then)

    async def drive() -> None:
        loop = asyncio.create_task(e.run())
        e.submit(warm)
        while (await warm.queue.get()).finish_reason is None:
            pass
        e.submit(long)
        while True:
            chunk = await long.queue.get()
            seen.append((long.generated, _snapshot(e)))
            if chunk.finish_reason is not None:
                break
        loop.cancel()

    asyncio.run(drive())
    after_warm = (warm.prompt_tokens, warm.generated, 1, warm.verify_ct, warm.cached_device)
    running = [counters for generated, counters in seen if generated < long.limit]
    assert len(running) > 10 and long.generated == 400
    assert all(c == after_warm for c in running)  # 390+ tokens streamed, no counter moved
    assert long.verify_ct > 0 and long.cached_device >= len(SYSTEM) // 4 - 20
    assert _snapshot(e) == (
        warm.prompt_tokens + long.prompt_tokens,
        warm.generated + 400,
        2,
        warm.verify_ct + long.verify_ct,
        warm.cached_device + long.cached_device,
    )


def test_an_aborted_request_is_counted_with_what_it_had_once():
    """A client that goes away: the scheduler aborts the request, which finishes as aborted and
    is counted with the tokens it had (0.5.23: collect_metrics runs for every finished state)."""
    e = engine(*EAGLE3)
    r = e.new_request("Explain the proof. " * 10, 2000, ignore_eos=True, thinking=False)

    async def drive() -> None:
        loop = asyncio.create_task(e.run())
        e.submit(r)
        while r.generated < 50:
            await r.queue.get()
        assert e.totals.generation_tokens == 0
        e.abort(r)
        e.abort(r)  # a second abort of a request the scheduler no longer has counts nothing
        loop.cancel()

    asyncio.run(drive())
    assert e.totals.requests == 1
    assert e.totals.generation_tokens == r.generated < 2000
    assert e.totals.verify_calls == r.verify_ct > 0
