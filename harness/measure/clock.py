"""The one place where wall-clock durations become server-clock durations.

The simulator may run its virtual clock faster than wall time (so a quick-start sweep fits in
minutes) and reports the factor in `/server_info` (`simulator.clock_scale`). Real SGLang has no
such key, so its scale is 1. Every duration the harness reports passes through `ServerClock`.

Scaling a wall duration also scales the client's own share of it (HTTP, JSON, the event loop):
a few wall milliseconds per request read as 50x that at clock scale 50. So the simulator stamps
each chunk with its virtual time since it received the request, and
`harness.measure.metrics.restamp` keeps the server's share on the virtual clock and the rest at wall
rate (`simulated` says whether to: only a server that reports a simulator clock is read that way).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any


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
