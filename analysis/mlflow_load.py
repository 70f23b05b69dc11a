"""One row per trial from an MLflow tracking store: the only analysis module that imports mlflow.

MLflow holds a copy of the trial folders (sweep.tracking.runs uploads them), so this gives the rows
`analysis.folders` gives, plus the MLflow run ids; use it for a store on another machine.
"""

from __future__ import annotations

import mlflow
import pandas as pd

from analysis.frame import EMPTY, NUMERIC, PROVENANCE, ROLES, finish
from harness.record.results import ACCEPT_BY_WINDOW, AT_LEAST


def load_mlflow(experiment: str, tracking_uri: str) -> pd.DataFrame:
    """Every trial and baseline of the experiment's sweeps (sweep parents left out)."""
    mlflow.set_tracking_uri(tracking_uri)
    if mlflow.get_experiment_by_name(experiment) is None:
        raise ValueError(
            f"no MLflow experiment named {experiment!r} at {mlflow.get_tracking_uri()}"
        )
    raw = mlflow.search_runs(experiment_names=[experiment], output_format="pandas")
    if raw.empty:
        return pd.DataFrame(columns=EMPTY)
    raw = raw[raw.get("tags.specsweep.role", pd.Series(dtype=str)).isin(ROLES)]

    def tag(name: str) -> pd.Series:
        return raw.get(f"tags.{name}", pd.Series(index=raw.index, dtype=object))

    df = pd.DataFrame(
        {
            "run_id": raw["run_id"],
            "parent_run_id": tag("mlflow.parentRunId"),
            "name": tag("mlflow.runName"),
            "role": tag("specsweep.role"),
            "outcome": tag("specsweep.outcome"),
            "engine": tag("specsweep.engine"),
            "simulated": tag("specsweep.simulated") == "true",
            "study": tag("specsweep.study"),
            "related": tag("specsweep.related"),
            "warning": tag("specsweep.warning"),
            "drafter": raw.get("params.drafter"),
            # provenance: what was measured, and on what (sweep.tracking.provenance)
            **{column: tag(f"specsweep.{column}") for column in PROVENANCE},
            "start_time": raw["start_time"],
        }
    )
    nothing = pd.Series(index=raw.index, dtype=float)
    for name in NUMERIC:
        # What the server ran when it said so ("None" when it never started), else what was asked.
        effective = pd.to_numeric(raw.get(f"params.effective.{name}", nothing), errors="coerce")
        requested = pd.to_numeric(raw.get(f"params.{name}", nothing), errors="coerce")
        df[name] = effective.fillna(requested)
    running = raw.get("params.effective.max_running_requests", nothing)
    df["max_running_requests"] = pd.to_numeric(running, errors="coerce")  # frame.level_baseline
    for column in raw.columns:
        if not column.startswith("metrics."):
            continue
        key = column.removeprefix("metrics.")
        if key == ACCEPT_BY_WINDOW:  # one value per 256-token window: a list, from its steps
            df["accept_by_window"] = _histories(raw, key)
        elif not raw[column].notna().any():
            continue  # a metric no trial has is the sweep parents' (n_trials, best_tok_s, ...)
        elif key.startswith(AT_LEAST):  # P(>=k) at one level, one value per depth k: a list
            df[key] = _histories(raw, key)
        else:
            df[key] = raw[column]
    return finish(df)


def _histories(raw: pd.DataFrame, key: str) -> list[list[float] | None]:
    """Each run's stepped metric `key` as a list (None where the run has none)."""
    return [
        _history(run_id, key) if pd.notna(last) else None
        for run_id, last in zip(raw["run_id"], raw[f"metrics.{key}"], strict=True)
    ]


def _history(run_id: str, key: str) -> list[float]:
    """A stepped metric's values in step order (the latest value of a step re-logged)."""
    history = mlflow.MlflowClient().get_metric_history(run_id, key)
    by_step = {m.step: m.value for m in sorted(history, key=lambda m: (m.step, m.timestamp))}
    return [by_step[step] for step in sorted(by_step)]
