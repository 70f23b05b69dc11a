"""The benchmark client's own CPU time per measured run, and when the client is the bottleneck.

One client process runs one event loop on one core: every chunk of every stream is read, parsed
and timed there. If that loop is busy most of a run, chunks wait in the socket before they are
timed (ITL and TTFT read high) and fewer requests are replaced in time (tok/s reads low): the
client, not the server, is then what was measured. `client_bound` flags it (docs/benchmark.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from harness.record.results import RunSummary

# A run's client CPU over its wall time at or above this share of one core warns `client_bound`:
# one asyncio loop cannot use more than one core, and a loop busy 80% of the time already holds
# a chunk back for a noticeable share of its interval (queueing grows as 1 / (1 - busy)).
CLIENT_BOUND_UTIL = 0.8


@dataclass
class CpuMeter:
    """Process CPU seconds (user + system, all threads) and wall seconds since `start`."""

    cpu0: float
    wall0: float

    @classmethod
    def start(cls) -> CpuMeter:
        return cls(time.process_time(), time.monotonic())

    def record(self, summary: RunSummary) -> RunSummary:
        """Fill the run's client_cpu_* fields from what this process spent since `start`."""
        cpu = time.process_time() - self.cpu0
        wall = time.monotonic() - self.wall0
        summary.client_cpu_s = round(cpu, 6)
        summary.client_cpu_util = round(cpu / wall, 4) if wall > 0 else None
        tokens = summary.output_tokens
        summary.client_cpu_s_per_1k_tokens = round(1000 * cpu / tokens, 6) if tokens else None
        return summary


def client_bound(runs: Iterable[RunSummary]) -> bool:
    """Whether any measured run kept the client's core CLIENT_BOUND_UTIL busy or more."""
    return any((r.client_cpu_util or 0.0) >= CLIENT_BOUND_UTIL for r in runs)
