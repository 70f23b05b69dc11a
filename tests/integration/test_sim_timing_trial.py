"""A simulated trial reads the simulator's lag after every run and records it with the host's
load; past the thresholds its warnings name why (harness.measure.sim_timing)."""

from __future__ import annotations

import json

from harness.measure import clock, sim_timing
from harness.record.results import Outcome
from harness.trial import run_trial
from tests.integration.test_trial_faults import trial


def test_each_run_is_read_and_an_overloaded_host_is_warned(tmp_path, port, monkeypatch):
    monkeypatch.setattr(sim_timing, "host_load", lambda: 99.0)  # far above any core count
    result = run_trial(trial(tmp_path, port, runs=2), tmp_path / "t")
    assert result.outcome is Outcome.OK, result.error
    m = result.metrics
    assert m["host_load_1m"] == 99.0 and m["host_cores"] >= 1 and "sim_behind_share" in m
    assert ("simulator_behind" in result.warnings) is (m["sim_behind_share"] > 0.05)
    assert "simulator_behind" in result.warnings or "host_overloaded" in result.warnings
    saved = json.loads((tmp_path / "t" / "result.json").read_text())
    assert saved["metrics"]["host_load_1m"] == 99.0


def test_a_run_past_the_share_is_warned_simulator_behind(tmp_path, port, monkeypatch):
    monkeypatch.setattr(clock, "BEHIND_WARN_SHARE", -1.0)  # any share, 0 included, is behind
    result = run_trial(trial(tmp_path, port, runs=2), tmp_path / "t")
    assert result.outcome is Outcome.OK, result.error
    assert "simulator_behind" in result.warnings and "host_overloaded" not in result.warnings
