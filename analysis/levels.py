"""The answer per concurrency in the report: the speedup-vs-concurrency figure, the sweep's
per-level table (levels-<time>.json) and Optuna's parameter importances (importances.json), both
written by the sweep into its study folder (sweep.study.answer.parent_run).

The figure: at each level, each leading configuration's speed over the baseline's on the level's
metric (per-user decode tok/s at 1, output tok/s above, as sweep.study.answer.levels ranks), the
baseline at 1.0. The leading configurations are the fastest trial at each level (at most
`top`). Error bars: the ratio's 95% interval from the two means' own intervals (unpaired; the
table's intervals are the paired ones).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.frame import baseline, concurrency_levels, level_baseline, measured


def level_column(concurrency: int) -> str:
    return "decode_tok_s_c1" if concurrency == 1 else f"output_tok_s_c{concurrency}"


def leaders(df: pd.DataFrame, levels: list[int], top: int = 4) -> list[pd.Series]:
    rows = measured(df)
    rows = rows[rows["outcome"] == "ok"]
    found: list[pd.Series] = []
    for c in levels:
        column = level_column(c)
        if column not in rows or rows[column].notna().sum() == 0:
            continue
        best = rows.loc[rows[column].idxmax()]
        if all(best["name"] != r["name"] for r in found):
            found.append(best)
    return found[:top]


def speedup_vs_concurrency(df: pd.DataFrame, top: int = 4) -> Figure:
    from analysis.plots import title  # plots registers this figure: imported late

    levels = concurrency_levels(df)
    fig, ax = plt.subplots(figsize=(8, 5))
    base = baseline(df)
    ax.axhline(1.0, color="tab:gray", linestyle="--", label="baseline (no speculation) = 1.0")
    if base is None or not levels:
        ax.text(0.5, 0.5, "no baseline measured", transform=ax.transAxes, ha="center")
    else:
        x = np.arange(len(levels))
        lines = leaders(df, levels, top)
        for k, row in enumerate(lines):
            ratios, errors = [], []
            for c in levels:
                col = level_column(c)
                against = level_baseline(df, c)  # the per-level table's baseline at C
                t, b = row.get(col, np.nan), against.get(col, np.nan)
                ratio = t / b if b and not pd.isna(t) and not pd.isna(b) else np.nan
                rel = math.hypot(
                    _rel(row.get(f"{col}_ci95"), t), _rel(against.get(f"{col}_ci95"), b)
                )
                ratios.append(ratio)
                errors.append(ratio * rel if not pd.isna(ratio) else np.nan)
            ax.errorbar(
                x + 0.06 * (k - (len(lines) - 1) / 2),  # side by side: the bars stay apart
                ratios,
                yerr=errors,
                marker="o",
                capsize=3,
                label=f"{row['name']} {row['config']}",
            )
        ax.set_xticks(x, [str(c) for c in levels])
        bottom = max(ax.get_ylim()[0], 0.0)
        ax.set_ylim(bottom=bottom)
        ax.axhspan(bottom, 1.0, color="tab:red", alpha=0.06)
        ax.text(0.01, 0.02, "below 1.0: speculation loses", transform=ax.transAxes,
                fontsize=8, color="tab:red")  # fmt: skip
        # The bars come from each mean's own interval; the per-level table pairs run r of both
        # (same prompts), which cancels the prompts' spread: its interval is the narrower one.
        note = "bars: 95%, unpaired (the per-level table's paired interval is tighter)"
        above = [c for c in levels if level_baseline(df, c)["name"] != base["name"]]
        if above:
            note += (
                f"\nat {', '.join(map(str, above))}: vs the baseline without a request cap "
                "(as the table)"
            )
        ax.text(0.01, 0.98, note,
                transform=ax.transAxes, fontsize=7, color="tab:gray", va="top")  # fmt: skip
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylabel("speed / baseline (1 in flight: per-user; above: output tok/s)")
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_title(title(df, "Speedup vs concurrency"))
    fig.tight_layout()
    return fig


def _rel(ci, value) -> float:
    if ci is None or pd.isna(ci) or not value or pd.isna(value):
        return 0.0
    return float(ci) / float(value)


def study_folders(results: str | Path, df: pd.DataFrame) -> list[Path]:
    """The study folders of the frame's trials (<results>/<study>/: where the sweep wrote)."""
    studies = df["study"].dropna().unique() if "study" in df else []
    return sorted(Path(results) / str(s) for s in studies if (Path(results) / str(s)).is_dir())


def latest_levels(folders: list[Path]) -> list[dict]:
    found = [p for d in folders for p in d.glob("levels-*.json")]
    if not found:
        return []
    return json.loads(max(found, key=lambda p: p.name).read_text())


def latest_deploy(folders: list[Path]) -> str | None:
    """The study's answer as its latest sweep's summary wrote it
    (sweep.study.answer.recommendation): the line
    the console ended with, without its "Next:" command. None before any summary has one."""
    found = [p for d in folders for p in d.glob("summary-*.json")]
    for path in sorted(found, key=lambda p: p.name, reverse=True):
        decision = json.loads(path.read_text()).get("deploy") or {}
        if decision.get("line"):
            return decision["line"].splitlines()[0]
    return None


def levels_table(rows: list[dict]) -> pd.DataFrame:
    out = []
    for row in rows:
        best = row.get("best") or {}
        low, high = best.get("low"), best.get("high")
        speedup = best.get("speedup")
        out.append(
            {
                "concurrency": row["concurrency"],
                "metric": row["metric"],
                "baseline": row.get("baseline"),
                "best": f"{best.get('trial', '-')} {best.get('config', '')}".strip(),
                "value": best.get("value"),
                "ci95": best.get("ci95"),
                "speedup": speedup,
                "speedup 95%": f"[{low:.2f}, {high:.2f}]" if low is not None else "-",
                "deploy": row["recommend"],
                # which baseline: "equal_caps" (the trials' cap) or "uncapped" (SGLang's own
                # limit, above the cap); the equal-cap speedup beside an uncapped answer
                "baseline kind": row.get("baseline_kind", "equal_caps"),
                "speedup equal caps": (row.get("equal_caps") or {}).get("speedup"),
                "over limits": ", ".join(row.get("excluded") or []) or "-",
            }
        )
    return pd.DataFrame(out).round(3)


def importances(folders: list[Path]) -> pd.DataFrame:
    """Optuna's parameter importances (fANOVA), one column per objective; a parameter
    the study held still is not in it (sweep.study.answer.parent_run); a missing value stays so."""
    for folder in folders:
        path = folder / "importances.json"
        if path.is_file():
            data = json.loads(path.read_text())
            return pd.DataFrame(data).round(3).rename_axis("parameter")
    return pd.DataFrame()
