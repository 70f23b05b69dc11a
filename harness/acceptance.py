"""A measured run's accept length, for that run's window only, from the best source offered.

Best first: per-request meta (`/generate` meta_info, chat `sglext.spec_tokens_details`: exact
and per request), `/metrics` counter deltas over the window (SGLang >= 0.5.10), the decode log
lines printed inside the window, and last `/server_info`'s running average, which covers the
window only when the flush before the run reset it (else it is the server's lifetime, and the
source says so).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import httpx

from harness.logs import parse_decode_line
from harness.metrics import Timeline, accept_from_counters, accept_from_requests, prometheus_values
from harness.sglang import SERVER_INFO_PATHS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Window:
    """What is known as a run starts: whether the flush before it worked, the server's counters
    after the flush (read after it, so the delta is this run's), and the wall time the decode
    log lines are compared with."""

    flushed: bool
    wall_start: datetime
    counters: dict[str, float] = field(default_factory=dict)


async def read_counters(client: httpx.AsyncClient) -> dict[str, float]:
    """/metrics as {name: value}; empty when the server offers none."""
    try:
        response = await client.get("/metrics")
    except httpx.HTTPError:
        return {}
    return prometheus_values(response.text) if response.status_code == 200 else {}


async def open_window(client: httpx.AsyncClient, flushed: bool, *, speculative: bool) -> Window:
    counters = await read_counters(client) if speculative else {}
    return Window(flushed=flushed, wall_start=datetime.now(), counters=counters)


async def window_accept_length(
    client: httpx.AsyncClient,
    window: Window,
    timelines: list[Timeline],
    server_log: Path | None,
) -> tuple[float | None, str | None]:
    """The run's accept length and the name of its source (None, None when none has it)."""
    value = accept_from_requests([t.record for t in timelines])
    if value is not None:
        return value, "request_meta"
    requests = sum(1 for t in timelines if t.record.ok)
    if window.counters:
        value = accept_from_counters(window.counters, await read_counters(client), requests)
        if value is not None:
            return value, "metrics"
    value = accept_from_log(server_log, window.wall_start)
    if value is not None:
        return value, "log"
    return await accept_from_server_info(client, window.flushed)


def accept_from_log(server_log: Path | None, since: datetime) -> float | None:
    """The mean accept length of the decode log lines stamped at or after `since`."""
    if server_log is None or not server_log.is_file():
        return None
    values = []
    for line in server_log.read_text(errors="replace").splitlines():
        stats = parse_decode_line(line)
        if stats and stats.accept_len is not None and stats.timestamp:
            stamp = datetime.fromisoformat(stats.timestamp)
            if stamp >= since.replace(microsecond=0):
                values.append(stats.accept_len)
    return sum(values) / len(values) if values else None


async def accept_from_server_info(
    client: httpx.AsyncClient, flushed: bool
) -> tuple[float | None, str | None]:
    try:
        for path in SERVER_INFO_PATHS:  # the current path first, then the 0.5.1 one
            response = await client.get(path)
            if response.status_code != 404:
                break
        info = response.json()
    except (httpx.HTTPError, json.JSONDecodeError) as exc:
        log.warning("could not read accept length: %s", exc)
        return None, None
    value = (info.get("internal_states") or [{}])[0].get("avg_spec_accept_length")
    if value is None:
        return None, None
    # Without a successful flush the counters span the server's lifetime, not this run.
    return float(value), "server_info" if flushed else "server_info_lifetime"
