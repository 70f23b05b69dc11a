"""A simulator that falls behind its clock says so (/server_info `simulator.behind_*`, a log
warning) and the harness warns `simulator_behind`: its rates read low because of the machine's
CPU, not the simulated server (docs/simulator.md)."""

from __future__ import annotations

import asyncio
import logging
import time

from harness.measure.clock import simulator_behind
from harness.sim.clock import Lag, VirtualClock
from tests.unit.test_sim_stamps import _engine


class StoppedClock(VirtualClock):
    def __init__(self) -> None:
        super().__init__(50.0)
        self.t = 0.0

    def now(self) -> float:
        return self.t


def test_a_growing_lag_is_reported_and_warned_once(caplog):
    clock = StoppedClock()
    lag = Lag(clock)
    clock.t = 1.0
    lag.observe(1.0, 1.0)  # on time
    assert lag.report()["behind_share"] == 0.0
    with caplog.at_level(logging.WARNING, logger="sglang.scheduler"):
        for step in range(2, 12):  # each 1 s step done at 1.5 s of the clock
            clock.t = 1.0 + 1.5 * (step - 1)
            lag.observe(float(step), 1.0)
    report = lag.report()
    assert report["behind_s"] == report["behind_max_s"] == 5.0 and report["behind_work_s"] == 11
    assert report["behind_share"] == round(5 / 11, 6)
    warned = [r for r in caplog.records if "simulator falling behind its clock" in r.message]
    assert len(warned) == 1
    lag.reset()  # a flush: the next run starts afresh
    assert lag.report()["behind_max_s"] == 0.0


def test_an_engine_held_up_mid_decode_reports_the_lag():
    engine = _engine()  # clock scale 50

    async def drive() -> dict[str, float]:
        task = asyncio.create_task(engine.run())
        request = engine.new_request("a prompt", 64, ignore_eos=True, thinking=False)
        engine.submit(request)
        await request.queue.get()  # its prefill done: decoding
        time.sleep(0.1)  # the CPU elsewhere: 5 virtual seconds the engine does not get
        while (await request.queue.get()).finish_reason is None:
            pass
        task.cancel()
        return engine.lag.report()

    report = asyncio.run(drive())
    assert report["behind_max_s"] > 4.0 and report["behind_share"] > 0.05


def test_the_harness_warns_only_past_the_share():
    assert simulator_behind({"simulator": {"clock_scale": 50, "behind_share": 0.3}}) == 0.3
    assert simulator_behind({"simulator": {"clock_scale": 50, "behind_share": 0.01}}) is None
    assert simulator_behind({"simulator": {"clock_scale": 50}}) is None  # an older simulator
    assert simulator_behind({"version": "0.5.23"}) is None  # real SGLang: no virtual clock
