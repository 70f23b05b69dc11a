"""`python -m sweep.sync [--tracking-dir results] [--mlflow-uri URI]`

Upload to MLflow every trial folder it lacks: the trials of a sweep whose tracking store stopped
answering, or of a sweep killed between writing a result and logging it. The trial folders are the
record; this makes MLflow match them, with the same params, metrics, tags and artifacts as live
logging (`Tracker.upload_trial`). Idempotent: a second run uploads nothing. A run that a crash left
half-logged (still RUNNING) is replaced. Sweep runs left open are closed with their summary.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from harness.record.layout import ResultsLayout
from harness.record.results import TrialResult
from harness.server.redact import redact_url_passwords
from sweep.tracking.runs import Tracker, baseline_runs, read_tracking_record


def sync(tracking_dir: Path, mlflow_uri: str) -> dict[str, list[str]]:
    """Upload what is missing; returns {"uploaded": [...], "present": [...], "closed": [...]}."""
    layout = ResultsLayout.at(tracking_dir)
    trackers: dict[str, Tracker] = {}
    logged: dict[str, dict[str, list]] = {}
    report: dict[str, list[str]] = {"uploaded": [], "present": [], "closed": []}

    def tracker_for(experiment: str) -> Tracker:
        if experiment not in trackers:
            trackers[experiment] = Tracker(mlflow_uri, experiment, layout.artifacts)
            logged[experiment] = trackers[experiment].logged_folders()
        return trackers[experiment]

    for folder in layout.trial_folders():
        record = read_tracking_record(folder) or {}
        study = record.get("study") or folder.parent.name
        tracker = tracker_for(record.get("experiment") or study)
        runs = logged[tracker.experiment].get(str(folder), [])
        if any(run.info.status != "RUNNING" for run in runs):
            report["present"].append(str(folder))
            continue
        for half_logged in runs:  # created, then the store went away before it was terminated
            tracker.client.delete_run(half_logged.info.run_id)
        result = TrialResult.read(folder)
        result.folder = str(folder)
        tracker.upload_trial(
            result,
            parent_run_id=_existing(tracker, record.get("parent_run_id")),
            study=study,
            baseline_tok_s=record.get("baseline_tok_s"),
            baseline_runs=baseline_runs(record),
        )
        report["uploaded"].append(str(folder))
    for summary in layout.summaries():
        data = json.loads(summary.read_text())
        experiment, run_id = data.get("experiment"), data.get("mlflow_parent_run_id")
        if not (experiment and run_id):
            continue
        tracker = tracker_for(experiment)
        if _existing(tracker, run_id) and tracker.client.get_run(run_id).info.status == "RUNNING":
            status = (
                data["status"] if data["status"] in ("FINISHED", "FAILED", "KILLED") else "FAILED"
            )
            decision = data.get("deploy") or {}
            # the study's answer as the sweep would have tagged it
            # (sweep.study.answer.recommendation)
            tags = {
                f"specsweep.{key}": str(decision[src])[:5000]
                for key, src in (
                    ("deploy", "deploy"),
                    ("deploy_config", "config"),
                    ("deploy_line", "line"),
                )
                if decision.get(src) is not None
            }
            tracker.close_sweep(run_id, data.get("metrics") or {}, [summary], status, tags)
            report["closed"].append(run_id)
    return report


def _existing(tracker: Tracker, run_id: str | None) -> str | None:
    """`run_id` if the store has it (a sync into another store starts without the parents)."""
    if not run_id:
        return None
    try:
        tracker.client.get_run(run_id)
    except Exception:  # MlflowException RESOURCE_DOES_NOT_EXIST
        return None
    return run_id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sweep.sync", description=__doc__.split("\n\n")[1]
    )
    parser.add_argument("--tracking-dir", default="results", help="the sweep's tracking.dir")
    parser.add_argument(
        "--mlflow-uri", help="tracking store (default: sqlite:///<tracking-dir>/mlflow.db)"
    )
    args = parser.parse_args(argv)
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    tracking_dir = Path(args.tracking_dir).resolve()
    if not tracking_dir.is_dir():
        print(f"error: --tracking-dir {tracking_dir} does not exist", file=sys.stderr)
        return 2
    uri = args.mlflow_uri or ResultsLayout.at(tracking_dir).mlflow_uri
    report = sync(tracking_dir, uri)
    for folder in report["uploaded"]:
        print(f"uploaded  {folder}")
    print(
        f"{len(report['uploaded'])} trial(s) uploaded, {len(report['present'])} already in "
        f"MLflow, {len(report['closed'])} sweep run(s) closed ({redact_url_passwords(uri)})"
    )
    return 0
