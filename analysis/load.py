"""One row per trial, from MLflow: parameters, effective parameters, outcome, metrics, intervals."""

from __future__ import annotations

from pathlib import Path

import mlflow
import pandas as pd

SPEC = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
NUMERIC = (*SPEC, "mem_fraction_static", "hicache_size")
OK = "ok"
FAILED = ("oom", "predicted_oom", "crash", "timeout", "error")


def default_tracking_uri(results: str | Path = "results") -> str:
    return f"sqlite:///{Path(results).resolve() / 'mlflow.db'}"


def load_runs(experiment: str, tracking_uri: str | None = None) -> pd.DataFrame:
    """Every trial and baseline of the experiment's sweeps (sweep parents left out).

    Columns: run_id, parent_run_id, name, role, outcome, engine, simulated, study, related,
    the searched parameters (effective value when the server reported one, else requested),
    drafter, every metric (tok_s, tok_s_ci95, accept_len, speedup_vs_baseline, per-level ones),
    and start_time.
    """
    mlflow.set_tracking_uri(tracking_uri or default_tracking_uri())
    if mlflow.get_experiment_by_name(experiment) is None:
        raise ValueError(
            f"no MLflow experiment named {experiment!r} at {mlflow.get_tracking_uri()}"
        )
    raw = mlflow.search_runs(experiment_names=[experiment], output_format="pandas")
    if raw.empty:
        return pd.DataFrame(columns=["run_id", "name", "role", "outcome", *NUMERIC, "tok_s"])
    raw = raw[raw.get("tags.specsweep.role", pd.Series(dtype=str)).isin(["trial", "baseline"])]

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
            # provenance: what was measured, and on what (sweep.provenance)
            "config_hash": tag("specsweep.config_hash"),
            "prompts_hash": tag("specsweep.prompts_hash"),
            "git_commit": tag("specsweep.git_commit"),
            "sglang_version": tag("specsweep.sglang_version"),
            "gpu": tag("specsweep.gpu"),
            "host": tag("specsweep.host"),
            "start_time": raw["start_time"],
        }
    )
    nothing = pd.Series(index=raw.index, dtype=float)
    for name in NUMERIC:
        # What the server ran when it said so ("None" when it never started), else what was asked.
        effective = pd.to_numeric(raw.get(f"params.effective.{name}", nothing), errors="coerce")
        requested = pd.to_numeric(raw.get(f"params.{name}", nothing), errors="coerce")
        df[name] = effective.fillna(requested)
    for column in raw.columns:
        if column.startswith("metrics."):
            df[column.removeprefix("metrics.")] = raw[column]
    df["config"] = df.apply(describe, axis=1)
    return df.sort_values("start_time").reset_index(drop=True)


def describe(row: pd.Series) -> str:
    if row.get("role") == "baseline":
        return "baseline (no speculation)"
    spec = "/".join("?" if pd.isna(row.get(k)) else str(int(row[k])) for k in SPEC)
    mem = row.get("mem_fraction_static")
    mem_text = "auto" if pd.isna(mem) else f"{mem:.2f}"
    hicache = 0 if pd.isna(row.get("hicache_size")) else int(row["hicache_size"])
    return f"{spec} mem {mem_text} hicache {hicache}"


def baseline(df: pd.DataFrame) -> pd.Series | None:
    """The first successful baseline measurement (re-checks come later in time)."""
    rows = df[(df["role"] == "baseline") & (df["outcome"] == OK)]
    return None if rows.empty else rows.iloc[0]


def trials(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["role"] == "trial"]


def measured(df: pd.DataFrame) -> pd.DataFrame:
    """Trials with a measurement of their own (ok or pruned), fastest first."""
    rows = trials(df)
    rows = rows[rows["outcome"].isin([OK, "pruned"]) & rows["tok_s"].notna()]
    return rows.sort_values("tok_s", ascending=False)


def concurrency_levels(df: pd.DataFrame) -> list[int]:
    levels = {
        int(c.rsplit("_c", 1)[1])
        for c in df.columns
        if c.startswith("output_tok_s_c") and not c.endswith("_ci95")
    }
    return sorted(levels)
