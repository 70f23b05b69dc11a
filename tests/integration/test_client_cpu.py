"""Issue 15: every measured run records the client's own CPU time, and a trial whose client was
the bottleneck says so (`client_bound`, harness/measure/client_cpu.py)."""

from __future__ import annotations

import json

import pytest

from harness.measure import client_cpu
from harness.measure.client_cpu import CLIENT_BOUND_UTIL, client_bound
from harness.record.results import Outcome, RunSummary, TrialResult
from harness.trial import run_trial
from tests.integration.test_trial_faults import trial


def run(util: float | None) -> RunSummary:
    summary = RunSummary(1, 8, 8, 0, 4096, 50.0, 45.0, 400.0, 0.1, None, None)
    summary.client_cpu_util = util
    return summary


def test_the_rule_fires_when_a_run_kept_the_clients_core_busy():
    assert client_bound([run(0.1), run(CLIENT_BOUND_UTIL)])
    assert client_bound([run(0.97)])
    assert not client_bound([run(0.1), run(CLIENT_BOUND_UTIL - 0.01)])
    assert not client_bound([run(None)])  # not measured (an old result.json): no warning
    assert not client_bound([])


def test_each_run_records_the_clients_cpu_and_a_busy_client_is_warned(tmp_path, port, monkeypatch):
    monkeypatch.setattr(client_cpu, "CLIENT_BOUND_UTIL", 0.0)  # any measured run is "busy"
    result = run_trial(trial(tmp_path, port, runs=2), tmp_path / "t")
    assert result.outcome is Outcome.OK, result.error
    assert len(result.runs) == 2
    for r in result.runs:
        assert r.client_cpu_s is not None and r.client_cpu_s > 0
        assert r.client_cpu_util is not None and r.client_cpu_util > 0
        assert r.client_cpu_s_per_1k_tokens == pytest.approx(
            1000 * r.client_cpu_s / r.output_tokens, rel=1e-3
        )
    assert "client_bound" in result.warnings
    saved = json.loads((tmp_path / "t" / "result.json").read_text())
    assert all(
        r["client_cpu_s"] == m.client_cpu_s for r, m in zip(saved["runs"], result.runs, strict=True)
    )
    assert "client_cpu_s_per_1k_tokens" in saved["runs"][0]


def test_the_console_says_the_client_was_the_bottleneck():
    from sweep.readout import console as sweep_console
    from sweep.readout.trial_lines import ConsoleReporter

    result = TrialResult(
        "t", "trial", Outcome.OK, "sim", True, 1.0, {}, runs=[run(0.93)], warnings=["client_bound"]
    )
    with sweep_console.console.capture() as captured:
        ConsoleReporter(simulated=True).trial_done(result, None)
    text = " ".join(captured.get().split())
    assert "benchmark client was busy 93% of a core" in text
