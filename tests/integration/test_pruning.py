"""Pruning through a real trial on the simulator: a clearly slow configuration stops early with
Outcome.PRUNED and keeps what it measured; a fast one under the same bound runs all its runs."""

from __future__ import annotations

from harness.record.results import Outcome, read_requests
from harness.spec import BenchmarkSpec, EarlyStop, TrialSpec
from harness.trial import run_trial
from tests.conftest import eagle3, kimi_server, sim_engine

RUNS = 5
BOUND = 110.0  # tok/s: the best trial's lower bound, as the study's driver would hand it over


def trial(tmp_path, port, server, hardware: str) -> TrialSpec:
    engine = sim_engine(200.0, "--sim-load-s", "2", "--sim-hardware", hardware, "--sim-drift", "0")
    return TrialSpec(
        name="t",
        role="trial",
        number=None,
        engine=engine,
        server=server(port),
        benchmark=BenchmarkSpec(
            model="m", max_tokens=256, warmup=1, runs=RUNS, requests_per_run=1, lossless_check=0
        ),
        early_stop=EarlyStop(below=BOUND, concurrency=1),
        pid_file=tmp_path / "servers" / f"port-{port}.pid",
    )


def test_a_slow_configuration_is_pruned_and_a_fast_one_is_not(tmp_path, port):
    # No speculation on the slower GPU: about 78 tok/s, its upper bound falls below 110 early.
    slow = run_trial(trial(tmp_path, port, kimi_server, "rtx_pro_6000_pcie"), tmp_path / "slow")
    assert slow.outcome is Outcome.PRUNED, slow.error
    assert 2 <= len(slow.runs) < RUNS
    assert slow.metrics["tok_s"] + slow.metrics["tok_s_ci95"] < BOUND
    measured = {r.run for r in read_requests(tmp_path / "slow" / "requests.jsonl")}
    assert measured == {0, *range(1, len(slow.runs) + 1)}  # warm-up and the runs it made, kept
    # EAGLE-3 on the faster GPU: about 120 tok/s, its interval stays above the bound.
    fast = run_trial(trial(tmp_path, port, eagle3, "h200_nvlink"), tmp_path / "fast")
    assert fast.outcome is Outcome.OK, fast.error
    assert len(fast.runs) == RUNS


def test_a_pruned_speculative_trial_keeps_its_p_at_least_k_metrics(tmp_path, port):
    # A pruned trial's metrics are recomputed from its partial runs: the step counts of its
    # P(>=k) must survive that (the report labels each curve with them).
    pruned = run_trial(trial(tmp_path, port, eagle3, "rtx_pro_6000_pcie"), tmp_path / "spec")
    assert pruned.outcome is Outcome.PRUNED, pruned.error
    (hist,) = pruned.step_histograms
    assert hist.at_least and pruned.metrics["accept_steps_c1"] == hist.steps
