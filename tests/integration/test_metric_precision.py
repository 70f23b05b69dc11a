"""MLflow gets each metric at the digits it is worth (harness.record.precision), on a real sqlite
store: a trial's metrics, its runs' steps and its curves, not `88.87113249...`; the trial folder
keeps every digit."""

from __future__ import annotations

import json

from harness.record.layout import sqlite_uri
from harness.record.results import Outcome, RunSummary, TrialResult
from sweep.tracking.runs import Tracker


def test_a_trials_metrics_reach_mlflow_rounded_and_its_folder_keeps_every_digit(tmp_path):
    tracker = Tracker(sqlite_uri(tmp_path / "mlflow.db"), "study", tmp_path / "artifacts")
    runs = [
        RunSummary(1, 1, 3, 0, 6000, 88.87113249, 87.5551, 88.87113249, 0.41234, 1.98765, "sim")
    ]
    metrics = {
        "tok_s": 88.87113249,
        "tok_s_ci95": 1.18449,
        "accept_len": 1.987654,
        "itl_ms_p99_c1": 12.34567,
        "cache_hit_rate": 0.8123456,
        "kv_pool_tokens": 116170.0,
        "host_load_1m": 3.456789,
    }
    folder = tmp_path / "trial_0000"
    result = TrialResult(
        name="trial_0000", role="trial", outcome=Outcome.OK, engine="sim", simulated=True,
        clock_scale=1.0, params={"speculative_num_steps": 2}, metrics=dict(metrics), runs=runs,
        accept_by_window=[1.98046512, 1.92211111], folder=str(folder),
    )  # fmt: skip
    folder.mkdir()
    result.write(folder)
    run_id = tracker.upload_trial(result, parent_run_id=None, study="study", baseline_tok_s=98.7)
    logged = tracker.client.get_run(run_id).data.metrics
    assert {k: logged[k] for k in metrics} == {
        "tok_s": 88.9,
        "tok_s_ci95": 1.2,
        "accept_len": 1.99,
        "itl_ms_p99_c1": 12.3,
        "cache_hit_rate": 0.812,
        "kv_pool_tokens": 116170.0,  # a count stays whole
        "host_load_1m": 3.457,  # named by no rule: four significant digits
    }
    assert logged["speedup_vs_baseline"] == 0.9  # 88.871 / 98.7 = 0.90042...
    steps = tracker.client.get_metric_history(run_id, "run.decode_tok_s_c1")
    assert [m.value for m in steps] == [88.9]
    curve = tracker.client.get_metric_history(run_id, "accept_len_by_window")
    assert sorted(m.value for m in curve) == [1.92, 1.98]
    recorded = json.loads((folder / "result.json").read_text())["metrics"]
    assert recorded["tok_s"] == 88.87113249  # the record of truth is not rounded
