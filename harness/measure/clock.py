"""The one place where wall-clock durations become server-clock durations.

The simulator may run its virtual clock faster than wall time (so a quick-start sweep fits in
minutes) and reports the factor in `/server_info` (`simulator.clock_scale`). Real SGLang has no
such key, so its scale is 1. Every duration the harness reports passes through `ServerClock`.

Scaling a wall duration also scales the client's own share of it (HTTP, JSON, the event loop):
a few wall milliseconds per request read as 50x that at clock scale 50. So the simulator stamps
each chunk with its virtual time since it received the request, and `restamp` keeps the server's
share on the virtual clock and the rest at wall rate (`simulated` says whether to: only a server
that reports a simulator clock is read that way); `close_client_gaps` does the same for the gaps
between a concurrency-1 run's requests, which are the client's alone. `simulator_behind` says when
a simulator's engine could not keep up with its own clock.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.measure.timeline import Timeline


@dataclass(frozen=True)
class ServerClock:
    scale: float = 1.0
    simulated: bool = False  # the server reported a simulator clock (its chunks carry stamps)

    @classmethod
    def from_server_info(cls, info: dict[str, Any]) -> ServerClock:
        simulator = info.get("simulator") or {}
        scale = float(simulator.get("clock_scale", 1.0))
        if scale <= 0:
            raise ValueError(f"server reported a non-positive clock scale: {scale}")
        return cls(scale, simulated="clock_scale" in simulator)

    def seconds(self, wall_seconds: float) -> float:
        """Convert a wall-clock duration into the server's clock."""
        return wall_seconds * self.scale

    @staticmethod
    def now() -> float:
        """Monotonic wall time; convert differences of it with `seconds`."""
        return time.monotonic()


def restamp(line: Timeline, scale: float) -> None:
    """Put a simulated request's times on the server's clock without scaling the client's share.

    The client's scaled time for chunk i, P_i - start, is `scale` x its wall time. The server's
    share of that wall time is stamp_i / scale; the rest (sending, parsing, the event loop) is
    the client's own and is kept at wall rate, as it would be against a server at scale 1:

        P_i' = start + stamp_i + (P_i - start - stamp_i) / scale

    With the simulator's wall seconds per chunk (W_i, `walls`), the client's share is exactly
    what lies outside them, (P_i - start) / scale - W_i: the simulator's own timer lateness and
    CPU (which at scale 1 a real server does not have in its stamps either) stay out of it.

    The identity at scale 1. The end (after the last chunk: usage, [DONE]) is the client's alone.
    A timeline without a stamp per point is left as it is."""
    record = line.record
    line.scaled_end_s = record.end_s
    if scale == 1 or not line.points or len(line.stamps) != len(line.points):
        return
    start, points, elapsed = record.start_s, [], 0.0
    walls = line.walls if len(line.walls) == len(line.points) else None
    for i, ((t, tokens), stamp) in enumerate(zip(line.points, line.stamps, strict=True)):
        elapsed = max(stamp, elapsed)  # never before the previous chunk
        if walls is not None:
            client = max((t - start) / scale - walls[i], 0.0)
        else:
            client = max(t - start - elapsed, 0.0) / scale
        at = start + elapsed + client
        points.append((max(at, points[-1][0]) if points else at, tokens))
    if record.end_s is not None:
        record.end_s = points[-1][0] + max(record.end_s - line.points[-1][0], 0.0) / scale
    line.points = points
    record.first_token_s = points[0][0]


def close_client_gaps(lines: Sequence[Timeline], scale: float) -> None:
    """Put the gaps between a simulated server's sequential requests on the server's clock.

    Between one request's end and the next one's send the time is the client's (the answer's
    last bytes, the next request built and sent): wall time against a real server, and the
    simulator's idle engine counts it at wall rate too (harness/sim/clock.py `client_time`). On
    the client's scaled clock it read `scale` times over, so a concurrency-1 run's span, and its
    output tok/s, held 50x the client's gaps: 76.7 tok/s against the model's 88.7 at clock scale
    50 (benchmarks/client_fidelity.py). Each request after the first is moved earlier so that its
    gap to the one before it is that gap's wall time, after `restamp` (which keeps each request's
    own client share at wall rate). Requests that overlap, or follow one without an end, keep
    the shift so far. The identity at scale 1."""
    if scale == 1:
        return
    shift, previous = 0.0, None
    for line in sorted(lines, key=lambda x: x.record.start_s):
        record = line.record
        end = previous.record.end_s if previous is not None else None  # shifted already
        before = previous.scaled_end_s if previous is not None else None
        if end is not None and before is not None and record.start_s >= before:  # sequential
            shift = end + (record.start_s - before) / scale - record.start_s
        if shift:
            record.start_s += shift
            if record.first_token_s is not None:
                record.first_token_s += shift
            if record.end_s is not None:
                record.end_s += shift
            line.points = [(t + shift, tokens) for t, tokens in line.points]
        previous = line


# A simulator whose engine trailed its clock by more than this share of its work (since the last
# flush: the last run) served less than its model: the `simulator_behind` warning.
BEHIND_WARN_SHARE = 0.05


def simulator_behind(info: dict[str, Any]) -> float | None:
    """The share by which a simulator's engine fell behind its clock over the last run, when over
    BEHIND_WARN_SHARE (its rates then read low: the machine's CPU, not the simulated server);
    None when it kept up, and for real SGLang (no `simulator` key: a real server has no virtual
    clock to fall behind). The simulator reports it as `simulator.behind_share`."""
    share = float((info.get("simulator") or {}).get("behind_share") or 0.0)
    return share if share > BEHIND_WARN_SHARE else None
