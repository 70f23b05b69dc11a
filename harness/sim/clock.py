"""The simulator's virtual clock: `clock_scale` virtual seconds per wall second while the engine
works, set back when an idle engine picks up what arrived (so the event loop's wall latency, CPU
and not the simulated server, never reaches the chunk stamps scaled:
harness.measure.clock.restamp)."""

from __future__ import annotations

import asyncio
import logging
import time

log = logging.getLogger("sglang.scheduler")


# The event loop times a wall wait to the millisecond (epoll's timeout, libuv's timers), so a step
# woke up to 1 ms late: at clock scale 1 that is inter-token jitter a GPU does not have (ITL p99
# 12.0 ms against the model's 11.17, benchmarks/sim_clock_fidelity.py). A wait of at least
# PRECISE_MIN_S sleeps until PRECISE_SPIN_S before its deadline and then yields to the loop until
# the deadline (a few percent of a core at scale 1). Shorter waits, a fast clock's, sleep as
# before: there the chunks' virtual stamps carry the latencies, not their wall arrival
# (harness.measure.clock.restamp), so spinning would only take CPU from the client on the same
# cores.
PRECISE_MIN_S = 0.002
PRECISE_SPIN_S = 0.0012


class VirtualClock:
    def __init__(self, scale: float):
        self.scale = scale
        self._t0 = time.monotonic()
        self._offset = 0.0

    def now(self) -> float:
        return (time.monotonic() - self._t0) * self.scale + self._offset

    def client_time(self, mark: tuple[float, float]) -> float:
        """Virtual time now if the time since `mark` (virtual, wall) ran at wall rate: the client's
        share (reading the response, sending the next request) is wall time against a real
        server, so on the virtual clock it must not be `scale` times longer."""
        return min(self.now(), mark[0] + time.monotonic() - mark[1])

    def rebase(self, t: float) -> None:
        """Set the clock back to `t` (never forward): an idle engine picks up what woke it."""
        self._offset -= max(self.now() - t, 0.0)

    async def sleep_until(self, t: float) -> None:
        delay = (t - self.now()) / self.scale
        if delay <= 0:
            return
        if delay < PRECISE_MIN_S:
            await asyncio.sleep(delay)
            return
        wake = time.monotonic() + delay
        await asyncio.sleep(delay - PRECISE_SPIN_S)
        while time.monotonic() < wake:  # yield until the deadline: other tasks keep running
            await asyncio.sleep(0)


class InstantClock(VirtualClock):
    """No waiting: the engine runs through simulated time as fast as the CPU allows (oracle)."""

    def __init__(self) -> None:
        super().__init__(1.0)
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def client_time(self, mark: tuple[float, float]) -> float:
        return self.t

    def rebase(self, t: float) -> None:
        pass

    async def sleep_until(self, t: float) -> None:
        self.t = max(self.t, t)
        await asyncio.sleep(0)


# The engine trailed its clock by more than this share of the work it did since the last flush:
# the rates it served are that much below its model's (the CPU, not the simulated server).
BEHIND_WARN_SHARE = 0.05
BEHIND_WARN_MIN_S = (
    1.0  # virtual seconds: a single CPU hiccup at a fast clock is not falling behind
)


class Lag:
    """How far the engine's schedule trails its virtual clock. Iteration deadlines are absolute,
    so a hiccup is made up (the next sleeps are shorter); an engine whose steps cost more wall
    time than `step / clock_scale` (many running requests at a fast clock on few cores) falls
    further behind with every step, and serves less than its model says. Reported under
    /server_info's `simulator` key (behind_*), warned once per flush period in the log."""

    def __init__(self, clock: VirtualClock):
        self.clock = clock
        self.reset()

    def reset(self) -> None:
        self.now_s = self.max_s = self.work_s = 0.0
        self.warned = False

    def observe(self, t: float, seconds: float) -> None:
        """After a step of `seconds` whose deadline was `t`: the clock's lead over it."""
        self.work_s += seconds
        self.now_s = max(self.clock.now() - t, 0.0)
        if self.now_s <= self.max_s:
            return
        self.max_s = self.now_s
        if not self.warned and self.max_s > BEHIND_WARN_MIN_S and self.share > BEHIND_WARN_SHARE:
            self.warned = True
            log.warning(
                "simulator falling behind its clock: %.2f s behind after %.2f s of work (%.0f%%)"
                " at clock scale %g; it serves less than its model (a lower --sim-clock-scale "
                "keeps up: docs/simulator.md)",
                self.max_s,
                self.work_s,
                100 * self.share,
                self.clock.scale,
            )

    @property
    def share(self) -> float:
        return self.max_s / self.work_s if self.work_s > 0 else 0.0

    def report(self) -> dict[str, float]:
        return {
            "behind_s": round(self.now_s, 6),
            "behind_max_s": round(self.max_s, 6),
            "behind_work_s": round(self.work_s, 6),
            "behind_share": round(self.share, 6),
        }
