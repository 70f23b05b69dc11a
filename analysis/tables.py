"""The report's tables in words (analysis.words), each with the columns that have something to
show and one line for each column or table left out: the trials, the recommendation per level
(levels-<time>.json) and Optuna's parameter importances (importances.json), the last two as the
sweep wrote them into the study folder (sweep.study.answer.parent_run).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from analysis import objective, words
from analysis.absent import ranked_ok, value_text, varied
from analysis.frame import NUMERIC, trials
from harness.record.precision import meaningful

TRIAL_COLUMNS = [
    "name",
    "role",
    "config",
    "outcome",
    "tok_s",
    "tok_s_ci95",
    "accept_len",
    "speedup_vs_baseline",
    "related",
    "warning",
]
# fANOVA fits a random forest to the trials: on fewer than this many, each split of its trees
# rests on one or two trials, and the shares it reports are those trials' noise.
MIN_IMPORTANCE_TRIALS = 10


def trials_csv(df: pd.DataFrame) -> pd.DataFrame:
    """trials.csv: the record's own column names (a file for pandas), best first per role."""
    rows = df.copy()
    rows["_order"] = rows["tok_s"].where(rows["outcome"].isin(["ok", "pruned"]), -1).fillna(-1)
    rows = rows.sort_values(["role", "_order"], ascending=[True, False])
    return rows[[c for c in TRIAL_COLUMNS if c in rows]].reset_index(drop=True)


def trials_table(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The page's trials table: each metric at its meaningful digits, in words; a column no row
    has a value in is left out with a line."""
    table = trials_csv(df)
    for column in ("tok_s", "tok_s_ci95", "accept_len", "speedup_vs_baseline"):
        if column in table:
            table[column] = table[column].map(
                lambda v, c=column: v if pd.isna(v) else meaningful(c, v)
            )
    said = []
    for column in [c for c in table if table[c].isna().all()]:
        said.append(f"{words.TRIAL_COLUMNS.get(column, column)}: no trial has one")
        table = table.drop(columns=column)
    return words.trials_table(table), said


def levels_table(rows: list[dict]) -> tuple[pd.DataFrame, list[str]]:
    """The recommendation per level; 'compared with' only where the levels' baselines differ,
    the equal-cap speedup and the trials over the limits only where a level has one."""
    out = []
    for row in rows:
        best = row.get("best") or {}
        low, high = best.get("low"), best.get("high")
        value, ci = best.get("value"), best.get("ci95")
        metric = str(row.get("metric") or "")
        out.append(
            {
                "in flight": row["concurrency"],
                "measured as": words.METRICS.get(metric, words.spaced(metric)),
                "baseline": _value(metric, row.get("baseline")),
                "best": f"{best.get('trial', '-')} {best.get('config', '')}".strip(),
                "its value": _value(metric, value, ci),
                "speedup": _ratio(best.get("speedup")),
                "speedup 95% (paired)": f"{low:.2f}–{high:.2f}×" if low is not None else "-",
                "deploy": row["recommend"],
                "compared with": words.BASELINE_KINDS.get(
                    row.get("baseline_kind", "equal_caps"), "?"
                ),
                "speedup at equal caps": _ratio((row.get("equal_caps") or {}).get("speedup")),
                "over the limits": ", ".join(row.get("excluded") or []) or "-",
            }
        )
    table = pd.DataFrame(out)
    said = []
    kinds = table["compared with"].unique() if not table.empty else []
    if len(kinds) == 1:
        said.append(f"compared with: {kinds[0]} at every level")
        table = table.drop(columns="compared with")
    if not table.empty and (table["speedup at equal caps"] == "-").all():
        said.append(
            "speedup at equal caps: no level above the trials' request cap was compared with "
            "an uncapped baseline"
        )
        table = table.drop(columns="speedup at equal caps")
    if not table.empty and (table["over the limits"] == "-").all():
        said.append("over the limits: no trial was left out for a latency limit")
        table = table.drop(columns="over the limits")
    return table, said


def _value(metric: str, value: float | None, ci: float | None = None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    text = f"{meaningful(metric, value):g}"
    return f"{text} ± {meaningful(metric, ci):g}" if ci is not None else text


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{meaningful('speedup', value):.3f}×"


def importances(folders: list[Path], df: pd.DataFrame) -> tuple[pd.DataFrame | None, list[str]]:
    """Optuna's parameter importances (fANOVA), a column per objective, or None with the line
    why: too few trials, or trials whose speeds their intervals cannot tell apart. A knob every
    trial ran at one value, or one Optuna set in only some trials, is named, not ranked."""
    found = [f / "importances.json" for f in folders if (f / "importances.json").is_file()]
    if not found:
        return None, ["the sweep recorded no parameter importances (too few feasible trials)"]
    rows, rank = ranked_ok(df), objective.of(df)
    if len(rows) < MIN_IMPORTANCE_TRIALS:
        return None, [
            f"fitted on at most {len(rows)} measured trials; under "
            f"{MIN_IMPORTANCE_TRIALS} its forest splits on one or two trials, and its shares "
            "are their noise"
        ]
    tied = _tied(rows, rank)
    if tied:
        return None, [tied]
    data = json.loads(found[0].read_text())
    table = pd.DataFrame(data)
    table = table.map(lambda v: v if pd.isna(v) else meaningful("importance_share", v))
    table.columns = [f"share of {label}" for label in table.columns]
    table = table.rename_axis("parameter").reset_index()  # a column: no header row of its own
    said = []
    everyone = trials(df)
    for name in NUMERIC:
        if name in set(table["parameter"]) or name not in everyone:
            continue
        if name in varied(everyone):
            said.append(
                f"{name}: not ranked: Optuna set it in only some trials (it depends on another "
                "parameter), and fANOVA ranks those set in every trial"
            )
        elif everyone[name].notna().any():
            said.append(f"{value_text(everyone, name)} in every trial: nothing to rank")
    return table, said


def _tied(rows: pd.DataFrame, rank: objective.RankBy) -> str | None:
    """A line where the fastest and the slowest measured trial lie within each other's 95%
    intervals: every difference fANOVA would share out is noise."""
    best, worst = rows.loc[rows[rank.column].idxmax()], rows.loc[rows[rank.column].idxmin()]
    gap = best[rank.column] - worst[rank.column]
    noise = math.hypot(best.get(rank.ci, math.nan), worst.get(rank.ci, math.nan))
    if math.isnan(noise) or gap > noise:
        return None
    return (
        f"the measured trials' speeds ({worst[rank.column]:.1f} to "
        f"{best[rank.column]:.1f}) differ by less than their 95% intervals, so any share fANOVA "
        "gave a parameter would be noise"
    )
