"""A Ctrl-C during a benchmark step is never lost: asyncio.Runner turns the first SIGINT into a
cancellation of the running step, and winding the step's server watch down must not swallow it
(once, the sweep then finished with exit code 0 as if nothing had been asked)."""

from __future__ import annotations

import asyncio

import pytest

from harness.measure.watchdog import watched


def test_a_cancellation_while_the_watch_winds_down_reaches_the_caller():
    async def main() -> int:
        outer = asyncio.current_task()
        assert outer is not None

        async def watch() -> None:
            try:
                await asyncio.sleep(3600)
            finally:
                outer.cancel()  # the Ctrl-C lands while the finished step stops its watch

        async def step() -> int:
            return 1

        return await watched(step(), watch())

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())


def test_the_step_result_and_the_servers_failure_still_come_through():
    async def idle_watch() -> None:
        await asyncio.sleep(3600)

    async def step() -> int:
        await asyncio.sleep(0)
        return 7

    assert asyncio.run(watched(step(), idle_watch())) == 7

    async def dead_server() -> None:
        raise RuntimeError("server exited")

    async def long_step() -> int:
        await asyncio.sleep(3600)
        return 0

    with pytest.raises(RuntimeError, match="server exited"):
        asyncio.run(watched(long_step(), dead_server()))
