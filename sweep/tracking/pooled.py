"""MLflow and the trial folders' tracking records brought up to a pooled result (the resolve
phase, sweep.study.loop.resolve_rounds).

The child run a trial (or the baseline) was logged as stays the one run of that configuration: its
metrics are logged again from the pooled record (MLflow shows a metric's latest value), the new
runs are added as steps of `run.<metric>_c<level>` at their run numbers, the relaunch's folder is
attached under `resolve-<k>/` beside the re-uploaded result.json and result-launch.json, and the
tag `specsweep.resolve_rounds` says how many relaunches are pooled in. A relaunch is not a run of
its own, so `sweep.reproduce` and the compare view still find one run per configuration. When the
baseline was pooled, every other measured trial's `speedup_vs_baseline` (and its interval) is
logged again against it, and each trial folder's tracking.json names the baseline it is compared
with, so MLflow, the folders (analysis.folders) and the summary JSON say the same.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from mlflow.entities import Metric, RunTag

from harness.record.precision import meaningful
from harness.record.results import RunSummary, TrialResult, run_steps
from harness.record.stats import objective_runs, speedup_metrics
from sweep.tracking.runs import TRACKING_RECORD, Tracker


def run_ids(tracker: Tracker) -> dict[str, str]:
    """Trial folder -> the finished MLflow run uploaded from it (one search for the study)."""
    found = {}
    for folder, runs in tracker.logged_folders().items():
        done = [r for r in runs if r.info.status != "RUNNING"]
        if done:
            found[folder] = done[0].info.run_id
    return found


def _metrics(values: dict[str, float], step: int = 0) -> list[Metric]:
    now = int(time.time() * 1000)
    return [
        Metric(k, meaningful(k, v), now, step)
        for k, v in values.items()
        if v is not None and math.isfinite(float(v))
    ]


def _speedups(result: TrialResult, base: TrialResult | None) -> dict[str, float]:
    if base is None or "tok_s" not in base.metrics:
        return {}
    return speedup_metrics(
        result.metrics.get("tok_s"), result.runs, base.metrics["tok_s"], objective_runs(base.runs)
    )


def log_pooled(
    tracker: Tracker,
    run_id: str,
    pooled: TrialResult,
    new_runs: list[RunSummary],
    relaunch: Path,
    baseline: TrialResult | None,
    files: list[Path],
) -> None:
    """The configuration's run, pooled: metrics, the new runs' steps, `files` (its result.json
    and the first launch's, re-uploaded) and the relaunch's folder."""
    client = tracker.client
    now = int(time.time() * 1000)
    steps = [Metric(key, meaningful(key, v), now, run) for key, v, run in run_steps(new_runs)]
    values = {
        **pooled.metrics,
        **(_speedups(pooled, baseline) if pooled.role != "baseline" else {}),
    }
    tags = [RunTag("specsweep.resolve_rounds", str(len(pooled.resolve)))]
    batch = _metrics(values) + steps
    for start in range(0, len(batch), 1000):  # MLflow's batch limit
        client.log_batch(
            run_id, metrics=batch[start : start + 1000], tags=tags if not start else []
        )
    for path in files:
        if path.is_file():
            client.log_artifact(run_id, str(path))
    if relaunch.is_dir():
        client.log_artifacts(run_id, str(relaunch), relaunch.name)


def rebase(tracker: Tracker, run_id: str, result: TrialResult, baseline: TrialResult) -> None:
    """A trial's speedup_vs_baseline (and its paired interval) against the pooled baseline."""
    values = _speedups(result, baseline)
    if values:
        tracker.client.log_batch(run_id, metrics=_metrics(values))


def note_baseline(folder: Path, baseline: TrialResult) -> None:
    """The trial folder's tracking.json: the baseline it is compared with, as pooled (what
    analysis.folders and `python -m sweep.sync` read the speedup from)."""
    path = folder / TRACKING_RECORD
    if not path.is_file() or "tok_s" not in baseline.metrics:
        return
    record = json.loads(path.read_text())
    record["baseline_tok_s"] = baseline.metrics["tok_s"]
    record["baseline_runs"] = {str(k): v for k, v in objective_runs(baseline.runs).items()}
    path.write_text(json.dumps(record, indent=2) + "\n")
