"""The host's load before a simulated sweep: a host busier than its cores distorts its timings.

The simulator keeps a scaled clock (engine.clock_scale) on the CPU it gets; with the 1-minute
load average above the core count (load 5.5 on 2 cores) its engine and the benchmark client
beside it get less than they need, the engine trails its clock and every rate reads low
(harness.measure.sim_timing warns per trial afterwards). Real SGLang's timings are the GPUs':
this check is the simulator's only.
"""

from __future__ import annotations

from omegaconf import DictConfig

from harness.measure.sim_timing import host_cores, host_load, overloaded
from sweep.preflight.check import Check


def check_load(cfg: DictConfig, load: float | None = None, cores: int | None = None) -> list[Check]:
    """One check on the simulator (the host's load against its cores); none on SGLang."""
    if cfg.engine.name != "sim":
        return []
    load = host_load() if load is None else load
    cores = host_cores() if cores is None else cores
    message = f"host load {load:.1f} on {cores} cores"
    if not overloaded(load, cores):
        return [Check("host load", "pass", message)]
    return [
        Check(
            "host load",
            "warn",
            f"{message}: the simulator will trail its clock at engine.clock_scale="
            f"{cfg.engine.clock_scale:g} and its timings read low (SIMULATED timing distorted)",
            "wait for the load to fall below the core count, or lower engine.clock_scale "
            '(docs/simulator.md, "Falling behind the clock")',
        )
    ]
