"""Whether a simulated trial's timings are the simulator's model or the host's CPU, run by run.

The simulator runs on a scaled clock (engine.clock_scale virtual seconds per wall second) and
measures after every engine step how far its schedule trails that clock (`harness.sim.clock.Lag`);
`/server_info`'s `simulator` key reports it since the last flush (`behind_share`: virtual seconds
behind over virtual seconds of work). A host busier than its cores (load 5.5 on 2) starves the
engine, and its rates then read low by about that share: a property of the machine, not of the
configuration. The count starts afresh at every flush, so it is read after each measured run,
before the next run's flush, and the worst run is kept: the last run alone can look fine after an
earlier one fell behind.

The host's 1-minute load average is read at each run's end beside it: over one per core the
benchmark client and the simulator share too little CPU even where the engine kept its clock.

Simulator-only: SGLang has no virtual clock and no `simulator` key, and a trial on it reads
nothing here (`SimulatorTiming.reads` is False), so there is nothing to report.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.measure.clock import BEHIND_WARN_SHARE, simulator_behind

# The 1-minute load average per core above which the host is overloaded for a simulation (the
# same line sweep.preflight warns at before a simulated sweep starts).
OVERLOAD_PER_CORE = 1.0


def host_load() -> float:
    """The host's 1-minute load average (runnable and waiting processes, all of the host's)."""
    return os.getloadavg()[0]


def host_cores() -> int:
    return os.cpu_count() or 1


def overloaded(load: float, cores: int) -> bool:
    return load > OVERLOAD_PER_CORE * cores


@dataclass
class SimulatorTiming:
    """The worst run's lag behind the simulator's clock and the busiest host load seen."""

    reads: bool  # a simulated engine: read /server_info after each run
    load: Callable[[], float] | None = None  # None: host_load
    cores: int = field(default_factory=host_cores)
    behind_share: float = 0.0  # the worst run's share behind the clock (0: kept up)
    behind_run: int | None = None  # which run (1-based) it was
    max_load: float | None = None
    runs: int = 0

    def after_run(self, info: dict[str, Any]) -> None:
        """After a measured run, before the next flush: its /server_info ({} if none came)."""
        if not self.reads:
            return
        self.runs += 1
        share = float((info.get("simulator") or {}).get("behind_share") or 0.0)
        if share > self.behind_share:
            self.behind_share, self.behind_run = share, self.runs
        load = (self.load or host_load)()
        self.max_load = load if self.max_load is None else max(self.max_load, load)

    @property
    def behind(self) -> bool:
        """Trailed its clock past BEHIND_WARN_SHARE in some run: its rates read low."""
        return simulator_behind({"simulator": {"behind_share": self.behind_share}}) is not None

    @property
    def host_overloaded(self) -> bool:
        return self.max_load is not None and overloaded(self.max_load, self.cores)

    def warnings(self) -> list[str]:
        """`simulator_behind` (docs/simulator.md, "Falling behind the clock") and, where the
        engine kept up on a host busier than its cores, `host_overloaded`."""
        if self.behind:
            return ["simulator_behind"]
        return ["host_overloaded"] if self.host_overloaded else []

    def metrics(self) -> dict[str, float]:
        """The worst run's share, the busiest load and the cores, for result.json and MLflow."""
        if not self.reads or self.runs == 0:
            return {}
        out = {"sim_behind_share": round(self.behind_share, 4), "host_cores": float(self.cores)}
        if self.max_load is not None:
            out["host_load_1m"] = round(self.max_load, 2)
        return out


__all__ = ["BEHIND_WARN_SHARE", "OVERLOAD_PER_CORE", "SimulatorTiming", "overloaded"]
