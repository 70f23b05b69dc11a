"""Figures from the frame of `analysis.load.load_runs`. Each returns a matplotlib Figure whose
title names the study and the engine (and says SIMULATED when it was), or None where it has
nothing to show (analysis.absent says why: the report prints that line instead)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis import absent, notes, objective
from analysis.frame import (
    baseline,
    concurrency_levels,
    measured,
    trials,
    uncapped_baseline,
)

TOK_S = objective.SINGLE_STREAM.label
FAIL_STYLE = {
    "oom": ("x", "tab:red", "oom"),
    "predicted_oom": ("v", "tab:purple", "predicted oom (not launched)"),
    "crash": ("X", "black", "crash"),
    "known_crash": ("P", "dimgray", "known crash (not launched)"),
    "timeout": ("d", "tab:orange", "timeout"),
}
LABELS = {
    "speculative_num_steps": "speculative_num_steps",
    "speculative_eagle_topk": "speculative_eagle_topk",
    "speculative_num_draft_tokens": "speculative_num_draft_tokens",
    "mem_fraction_static": "mem_fraction_static (share of GPU memory)",
    "hicache_size": "hicache_size (GB host RAM per rank)",
}


def title(df: pd.DataFrame, what: str) -> str:
    study = df["study"].dropna().iloc[0] if "study" in df and df["study"].notna().any() else "?"
    engine = df["engine"].dropna().iloc[0] if df["engine"].notna().any() else "?"
    simulated = bool(df["simulated"].any())
    return f"{what} — {study} (engine {engine}{', SIMULATED' if simulated else ''})"


def ranked(df: pd.DataFrame) -> pd.DataFrame:
    """The measured trials, best first by the study's objective (analysis.objective)."""
    column = objective.of(df).column
    rows = measured(df)
    return rows[rows[column].notna()].sort_values(column, ascending=False)


def _baseline_band(ax, df: pd.DataFrame, horizontal: bool = True) -> float | None:
    """The baseline's value and interval where the study measured one (None: it did not)."""
    base, rank = baseline(df), objective.of(df)
    if base is None or pd.isna(base.get(rank.column, np.nan)):
        return None
    value, ci = base[rank.column], base.get(rank.ci, np.nan)
    if horizontal:
        ax.axhline(value, color="tab:gray", linestyle="--", label=f"baseline {value:.1f} tok/s")
        if not np.isnan(ci):
            ax.axhspan(
                value - ci, value + ci, color="tab:gray", alpha=0.15, label="baseline 95% CI"
            )
    return value


def speed_vs_baseline(df: pd.DataFrame, top: int = 10) -> Figure | None:
    if absent.speed_vs_baseline(df):
        return None
    rank = objective.of(df)
    best = ranked(df)
    best = best[best["outcome"] == "ok"].head(top)
    fig, ax = plt.subplots(figsize=(11, 5.5))
    base = _baseline_band(ax, df)
    x = np.arange(len(best))
    bars = ax.bar(
        x,
        best[rank.column],
        yerr=best.get(rank.ci),
        capsize=4,
        color="tab:blue",
        label="trial (95% CI)",
    )
    if base:
        errors = best.get(rank.ci, pd.Series(0.0, index=best.index)).fillna(0.0)
        for bar, value, error in zip(bars, best[rank.column], errors, strict=True):
            ax.annotate(  # above the interval's cap, where the error bar cannot cross it
                f"{value / base:.2f}×",
                (bar.get_x() + bar.get_width() / 2, value + error),
                xytext=(0, 6),
                textcoords="offset points",
                ha="center",
                fontsize=8,
            )
    ax.set_xticks(
        x,
        [f"{n}\n{c}" for n, c in zip(best["name"], best["config"], strict=True)],
        rotation=30,
        ha="right",
        fontsize=7,
    )
    ax.set_xlabel("configuration (steps/topk/draft tokens, or speculation off)")
    ax.set_ylabel(rank.label)
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower right")
    against = "vs the baseline" if base else "(no baseline measured)"
    ax.set_title(title(df, f"Top {len(best)} configurations {against}"))
    fig.tight_layout()
    return fig


def accept_vs_speed(df: pd.DataFrame) -> Figure | None:
    """None where fewer than two trials measured an accept length (absent.accept_vs_speed)."""
    if absent.accept_vs_speed(df):
        return None
    rank = objective.of(df)
    rows = ranked(df)
    rows = rows[rows["accept_len"].notna()]
    fig, ax = plt.subplots(figsize=(8, 5.5))
    markers = {1: "o", 2: "s", 4: "^"}
    scatter = None
    for topk, group in rows.groupby("speculative_eagle_topk"):
        scatter = ax.scatter(
            group["accept_len"],
            group[rank.column],
            c=group["speculative_num_draft_tokens"],
            cmap="viridis",
            vmin=rows["speculative_num_draft_tokens"].min(),
            vmax=rows["speculative_num_draft_tokens"].max(),
            marker=markers.get(int(topk), "D"),
            s=60,
            edgecolor="black",
            label=f"topk {int(topk)}",
        )
    if scatter is not None:
        fig.colorbar(scatter, ax=ax, label="speculative_num_draft_tokens")
    _baseline_band(ax, df)
    ax.set_xlabel("accept length (tokens per verify step)")
    ax.set_ylabel(rank.label)
    ax.legend(loc="best")
    ax.set_title(title(df, "Accept length vs speed"))
    fig.tight_layout()
    return fig


