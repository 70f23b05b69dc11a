"""The trial frame both loaders build (one row per trial or baseline) and the selections read
off it: the baseline, the trials, the measured ones, the concurrency levels."""

from __future__ import annotations

import pandas as pd

from harness.record import labels

SPEC = labels.SPECULATION
NUMERIC = labels.CONFIG_KEYS
OK = "ok"
FAILED = ("oom", "predicted_oom", "crash", "known_crash", "timeout", "error")
ROLES = ("trial", "baseline")  # sweep parents and reproductions are left out
# Provenance columns and the provenance.json facts they come from (sweep.tracking.provenance.tags).
PROVENANCE = {
    "config_hash": ("config_hash",),
    "prompts_hash": ("prompts_hash",),
    "git_commit": ("specsweep", "commit"),
    "sglang_version": ("packages", "sglang"),
    "gpu": ("gpus", "model"),
    "host": ("host",),
}
EMPTY = ["run_id", "name", "role", "outcome", *NUMERIC, "tok_s"]


def finish(df: pd.DataFrame) -> pd.DataFrame:
    """The searched parameters as numbers, a short config label, rows in time order."""
    for name in NUMERIC:
        df[name] = pd.to_numeric(df[name], errors="coerce").astype(float)
    if "tok_s" not in df:  # not one measurement yet (every trial failed)
        df["tok_s"] = float("nan")
    for column in df.select_dtypes(include="object").columns:  # missing is NaN, from either loader
        df[column] = df[column].where(df[column].notna(), float("nan"))
    df["config"] = df.apply(describe, axis=1)
    return df.sort_values(["start_time", "name"], kind="stable").reset_index(drop=True)


def describe(row: pd.Series) -> str:
    if row.get("role") == "baseline":
        return "baseline (no speculation)"
    known = {k: int(row[k]) for k in SPEC if not pd.isna(row.get(k))}
    # A trial without a drafter (the capacity presets) has no speculative values: not "?/?/?".
    spec = labels.speculation(known) if known else "speculation off"
    mem = row.get("mem_fraction_static")
    mem_text = "auto" if pd.isna(mem) else f"{mem:.2f}"
    hicache = 0 if pd.isna(row.get("hicache_size")) else int(row["hicache_size"])
    return f"{spec} mem {mem_text} hicache {hicache}"


def baseline(df: pd.DataFrame) -> pd.Series | None:
    """The first successful baseline measurement (re-checks come later in time), the study's
    own: not the one at SGLang's own running-request limit (`*_uncapped`,
    sweep.study.loop.baseline), which only the per-level answers above the cap compare with."""
    rows = df[(df["role"] == "baseline") & (df["outcome"] == OK)]
    rows = rows[~rows["name"].astype(str).str.endswith("_uncapped")]
    return None if rows.empty else rows.iloc[0]


def uncapped_baseline(df: pd.DataFrame) -> pd.Series | None:
    """The baseline measured at SGLang's own running-request limit (sweep.study.loop.baseline),
    where the study has one: what a deployment without speculation runs above speculation's cap."""
    rows = df[(df["role"] == "baseline") & (df["outcome"] == OK)]
    rows = rows[rows["name"].astype(str).str.endswith("_uncapped")]
    return None if rows.empty else rows.iloc[0]


def level_baseline(df: pd.DataFrame, concurrency: int) -> pd.Series | None:
    """The baseline a level's answer compares with (sweep.study.answer.levels): above the trials'
    running-request cap, the uncapped one where it was measured (at equal caps both servers
    would queue the same requests, which no deployment without speculation does); else the
    study's own."""
    free = uncapped_baseline(df)
    caps = trials(df).get("max_running_requests", pd.Series(dtype=float)).dropna()
    if free is not None and not caps.empty and concurrency > caps.min():
        return free
    return baseline(df)


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


def held_at(rows: pd.DataFrame, name: str) -> float | None:
    """The one value every row ran `name` at (a knob the search held still), else None."""
    values = rows[name].dropna().unique() if name in rows else []
    return float(values[0]) if len(values) == 1 else None


def load_level(df: pd.DataFrame) -> int | None:
    """The load the capacity figures read: the highest level above 1 (where the pool decides;
    the trial's unsuffixed memory metrics are of the same level)."""
    levels = [c for c in concurrency_levels(df) if c > 1]
    return levels[-1] if levels else None
