"""Where a sweep's results are kept, and the commands that open them: the lines a sweep ends
with (trial folders, summary, report, MLflow and its UI, the Optuna study), each command spelled
to run as printed where the user is (sweep.readout.commands)."""

from __future__ import annotations

import shlex
from pathlib import Path

from omegaconf import DictConfig

from harness.record.layout import ResultsLayout
from harness.server.redact import redact_url_passwords as redact_url
from sweep.readout.commands import program, specsweep
from sweep.readout.console import console
from sweep.tracking.runs import Tracker, resolve_sqlite_uri
from sweep.tracking.view import view_link


def where_things_are(
    cfg: DictConfig,
    tracker: Tracker,
    study_dir: Path,
    summary: Path,
    storage_url: str,
    report: Path | None = None,
    view: str | None = None,
) -> None:
    mlflow_uri = redact_url(resolve_sqlite_uri(cfg.tracking.mlflow_uri))
    if tracker.offline:
        console.print(
            f"[bold yellow]MLflow was unreachable from mid-sweep ({tracker.offline}); "
            "nothing is lost, the trial folders hold it all. Upload it with:[/] "
            + specsweep(
                "sync",
                "--tracking-dir",
                str(ResultsLayout.at(cfg.tracking.dir).root),
                "--mlflow-uri",
                mlflow_uri,
            ),
            soft_wrap=True,
        )
    # soft_wrap: paths and commands stay on one line, ready to copy.
    console.print(f"\nSummary:       {summary}", soft_wrap=True)  # in the study's folder
    if report is not None:  # the figures are on the MLflow parent run too (report/)
        console.print(f"Report:        {report}", soft_wrap=True)
    console.print(
        f"MLflow:        {mlflow_uri} (experiment {cfg.tracking.experiment!r})", soft_wrap=True
    )
    # The study's runs, not MLflow's GenAI overview: its trials and baseline best first, with
    # their numbers as columns (sweep.tracking.view)
    if mlflow_uri.startswith(("http://", "https://")):
        link = view_link(mlflow_uri, tracker.experiment_id, view)
        console.print(f"Open the UI:   {link}", soft_wrap=True)
        console.print(
            f"Optuna study:  {cfg.search.study_name!r} in {redact_url(storage_url)}",
            soft_wrap=True,
        )
    else:
        link = view_link("http://127.0.0.1:5000", tracker.experiment_id, view)
        ui = specsweep("ui", "--results", str(cfg.tracking.dir))
        console.print(f"Open the UI:   {ui}   then {link}", soft_wrap=True)
    dashboard = f"{program('optuna-dashboard')} {shlex.quote(redact_url(storage_url))}"
    if cfg.get("verbose"):  # docs/analysis.md names it; the UI line above is the everyday view
        console.print(
            f"Optuna views:  {dashboard}   (history, importances, Pareto front; docs/analysis.md)",
            soft_wrap=True,
        )
    if cfg.engine.name == "sim":
        console.print("[yellow]All numbers above are SIMULATED (engine=sim).[/yellow]")
