"""The trial's workload reaches MLflow as a dataset input (sweep.tracking.runs)."""

from __future__ import annotations

from harness.record.layout import sqlite_uri
from harness.record.results import Outcome, TrialResult
from harness.workload import record
from sweep.tracking.runs import Tracker


def test_a_trial_run_has_its_workload_as_a_dataset_input(tmp_path):
    folder = tmp_path / "trial-0000"
    folder.mkdir()
    written = record.write(folder, "datagen", "builtin", ("datagen",))
    tracker = Tracker(sqlite_uri(tmp_path / "mlflow.db"), "study", tmp_path / "artifacts")
    result = TrialResult(
        name="trial-0000",
        role="trial",
        outcome=Outcome.OK,
        engine="sim",
        simulated=True,
        clock_scale=50.0,
        params={},
        folder=str(folder),
    )
    run_id = tracker.upload_trial(result, parent_run_id=None, study="study", baseline_tok_s=None)
    inputs = tracker.client.get_run(run_id).inputs.dataset_inputs
    assert len(inputs) == 1
    dataset = inputs[0].dataset
    assert (dataset.name, dataset.digest) == ("datagen", written["sha256"][:16])
    assert '"num_rows": 50' in dataset.profile
    assert {t.key: t.value for t in inputs[0].tags} == {"mlflow.data.context": "benchmark"}
