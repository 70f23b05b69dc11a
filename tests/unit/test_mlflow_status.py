"""MLflow's status and times for a trial: FINISHED where it has a result, KILLED where the
sweep stopped it, FAILED otherwise; the run spans the trial, not its upload."""

from __future__ import annotations

import os

from harness.record.results import Outcome, TrialResult
from sweep.tracking.runs import run_status, trial_times


def test_a_trial_with_a_result_is_finished_whatever_its_outcome_tag_says():
    assert {run_status(o) for o in (Outcome.OK, Outcome.PRUNED, Outcome.DUPLICATE)} == {"FINISHED"}
    assert run_status(Outcome.INTERRUPTED) == "KILLED"
    assert {run_status(o) for o in (Outcome.OOM, Outcome.PREDICTED_OOM, Outcome.CRASH)} == {
        "FAILED"
    }


def test_the_runs_times_are_the_trials(tmp_path):
    result = TrialResult("t", "trial", Outcome.OK, "sim", True, 1.0, {}, folder=str(tmp_path))
    result.wall_s = 95.5
    result.write(tmp_path)
    os.utime(tmp_path / "result.json", (1_700_000_000, 1_700_000_000))
    assert trial_times(result) == (1_700_000_000_000 - 95_500, 1_700_000_000_000)
    assert trial_times(TrialResult("t", "trial", Outcome.OK, "sim", True, 1.0, {})) == (None, None)
