"""The server watch beside every benchmark step: a server that dies mid-step ends the step at once.

`watched(step, watch_server(check))` runs a step beside a watch that calls `check` (which raises
the server's failure: ServerOOM, ServerCrashed) every WATCH_INTERVAL_S, so a server that dies
mid-run ends the benchmark at once, not when its requests time out. `settle(check)` gives a server
whose requests just failed SETTLE_S to show that it is dying. A cancellation of the step's caller
(Ctrl-C) always reaches it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

WATCH_INTERVAL_S = 0.2  # how often the server's process and log are checked during a benchmark
# After a run whose requests failed, how long a dying server gets to show it (exit, or a fatal
# line outliving the harness's grace): a request refused by a server that is being killed must
# not leave a run of errors that reads as a measurement.
SETTLE_S = 1.0
T = TypeVar("T")


async def cancel(*tasks: asyncio.Task[Any]) -> None:
    """Cancel `tasks` and wait until they ended. Through asyncio.wait, not `await task` under
    suppress(CancelledError): that would also swallow a cancellation of the caller itself, and a
    Ctrl-C landing there was lost (the sweep went on and finished as if nothing had been asked)."""
    for task in tasks:
        task.cancel()
    await asyncio.wait(tasks)


async def watched(step: Coroutine[Any, Any, T], watch: Coroutine[Any, Any, None]) -> T:
    """Run `step` beside `watch` (`watch_server`: it ends only by raising the server's failure)
    and return the step's result; if the watch ended first, the step is cancelled and the
    server's failure raised."""
    task = asyncio.create_task(step)
    watcher = asyncio.create_task(watch)
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # this step itself (Ctrl-C: asyncio.Runner cancels it)
        await cancel(task, watcher)
        raise
    step_done = task.done()
    await cancel(task, watcher)
    if not step_done:
        watcher.result()  # raises the server's failure (ServerOOM, ServerCrashed)
    return task.result()


async def watch_server(check_server: Callable[[], None]) -> None:
    """Check the server every WATCH_INTERVAL_S until the check raises."""
    while True:
        await asyncio.sleep(WATCH_INTERVAL_S)
        check_server()


async def settle(check_server: Callable[[], None]) -> None:
    """Poll the server for SETTLE_S: a dead one raises (ServerOOM, ServerCrashed) here."""
    deadline = asyncio.get_running_loop().time() + SETTLE_S
    while asyncio.get_running_loop().time() < deadline:
        check_server()
        await asyncio.sleep(0.05)
    check_server()
