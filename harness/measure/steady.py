"""Steady state at concurrency C > 1: exactly C requests in flight while a window is measured.

Each of C slots sends its next request the moment its previous one ended (a closed loop, as a
serving engineer's "C users" means), so the server's batch stays at C. The window over which rates
are computed is chosen afterwards from the completions (`steady_window`): it opens at the C-th
completion and closes `target` completions later. Once the last of those has arrived nothing more is
admitted and the requests still running are cut: their streams are closed, which SGLang answers by
aborting them (0.5.23 `tokenizer_manager.create_abort_task`, the StreamingResponse's background
task; the simulator aborts at once), so no drain is waited for. A cut request keeps the tokens that
arrived before the cut (the window counts those inside it) and is recorded with the error CUT, which
is neither an error nor a completion. `equal_length_levels` names the levels whose answers nearly
all had one length: their slots ran in waves.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

from harness.measure.timeline import Timeline
from harness.record.results import RequestRecord

CUT = "cut: still running when the measurement window closed"  # a cut request's error

# The share of a level's completions with one output length above which its slots finish in
# waves (docs/benchmark.md, "Equal lengths and waves").
EQUAL_LENGTH_SHARE = 0.9


def is_cut(error: str | None) -> bool:
    return error == CUT


Send = Callable[[Callable[[Timeline], None]], Awaitable[Timeline]]


async def keep_in_flight(
    send: Send, concurrency: int, stop_after: int, max_failures: int
) -> tuple[list[Timeline], list[Timeline]]:
    """Run `concurrency` slots of back-to-back requests (`send(on_start)` sends the next one)
    until `stop_after` requests completed (or `max_failures` failed: a server refusing every
    request must not keep the loop spinning), then cut the rest. Returns (every request sent,
    the cut ones); a failure of the server itself (raised by `send`) propagates."""
    started: list[Timeline] = []
    finished: set[int] = set()
    completed = failed = 0
    stop = asyncio.Event()

    async def slot() -> None:
        nonlocal completed, failed
        while not stop.is_set():
            line = await send(started.append)
            finished.add(id(line))
            if line.record.ok:
                completed += 1
            else:
                failed += 1
            if completed >= stop_after or failed >= max_failures:
                stop.set()  # and nothing else completes: the others are cut at once
                for task in tasks - {asyncio.current_task()}:
                    task.cancel()

    tasks: set[asyncio.Task[None]] = set()
    tasks.update(asyncio.create_task(slot()) for _ in range(concurrency))
    waiter = asyncio.create_task(stop.wait())
    try:
        pending = set(tasks)
        while pending and not stop.is_set():
            done, _ = await asyncio.wait({*pending, waiter}, return_when=asyncio.FIRST_COMPLETED)
            for task in done - {waiter}:
                pending.discard(task)
                if not task.cancelled():  # cancelled: cut when the window closed
                    task.result()  # the server's failure (ServerOOM, ServerCrashed) ends the run
    finally:
        for task in (*tasks, waiter):
            task.cancel()
        await asyncio.gather(*tasks, waiter, return_exceptions=True)
    cut = [line for line in started if id(line) not in finished]
    for line in cut:
        line.record.error = CUT
        if line.points:
            line.record.first_token_s = line.points[0][0]
    return started, cut


def steady_window(
    timelines: Sequence[Timeline], concurrency: int, completions: int
) -> tuple[float, float] | None:
    """The steady-state window of a run that kept `concurrency` requests in flight: from the
    C-th completion (every slot has turned over about once, so the ramp-up's lockstep, all C
    prefilled together at short contexts, is behind) to `completions` completions later (fewer
    when the run ended on failures). None without a completion after the ramp-up."""
    ends = sorted(t.record.end_s for t in timelines if t.record.ok)  # type: ignore[type-var]
    if len(ends) <= concurrency:
        return None
    return ends[concurrency - 1], ends[min(concurrency + completions, len(ends)) - 1]


def equal_length_levels(records: Sequence[RequestRecord]) -> dict[int, int]:
    """{level: the length} for the levels above 1 whose measured completions nearly all had one
    output length (every answer cut at max_tokens, or ignore_eos). Requests sent together then
    finish together, the replacements start together, and the slots stay in waves: a window's
    rate reads where the waves fall (the prefill of a whole wave, its decode, the client's
    turnaround for C requests at once) rather than a mixed steady state. Real SGLang does the
    same; only lengths of their own break the lockstep."""
    levels: dict[int, list[int]] = {}
    for r in records:
        if r.phase == "measure" and r.concurrency > 1 and r.ok:
            levels.setdefault(r.concurrency, []).append(int(r.completion_tokens or 0))
    found = {}
    for level, lengths in sorted(levels.items()):
        length, count = Counter(lengths).most_common(1)[0]
        if len(lengths) >= level and count >= EQUAL_LENGTH_SHARE * len(lengths):
            found[level] = length
    return found
