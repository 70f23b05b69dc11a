"""One row per trial from the self-describing trial folders, without a tracking store.

A sweep writes <results>/<study>/<trial>/ with result.json (`harness.record.results.TrialResult`),
tracking.json (experiment, study, parent sweep run, the baseline's tok/s and its runs') and
provenance.json.
The rows and values are those the MLflow loader reads back from the upload of the same folders
(sweep.tracking.runs.Tracker.upload_trial): the MLflow copy derives speedup_vs_baseline, startup_s,
teardown_s and each run's last value (run.<name>_c<level>) from the folder, and so does this.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.frame import EMPTY, NUMERIC, PROVENANCE, ROLES, finish
from harness.record.layout import ResultsLayout
from harness.record.results import AT_LEAST, RUN_STEP_METRICS, TrialResult
from harness.record.stats import speedup_metrics

log = logging.getLogger(__name__)
TRACKING_RECORD = "tracking.json"  # written by sweep.tracking.runs before each upload
PROVENANCE_RECORD = "provenance.json"  # written by sweep.tracking.provenance before each launch


def trial_folders(results: Path) -> list[Path]:
    """<results>/<study>/<trial>/ folders holding a result (those `python -m sweep.sync` finds)."""
    return ResultsLayout.at(results).trial_folders()


def experiments(results: Path) -> list[str]:
    """The experiments (study names, unless tracking.experiment said otherwise) under results."""
    return sorted({_experiment(folder) for folder in trial_folders(results)})


def load_folders(results: Path, experiment: str) -> pd.DataFrame:
    """Every trial and baseline of the experiment's sweeps under results."""
    folders = [f for f in trial_folders(results) if _experiment(f) == experiment]
    if not folders:
        raise ValueError(
            f"no trial folders of experiment {experiment!r} under {Path(results).resolve()} "
            f"(found: {', '.join(experiments(results)) or 'none'})"
        )
    rows = []
    for folder in folders:
        try:
            result = TrialResult.read(folder)
        except (ValueError, KeyError, TypeError) as exc:  # half-written or from another schema
            log.warning("left out %s: its result.json does not read (%s)", folder, exc)
            continue
        if result.role in ROLES:
            rows.append(trial_row(folder, result))
    if not rows:
        return pd.DataFrame(columns=EMPTY)
    return finish(pd.DataFrame(rows))


def trial_row(folder: Path, result: TrialResult) -> dict[str, Any]:
    record = _read_json(folder / TRACKING_RECORD)
    row: dict[str, Any] = {
        "run_id": None,  # only MLflow has one
        "parent_run_id": record.get("parent_run_id"),
        "name": result.name,
        "role": result.role,
        "outcome": str(result.outcome),
        "engine": result.engine,
        "simulated": bool(result.simulated),
        "study": record.get("study") or folder.parent.name,
        "related": result.related,
        "warning": ",".join(result.warnings) or None,
        "drafter": str(result.params.get("drafter")),  # as MLflow keeps params: a string
        **provenance(folder),
        "start_time": started_at(folder, result),
        "accept_by_window": list(result.accept_by_window) or None,  # a list per trial
    }
    for hist in result.step_histograms:  # P(>=k) per level: a list, as MLflow's steps read back
        if hist.at_least:
            row[f"{AT_LEAST}{hist.concurrency}"] = list(hist.at_least)
    for name in NUMERIC:
        # What the server ran when it said so, else what was asked.
        effective = _number(result.effective.get(name))
        row[name] = _number(result.params.get(name)) if effective is None else effective
    # The running-request limit the server ran with: which baseline a level compares with
    # (analysis.frame.level_baseline).
    row["max_running_requests"] = _number(result.effective.get("max_running_requests"))
    row.update(metrics(result, record.get("baseline_tok_s"), record.get("baseline_runs")))
    return row


def provenance(folder: Path) -> dict[str, str | None]:
    """The provenance columns; None each when the trial was never launched (no provenance)."""
    data = _read_json(folder / PROVENANCE_RECORD)
    values: dict[str, str | None] = {}
    for column, path in PROVENANCE.items():
        value: Any = data
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        values[column] = None if value is None else str(value)
    return values


def metrics(
    result: TrialResult, baseline_tok_s: float | None, baseline_runs: dict | None = None
) -> dict[str, float]:
    """Every metric MLflow gets for this result (finite values only, as MLflow logs them):
    speedup_vs_baseline with its paired interval from the baseline's runs (tracking.json)."""
    values = dict(result.metrics)
    runs = {int(k): float(v) for k, v in (baseline_runs or {}).items()}
    values.update(speedup_metrics(values.get("tok_s"), result.runs, baseline_tok_s, runs))
    if result.startup_s is not None:
        values["startup_s"] = result.startup_s
    if result.teardown_s is not None:
        values["teardown_s"] = result.teardown_s
    # MLflow logs each run as a step and shows the last step's value.
    for run in sorted(result.runs, key=lambda r: r.run):
        for name in RUN_STEP_METRICS:
            value = getattr(run, name)
            if value is not None and math.isfinite(value):
                values[f"run.{name}_c{run.concurrency}"] = value
    return {k: float(v) for k, v in values.items() if v is not None and math.isfinite(float(v))}


def started_at(folder: Path, result: TrialResult) -> pd.Timestamp:
    """When the server was launched; for a result that launched nothing, when it was written."""
    seconds = result.server_window[0] if result.server_window else None
    if seconds is None:
        seconds = (folder / "result.json").stat().st_mtime
    return pd.Timestamp(seconds, unit="s", tz="UTC")


def _experiment(folder: Path) -> str:
    record = _read_json(folder / TRACKING_RECORD)
    return record.get("experiment") or record.get("study") or folder.parent.name


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text()) if path.is_file() else {}
    except json.JSONDecodeError:
        log.warning("left out %s: not JSON", path)
        return {}


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
