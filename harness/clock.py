"""The one place where wall-clock durations become server-clock durations.

The simulator may run its virtual clock faster than wall time (so a quick-start sweep fits in
minutes) and reports the factor in `/server_info` (`simulator.clock_scale`). Real SGLang has no
such key, so its scale is 1. Every duration the harness reports passes through `ServerClock`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ServerClock:
    scale: float = 1.0

    @classmethod
    def from_server_info(cls, info: dict[str, Any]) -> ServerClock:
        scale = float((info.get("simulator") or {}).get("clock_scale", 1.0))
        if scale <= 0:
            raise ValueError(f"server reported a non-positive clock scale: {scale}")
        return cls(scale)

    def seconds(self, wall_seconds: float) -> float:
        """Convert a wall-clock duration into the server's clock."""
        return wall_seconds * self.scale

    @staticmethod
    def now() -> float:
        """Monotonic wall time; convert differences of it with `seconds`."""
        return time.monotonic()
