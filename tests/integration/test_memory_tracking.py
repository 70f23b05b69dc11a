"""A trial's memory record reaches MLflow (issue 17): the trial's aggregates as metrics and each
run's window as steps (sweep.tracking.runs)."""

from __future__ import annotations

from harness.record.layout import sqlite_uri
from harness.record.results import Outcome, RunSummary, TrialResult
from sweep.tracking.runs import Tracker


def test_memory_metrics_and_per_run_steps(tmp_path):
    tracker = Tracker(sqlite_uri(tmp_path / "mlflow.db"), "study", tmp_path / "artifacts")
    runs = [
        RunSummary(
            run=n,
            concurrency=150,
            requests=40,
            errors=0,
            output_tokens=200_000,
            decode_tok_s=12.0,
            e2e_tok_s=None,
            output_tok_s=600.0,
            ttft_s=None,
            accept_len=None,
            accept_len_source=None,
            token_usage_mean=usage,
            queue_mean=115.0,
            running_mean=35.0,
            cache_hit_rate=0.8,
            retractions=n - 1,
            memory_source="log",
        )
        for n, usage in ((1, 0.93), (2, 0.95))
    ]
    memory = {"kv_pool_tokens": 159277.0, "host_cache_tokens": 2515968.0, "requests_fit": 29.0}
    memory |= {"token_usage_mean": 0.94, "kv_bound": 1.0, "cache_hit_rate_c150": 0.8}
    result = TrialResult(
        name="trial-0000",
        role="trial",
        outcome=Outcome.OK,
        engine="sim",
        simulated=True,
        clock_scale=50.0,
        params={},
        metrics=memory,
        runs=runs,
    )
    run_id = tracker.upload_trial(result, parent_run_id=None, study="study", baseline_tok_s=None)
    logged = tracker.client.get_run(run_id).data.metrics
    assert {k: logged[k] for k in memory} == memory
    steps = tracker.client.get_metric_history(run_id, "run.token_usage_mean_c150")
    assert [(m.step, m.value) for m in sorted(steps, key=lambda m: m.step)] == [
        (1, 0.93),
        (2, 0.95),
    ]
    retracted = tracker.client.get_metric_history(run_id, "run.retractions_c150")
    assert sorted(m.value for m in retracted) == [0.0, 1.0]
