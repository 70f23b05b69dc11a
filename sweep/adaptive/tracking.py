"""The head-to-head as an MLflow run, filed under the sweep's parent run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from harness.record.layout import ResultsLayout
from sweep.adaptive.config_file import Study
from sweep.adaptive.head_to_head import KINDS
from sweep.readout.console import console
from sweep.tracking.runs import Tracker, resolve_sqlite_uri


def track(
    rows: list[dict], cfg: DictConfig, study: Study, files: list[Path], simulated: bool
) -> None:
    """The head-to-head as an MLflow run under the sweep's parent run (the study's latest
    summary names it): per level and deployment the mean and its 95% interval, what to deploy,
    and the table and config files. A store that does not answer costs the run, never the files
    already written."""
    summaries = sorted(study.folder.glob("summary-*.json"))
    latest = json.loads(summaries[-1].read_text()) if summaries else {}
    parent = latest.get("mlflow_parent_run_id")
    metrics: dict[str, float] = {}
    params: dict[str, Any] = {}
    for row in rows:
        c = row["concurrency"]
        params[f"deploy_c{c}"] = row["deploy"]
        if row.get("static_config"):
            params[f"static_config_c{c}"] = row["static_config"]
        for kind in KINDS:
            if row.get(kind):
                key = f"h2h_{kind.replace(' ', '_')}_c{c}"
                metrics[key], metrics[key + "_ci95"] = row[kind]
        if row.get("adaptive_gain") is not None:
            metrics[f"adaptive_gain_c{c}"] = row["adaptive_gain"]
    tags = {"specsweep.study": study.folder.name, "specsweep.simulated": str(simulated).lower()}
    if parent:
        tags["mlflow.parentRunId"] = parent
    try:
        tracker = Tracker(
            resolve_sqlite_uri(cfg.tracking.mlflow_uri),
            cfg.tracking.experiment,
            ResultsLayout.at(cfg.tracking.dir).artifacts,
        )
        name = f"head-to-head {files[0].stem.removeprefix('head_to_head-')}"
        run_id = tracker.log_result_run(name, "head_to_head", tags, params, metrics, files)
    except Exception as exc:  # the store's failure is reported; the files are written already
        console.print(f"  [yellow]not logged to MLflow[/yellow] ({type(exc).__name__}: {exc})")
        return
    where = f" under the sweep's run {parent}" if parent else ""
    console.print(
        f"MLflow: run {run_id} in experiment {cfg.tracking.experiment!r}{where}", soft_wrap=True
    )
