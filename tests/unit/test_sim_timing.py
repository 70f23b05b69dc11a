"""A simulated trial whose simulator trailed its clock, or ran on an overloaded host, says so: per
run (the worst, not only the last), in its result and on the console, and preflight warns first.
Real SGLang reports no simulator clock: nothing is read, nothing said."""

from __future__ import annotations

from omegaconf import OmegaConf

from harness.measure.sim_timing import SimulatorTiming
from harness.record.results import Outcome, RunSummary, TrialResult
from harness.sim.clock import Lag
from sweep.preflight.load import check_load
from sweep.readout.console import simulated_timing_line
from tests.unit.test_sim_behind import StoppedClock


def _server_info(lag: Lag) -> dict:
    return {"simulator": {"clock_scale": 50.0, **lag.report()}}


def _run(clock: StoppedClock, lag: Lag, steps: int, late_s: float) -> None:
    """A flush (the count starts afresh), then `steps` 1-second steps each ending `late_s` late
    on the clock beyond the one before: a starved engine falls further behind every step."""
    lag.reset()
    start = clock.t
    for step in range(1, steps + 1):
        clock.t = start + step * (1.0 + late_s)
        lag.observe(start + step, 1.0)


def test_a_run_that_trailed_its_clock_is_kept_though_the_last_kept_up():
    clock, load = StoppedClock(), iter([5.5, 1.2])
    lag = Lag(clock)
    timing = SimulatorTiming(reads=True, load=lambda: next(load), cores=2)
    _run(clock, lag, steps=10, late_s=0.5)  # 5 s behind after 10 s of work
    timing.after_run(_server_info(lag))
    _run(clock, lag, steps=10, late_s=0.0)  # on time: its own share is 0
    timing.after_run(_server_info(lag))
    assert _server_info(lag)["simulator"]["behind_share"] == 0.0
    assert timing.behind_run == 1 and timing.warnings() == ["simulator_behind"]
    assert timing.metrics() == {"sim_behind_share": 0.5, "host_cores": 2.0, "host_load_1m": 5.5}


def test_a_simulator_that_kept_up_on_a_host_busier_than_its_cores_is_overloaded():
    clock = StoppedClock()
    lag = Lag(clock)
    timing = SimulatorTiming(reads=True, load=lambda: 5.5, cores=2)
    _run(clock, lag, steps=10, late_s=0.002)  # 0.2% behind: within the 5% it may trail
    timing.after_run(_server_info(lag))
    assert timing.warnings() == ["host_overloaded"]
    quiet = SimulatorTiming(reads=True, load=lambda: 1.9, cores=2)
    quiet.after_run(_server_info(lag))
    assert quiet.warnings() == []


def test_real_sglang_has_no_simulator_clock_and_gets_nothing():
    timing = SimulatorTiming(reads=False, load=lambda: 9.0, cores=2)
    timing.after_run({"version": "0.5.23"})
    assert timing.warnings() == [] and timing.metrics() == {}
    # a server that reports no simulator key (SGLang, or a simulator without the count) reads 0
    told = SimulatorTiming(reads=True, load=lambda: 0.5, cores=2)
    told.after_run({"version": "0.5.23"})
    assert told.warnings() == [] and told.metrics()["sim_behind_share"] == 0.0


def _result(warnings: list[str], metrics: dict[str, float], concurrency: int = 1) -> TrialResult:
    runs = [RunSummary(1, concurrency, 3, 0, 6000, 80.0, 80.0, 80.0, 0.1, None, None)]
    return TrialResult(
        name="trial_0000",
        role="trial",
        outcome=Outcome.OK,
        engine="sim",
        simulated=True,
        clock_scale=50.0,
        params={},
        folder="/tmp/trial_0000",
        warnings=warnings,
        metrics=metrics,
        runs=runs,
    )


def test_the_console_says_how_far_it_trailed_and_the_hosts_load():
    metrics = {"sim_behind_share": 0.123, "host_load_1m": 5.5, "host_cores": 2.0}
    line = simulated_timing_line(_result(["simulator_behind"], metrics))
    assert line is not None and line.startswith(
        "SIMULATED timing distorted: the simulator trailed its clock by 12% "
        "(host load 5.5 on 2 cores)"
    )
    assert "engine.clock_scale" in line
    overloaded = simulated_timing_line(
        _result(["host_overloaded"], {**metrics, "sim_behind_share": 0.01})
    )
    assert overloaded is not None and overloaded.startswith(
        "SIMULATED timing may be distorted: host load 5.5 on 2 cores"
    )
    assert simulated_timing_line(_result([], metrics)) is None


def test_preflight_warns_before_a_simulated_sweep_on_an_overloaded_host():
    sim = OmegaConf.create({"engine": {"name": "sim", "clock_scale": 50.0}})
    (warned,) = check_load(sim, load=5.5, cores=2)
    assert warned.status == "warn" and warned.message.startswith("host load 5.5 on 2 cores")
    assert "engine.clock_scale" in warned.fix
    (fine,) = check_load(sim, load=1.5, cores=2)
    assert fine.status == "pass"
    sglang = OmegaConf.create({"engine": {"name": "sglang", "clock_scale": 1.0}})
    assert check_load(sglang, load=5.5, cores=2) == []  # a GPU's timings, not the simulator's


def test_the_closing_table_counts_the_trials_whose_timing_the_host_distorted():
    """Only where it can move a number: several requests in flight meet the engine's batches on
    the wall clock; at concurrency 1 every chunk is re-stamped on the simulator's clock."""
    from rich.console import Console

    from sweep.readout.trials_table import summary_table

    lag = {"sim_behind_share": 0.12, "host_load_1m": 5.5, "host_cores": 2.0}
    behind = _result(["simulator_behind"], lag, concurrency=32)
    single_stream = _result(["simulator_behind"], lag)
    fine = _result([], {"sim_behind_share": 0.01, "host_load_1m": 0.9, "host_cores": 2.0})
    out = Console(width=200, record=True)
    out.print(summary_table([behind, single_stream, fine], None, simulated=True))
    text = " ".join(out.export_text().split())
    assert (
        "SIMULATED timing distorted in 1 of 3 trials: the simulator trailed its clock by up to "
        "12% (host load up to 5.5 on 2 cores)"
    ) in text
    clean = Console(width=200, record=True)
    clean.print(summary_table([fine], None, simulated=True))
    assert "distorted" not in clean.export_text()