def parameter_effects(df: pd.DataFrame) -> Figure | None:
    """One panel per knob the trials ran at two values or more: a knob held at one value would
    be a single strip, so the title names it with its value instead, and names the knobs no trial
    set (a study without speculation: the capacity presets). None where no knob varied."""
    if absent.parameter_effects(df):
        return None
    rows = trials(df)
    shown = absent.varied(rows)
    columns = len(shown) + 1 if len(shown) < 4 else 3  # one row where the legend fits in it
    height = -(-(len(shown) + 1) // columns)  # the legend takes the last panel
    fig, grid = plt.subplots(
        height, columns, figsize=(4.4 * columns, 4 * height), sharey=True, squeeze=False
    )
    axes, legend_ax = list(grid.flat[: len(shown)]), grid.flat[-1]
    for spare in grid.flat[len(shown) : -1]:
        spare.axis("off")
    rank = objective.of(df)
    ok = ranked(df)
    floor = (ok[rank.column].min() if not ok.empty else 1.0) * 0.9
    for ax, name in zip(axes, shown, strict=True):
        # No jitter: a spread would invent values nobody ran. Trials on one point overlap.
        ax.scatter(ok[name], ok[rank.column], s=30, color="tab:blue", alpha=0.6, label="measured")
        for outcome, (marker, color, label) in FAIL_STYLE.items():
            failed = rows[rows["outcome"] == outcome]
            if not failed.empty:
                ax.scatter(
                    failed[name],
                    np.full(len(failed), floor),
                    marker=marker,
                    color=color,
                    s=50,
                    label=label,
                )
        _baseline_band(ax, df)
        ax.set_xlabel(LABELS[name], fontsize=8)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(rank.label)
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    legend_ax.axis("off")
    legend_ax.legend(handles, labels, loc="center", fontsize=9)
    said = [n for n in (notes.held_knobs(rows), notes.unset_knobs(rows)) if n]
    why = "".join(f"\n({n})" for n in said)
    fig.suptitle(title(df, "Effect of each parameter (failures at the bottom)") + why)
    fig.tight_layout()
    return fig


def oom_map(df: pd.DataFrame) -> Figure | None:
    """None where every trial ran one fraction and one HiCache size (a single dot)."""
    if absent.oom_map(df):
        return None
    rows = trials(df)
    fig, ax = plt.subplots(figsize=(8, 5))
    styles = {
        "ok": ("o", "tab:green", "ok"),
        "pruned": ("o", "tab:olive", "ok (stopped early)"),
        **FAIL_STYLE,
    }
    for outcome, (marker, color, label) in styles.items():
        group = rows[rows["outcome"] == outcome]
        if group.empty:
            continue
        ax.scatter(
            group["mem_fraction_static"],
            group["hicache_size"],
            marker=marker,
            color=color,
            s=60,
            label=label,
        )
    ax.set_xlabel(LABELS["mem_fraction_static"])
    ax.set_ylabel(LABELS["hicache_size"])
    ax.legend(loc="best")
    ax.grid(alpha=0.3)
    ax.set_title(title(df, "Where memory runs out"))
    fig.tight_layout()
    return fig


def throughput_vs_concurrency(df: pd.DataFrame, top: int = 3) -> Figure | None:
    """None with fewer than two levels (a curve of one point)."""
    if absent.throughput_vs_concurrency(df):
        return None
    levels = concurrency_levels(df)
    fig, ax = plt.subplots(figsize=(8, 5))
    # The study's baseline, the one at SGLang's own running-request limit where the study
    # measured it (the per-level answers above the cap compare with it), and the study's best.
    free = uncapped_baseline(df)
    rows = [baseline(df), free] + [r for _, r in ranked(df).head(top).iterrows()]
    for row in rows:
        if row is None:
            continue
        values = [row.get(f"output_tok_s_c{c}", np.nan) for c in levels]
        if row is free:
            label, style = "baseline at SGLang's own running-request limit (no cap)", ":"
        elif row["role"] == "baseline":
            label, style = row["config"], "--"
        else:
            label, style = f"{row['name']} {row['config']}", "-"
        ax.plot(levels, values, style, marker="o", label=label)
    ax.set_xscale("log")
    ax.set_xticks(levels, [str(c) for c in levels])
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylabel("aggregate output throughput (tok/s)")
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_title(title(df, "Throughput vs concurrency"))
    fig.tight_layout()
    return fig


def history(df: pd.DataFrame) -> Figure | None:
    if absent.history(df):
        return None
    rank = objective.of(df)
    # A duplicate is not a measurement (its source's numbers): left out, not plotted twice.
    rows = trials(df)
    rows = rows[rows["outcome"] != "duplicate"].reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(9, 5))
    order = np.arange(1, len(rows) + 1)
    values = rows[rank.column].where(rows["outcome"] == "ok")
    ax.scatter(order, values, color="tab:blue", s=30, label="trial")
    best = values.fillna(-np.inf).cummax().replace(-np.inf, np.nan)
    ax.step(order, best, where="post", color="tab:green", label="best so far")
    plotted = rows[rank.column].where(rows["outcome"].isin(["ok", "pruned"]))
    floor = (plotted.min() if plotted.notna().any() else 1.0) * 0.95
    for outcome, (marker, color, label) in FAIL_STYLE.items():
        mask = rows["outcome"] == outcome
        if mask.any():
            ax.scatter(
                order[mask], np.full(mask.sum(), floor), marker=marker, color=color, label=label
            )
    pruned = rows["outcome"] == "pruned"
    if pruned.any():
        ax.scatter(
            order[pruned],
            rows[rank.column][pruned],
            marker="o",
            facecolors="none",
            edgecolors="tab:olive",
            label="stopped early",
        )
    _baseline_band(ax, df)
    ax.set_xlabel("trial (in the order measured; duplicates left out)")
    ax.set_ylabel(rank.label)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_title(title(df, "Optimisation history"))
    fig.tight_layout()
    return fig
