"""One row per trial, from the trial folders (the record) or from MLflow (its copy), when asked.

Columns: run_id (MLflow only), parent_run_id, name, role, outcome, engine, simulated, study,
related, warning, drafter, the provenance facts (config_hash, prompts_hash, git_commit,
sglang_version, gpu, host), the searched parameters (effective value when the server reported
one, else requested), every metric (tok_s, tok_s_ci95, accept_len, speedup_vs_baseline,
per-level ones), start_time and config (a short label).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pandas as pd

from analysis import folders
from harness.record.layout import ResultsLayout

Source = Literal["folders", "mlflow"]
SOURCES: tuple[Source, ...] = ("folders", "mlflow")


def default_tracking_uri(results: str | Path = "results") -> str:
    return ResultsLayout.at(results).mlflow_uri


def load_runs(
    experiment: str,
    tracking_uri: str | None = None,
    *,
    results: str | Path = "results",
    source: Source | None = None,
) -> pd.DataFrame:
    """The experiment's trials and baselines. From the trial folders under `results` unless
    MLflow is asked for (source="mlflow", or a tracking_uri given); MLflow's default store is
    <results>/mlflow.db."""
    source = source or ("mlflow" if tracking_uri else "folders")
    if source == "folders":
        return folders.load_folders(Path(results), experiment)
    if source == "mlflow":
        from analysis.mlflow_load import load_mlflow  # MLflow only when asked for

        uri = tracking_uri or default_tracking_uri(results)
        store = Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None
        if store is not None and not store.is_file():  # MLflow would create an empty one
            raise ValueError(
                f"no MLflow store at {store}: the trial folders hold the same rows (source folders)"
            )
        return load_mlflow(experiment, uri)
    raise ValueError(f"source={source!r}: use one of {', '.join(SOURCES)}")


def experiments(results: str | Path = "results") -> list[str]:
    """The experiments whose trial folders are under results."""
    return folders.experiments(Path(results))
