"""The flush before a measured run, known to have happened (docs/reliability.md).

SGLang refuses `/flush_cache` with 400 until its scheduler is fully idle, which it is not yet
right after the last response (the overlap scheduler's last step is still in flight). Each
attempt therefore asks SGLang to wait up to FLUSH_WAIT_S for idle server-side (`?timeout=`,
0.5.22+; an older server ignores it and answers at once), and a refused attempt is retried after
FLUSH_BACKOFF_S, doubled each time, FLUSH_ATTEMPTS times in all.
"""

from __future__ import annotations

import asyncio
import logging

import httpx

from harness.sglang.surfaces import FLUSH_TIMEOUT_PARAM

log = logging.getLogger("harness.measure.bench")  # where the run's other lines are
FLUSH_WAIT_S = 10.0
FLUSH_ATTEMPTS = 5
FLUSH_BACKOFF_S = 0.25


async def flush_when_idle(client: httpx.AsyncClient) -> tuple[bool, int]:
    """(flushed, attempts): True once a flush was answered 200; False (and a warning) if every
    attempt was refused, the coming run's counters then spanning earlier runs."""
    params = {FLUSH_TIMEOUT_PARAM: FLUSH_WAIT_S}
    timeout = httpx.Timeout(FLUSH_WAIT_S + 30.0, connect=30.0)
    backoff, why = FLUSH_BACKOFF_S, ""
    for attempt in range(1, FLUSH_ATTEMPTS + 1):
        try:
            response = await client.post("/flush_cache", params=params, timeout=timeout)
            if response.status_code == 200:
                return True, attempt
            why = f"{response.status_code} {response.text.strip()[:120]!r}"
        except httpx.HTTPError as exc:
            why = f"{type(exc).__name__}: {exc}"
        log.info("flush_cache attempt %d refused: %s", attempt, why)
        if attempt < FLUSH_ATTEMPTS:
            await asyncio.sleep(backoff)
            backoff *= 2
    log.warning(
        "flush_cache failed after %d attempts (%s): the coming run's cache and speculative "
        "counters span earlier runs",
        FLUSH_ATTEMPTS,
        why,
    )
    return False, FLUSH_ATTEMPTS
