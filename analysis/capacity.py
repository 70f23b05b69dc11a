"""The capacity figures (docs/analysis.md): what the KV pool and HiCache did for throughput, from
the memory each trial recorded (harness.measure.memory: `kv_pool_tokens`, `cache_hit_rate`,
`kv_bound` and `output_tok_s_c{C}` at the load). Each returns None where the study has nothing
to show (analysis.absent: no level above 1, no memory recorded, one pool or one HiCache size)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis import absent, notes
from analysis.frame import OK, load_level, trials
from analysis.plots import LABELS, title


def _ok(df: pd.DataFrame, *columns: str) -> pd.DataFrame:
    rows = trials(df)
    rows = rows[rows["outcome"] == OK]
    for column in columns:
        if column not in rows:
            return rows.iloc[0:0]
        rows = rows[rows[column].notna()]
    return rows


def _hicache(rows: pd.DataFrame) -> pd.Series:
    return rows["hicache_size"].fillna(0).astype(int)


def throughput_vs_kv_capacity(df: pd.DataFrame) -> Figure | None:
    """x: the KV pool (max_total_num_tokens), y: output tok/s at the load with its 95% interval;
    colour: HiCache size; filled: KV-bound at that load; labels: mem_fraction_static."""
    if absent.throughput_vs_kv_capacity(df):
        return None
    level = load_level(df)
    y = f"output_tok_s_c{level}"
    rows = _ok(df, "kv_pool_tokens", y)
    fig, ax = plt.subplots(figsize=(8.5, 5.5))
    colours = plt.get_cmap("tab10")
    for i, (size, group) in enumerate(rows.groupby(_hicache(rows))):
        colour = colours(i)
        bound = group.get(f"kv_bound_c{level}", pd.Series(np.nan, index=group.index)) == 1
        ax.errorbar(
            group["kv_pool_tokens"],
            group[y],
            yerr=group.get(f"{y}_ci95"),
            fmt="none",
            ecolor=colour,
            alpha=0.6,
            capsize=3,
        )
        for filled, part in ((True, group[bound]), (False, group[~bound])):
            if part.empty:
                continue
            ax.scatter(
                part["kv_pool_tokens"],
                part[y],
                s=70,
                color=colour if filled else "white",
                edgecolor=colour,
                linewidth=1.8,
                label=f"HiCache {size} GB" + (", KV-bound" if filled else ", not KV-bound"),
                zorder=3,
            )
        for _, row in group.iterrows():
            mem = row.get("mem_fraction_static")
            if not pd.isna(mem):
                ax.annotate(  # HiCache's label below, the other's above: same pool, two points
                    f"{mem:.2f}",
                    (row["kv_pool_tokens"], row[y]),
                    xytext=(5, -11 if size else 5),
                    textcoords="offset points",
                    fontsize=7,
                    color="tab:gray",
                )
    failed = notes.out_of_memory(trials(df))
    if failed:
        ax.text(
            0.99,
            0.02,
            failed,
            transform=ax.transAxes,
            ha="right",
            fontsize=8,
            color="tab:red",
        )
    ax.xaxis.set_major_formatter(lambda v, _pos: f"{v / 1000:.0f}k")
    ax.set_xlabel("KV pool (max_total_num_tokens; labels: mem_fraction_static)")
    ax.set_ylabel(f"output throughput at {level} in flight (tok/s)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if not rows.empty:
        ax.legend(loc="best", fontsize=8)
    ax.set_title(title(df, "Throughput vs KV capacity"))
    fig.tight_layout()
    return fig


def cache_hit_rate_vs_hicache(df: pd.DataFrame) -> Figure | None:
    """x: hicache_size, y: the prefix cache hit rate at the load (the #cached-token share of
    prefill; each trial jittered, coloured by mem_fraction_static) and the mean per size."""
    if absent.cache_hit_rate_vs_hicache(df):
        return None
    level = load_level(df)
    hits = f"cache_hit_rate_c{level}"
    rows = _ok(df, hits)
    fig, ax = plt.subplots(figsize=(8, 5.5))
    sizes = sorted(_hicache(rows).unique())
    positions = {size: i for i, size in enumerate(sizes)}
    x = _hicache(rows).map(positions).astype(float)
    rng = np.random.default_rng(1)
    mem = rows.get("mem_fraction_static", pd.Series(np.nan, index=rows.index))
    scatter = ax.scatter(
        x + rng.uniform(-0.12, 0.12, len(rows)),
        100 * rows[hits],
        c=mem,
        cmap="viridis",
        s=60,
        edgecolor="black",
        zorder=3,
    )
    if mem.notna().any():
        fig.colorbar(scatter, ax=ax, label=LABELS["mem_fraction_static"])
    means = rows.groupby(_hicache(rows))[hits].mean()
    for size, value in means.items():
        i = positions[size]
        ax.hlines(100 * value, i - 0.3, i + 0.3, color="tab:red", linewidth=2, zorder=4)
        ax.annotate(
            f"mean {100 * value:.1f}%",
            (i + 0.3, 100 * value),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
            color="tab:red",
        )
    ax.set_xticks(range(len(sizes)), [f"{s} GB" for s in sizes])
    ax.set_xlim(-0.6, max(len(sizes) - 0.4, 0.6))
    ax.set_xlabel(LABELS["hicache_size"])
    ax.set_ylabel(f"prefix cache hit rate at {level} in flight (% of prompt tokens)")
    ax.set_ylim(0, 105)  # room above a hit rate near 100% (a shared prefix) for its label
    ax.grid(alpha=0.3, axis="y")
    ax.set_title(title(df, "Cache hit rate vs HiCache size"))
    fig.tight_layout()
    return fig
