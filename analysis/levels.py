"""The answer per concurrency in the report: the speedup-vs-concurrency figure, and reading the
sweep's per-level table (levels-<time>.json) and its answer (summary-<time>.json) from the study
folder (sweep.study.answer.parent_run; analysis.tables shows them).

The figure: at each level, each leading configuration's speed over the baseline's on the level's
metric (per-user decode tok/s at 1, output tok/s above, as sweep.study.answer.levels ranks), the
baseline at 1.0. The leading configurations are the fastest trial at each level (at most
`top`). Error bars: the ratio's 95% interval from the two means' own intervals (unpaired; the
table's intervals are the paired ones, and the figure's note says which is narrower where both
are known: `df.attrs["levels"]`, the table's rows, set by the report).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis import absent, notes
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


def speedup_vs_concurrency(df: pd.DataFrame, top: int = 4) -> Figure | None:
    """None without a baseline or with fewer than two levels (absent.speedup_vs_concurrency)."""
    from analysis.plots import title  # plots' title helper; plots imports nothing of this

    if absent.speedup_vs_concurrency(df):
        return None
    levels = concurrency_levels(df)
    fig, ax = plt.subplots(figsize=(8, 5))
    base = baseline(df)
    ax.axhline(1.0, color="tab:gray", linestyle="--", label="baseline (no speculation) = 1.0")
    widths: dict[tuple[str, int], float] = {}  # (trial, level) -> the bar's full width
    if base is not None:
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
                widths[(row["name"], c)] = 2 * errors[-1]
            ax.errorbar(
                x + 0.06 * (k - (len(lines) - 1) / 2),  # side by side: the bars stay apart
                ratios,
                yerr=errors,
                marker="o",
                capsize=3,
                label=f"{row['name']} {row['config']}",
            )
        ax.set_xticks(x, [str(c) for c in levels])
        bottom, top_ = ax.get_ylim()
        bottom = max(min(bottom, 1.0 - 0.05 * (top_ - bottom)), 0.0)  # 1.0 and room below it
        ax.set_ylim(bottom=bottom, top=max(top_, 1.0 + 0.05 * (top_ - bottom)))
        if bottom < 1.0:  # the region the label names is on the axis
            ax.axhspan(bottom, 1.0, color="tab:red", alpha=0.06)
            ax.text(0.01, 0.02, "below 1.0: speculation loses", transform=ax.transAxes,
                    fontsize=8, color="tab:red")  # fmt: skip
        # Which interval is narrower depends on the runs (analysis.notes.interval_note).
        note = notes.interval_note(widths, df.attrs.get("levels") or [])
        above = [c for c in levels if level_baseline(df, c)["name"] != base["name"]]
        if above:
            note += (
                f"\nat {', '.join(map(str, above))}: vs the baseline without a request cap "
                "(as the table)"
            )
    # Under the axes, where no bar or line can run through it.
    fig.text(0.01, 0.01, note, fontsize=7, color="tab:gray", va="bottom")
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylabel("speed / baseline (1 in flight: per-user; above: output tok/s)")
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_title(title(df, "Speedup vs concurrency"))
    fig.tight_layout(rect=(0, 0.03 * (note.count("\n") + 2), 1, 1))
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
