"""A measured run's accept length, for that run's window only, from the best source offered.

Best first: per-request meta (`/generate` meta_info, chat `sglext.spec_tokens_details`: exact
and per request), `/metrics` counter deltas over the window (SGLang >= 0.5.10; they hold the
requests finished inside the window, whole: `accept_from_counters`), the decode log
lines printed inside the window, and last `/server_info`'s running average, which covers the
window only when the flush before the run reset it (else it is the server's lifetime, and the
source says so).

Acceptance by output position (`accept_by_position`) comes from the stream's chunk structure:
with SGLang's default --stream-interval 1 each chunk after the first (prefill's token) is one
verify step, carrying that step's accepted drafts + the bonus token (0.5.23
scheduler_components/output_streamer.py `accept`). Per-request speculative meta exists only on
the finished chunk (tokenizer_manager.py `_calculate_spec_decoding_metrics` under
`state.finished`), so it cannot place a step in the output; it checks the structure instead.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import httpx

from harness.measure.prometheus import prometheus_values
from harness.measure.timeline import Timeline
from harness.record.results import RequestRecord
from harness.server.logs import parse_decode_line
from harness.sglang.surfaces import SERVER_INFO_PATHS

log = logging.getLogger(__name__)
POSITION_WINDOW = 256  # output tokens per acceptance-by-position window
DECAY_WARNING = 0.25  # the last window's acceptance this far below the first's: a warning


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
    if window.counters:
        value = accept_from_counters(window.counters, await read_counters(client))
        if value is not None:
            return value, "metrics"
    value = accept_from_log(server_log, window.wall_start)
    if value is not None:
        return value, "log"
    return await accept_from_server_info(client, window.flushed)


def accept_from_requests(records: Sequence[RequestRecord]) -> float | None:
    """Per-request server meta: tokens from verify steps per verify step.

    SGLang's own `spec_accept_length` divides all completion tokens, so the first one (which
    prefill produced) inflates short requests; leaving it out matches the decode log line and
    the /metrics counters, and a bypassed drafter reads exactly 1.0."""
    with_meta = [r for r in records if r.ok and r.verify_ct]
    if not with_meta:
        return None
    return sum((r.completion_tokens or 1) - 1 for r in with_meta) / sum(
        r.verify_ct or 0 for r in with_meta
    )


def accept_from_counters(before: dict[str, float], after: dict[str, float]) -> float | None:
    """(generated - first tokens from prefill) / verify calls, from /metrics counter deltas.

    SGLang 0.5.23 moves all three counters once per finished request, by its whole count
    (`TokenizerMetricsCollector.observe_one_finished_request`), so the deltas cover the requests
    that FINISHED between the two reads, never a part of one: a request still running at the
    close read (at C > 1, the ones cut when the window closes) is in none of them, and one that
    started before the first read would be in all of them whole (none does: the window opens
    after an idle flush). The prefill tokens subtracted are therefore the `num_requests_total`
    delta, the same requests, not the client's count: a cut request counts once its abort
    reaches the scheduler (0.5.23 `create_abort_task` sends it 2 s after the stream closed), so
    whether it is in the deltas depends on timing, and only the counters know. No request
    counter (a server without it): None, and the next source answers."""

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    verify = delta("sglang:spec_verify_calls_total")
    generated = delta("sglang:generation_tokens_total")
    requests = delta("sglang:num_requests_total")
    if verify <= 0 or generated <= 0 or "sglang:num_requests_total" not in after:
        return None
    return (generated - requests) / verify


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


def accept_by_position(timelines: list[Timeline], window: int = POSITION_WINDOW) -> list[float]:
    """Accept length (tokens per verify step) per `window` output tokens, over all requests.

    A step belongs to the window where its first token falls. Used: requests whose token counts
    are exact per chunk and whose chunks are their verify steps (chunks - 1 == verify_ct where
    the server reports it). Not so with --stream-interval > 1 or when the tokenizer manager
    coalesces a lagging client's chunks (then a chunk is several steps): such a request is left
    out, and without the verify count (0.5.1's chat) the structure is taken on trust."""
    tokens: dict[int, int] = {}
    steps: dict[int, int] = {}
    for line in timelines:
        record = line.record
        if not record.ok or not line.exact or len(line.points) < 2:
            continue
        if record.verify_ct is not None and record.verify_ct != len(line.points) - 1:
            continue
        for (_, before), (_, after) in zip(line.points, line.points[1:], strict=False):
            index = before // window
            tokens[index] = tokens.get(index, 0) + after - before
            steps[index] = steps.get(index, 0) + 1
    curve = []
    for index in range(max(steps, default=-1) + 1):
        if not steps.get(index):
            break  # a gap: no request reached it
        curve.append(tokens[index] / steps[index])
    return curve


def decays(curve: list[float]) -> bool:
    """Whether the last window's acceptance is more than DECAY_WARNING below the first's."""
    return len(curve) >= 2 and curve[-1] < (1 - DECAY_WARNING) * curve[0]
