"""The acceptance figures: accept length by output position and P(>=k) by draft depth, for the
best configurations. Trials whose curves are equal (configurations the drafter accepts alike:
the same chain depth) are drawn as one line labelled with every one of them, so no trial hides
under another's line (analysis.notes.coinciding)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from analysis import absent, notes
from analysis.plots import ranked, title
from harness.record.results import AT_LEAST


def accept_by_position(df: pd.DataFrame, top: int = 3, window: int = 256) -> Figure | None:
    """Accept length per `window` output tokens (result.json `accept_by_window`): the best `top`
    distinct curves, each with every trial that has it. EAGLE-3's acceptance falls with output
    position over long generations. None where no trial recorded it (no speculation)."""
    if absent.accept_by_position(df):
        return None
    rows = [r for _, r in ranked(df).iterrows() if _curve(r)]
    fig, ax = plt.subplots(figsize=(8, 5))
    drawn = [(f"{r['name']} {r['config']}", _curve(r)) for r in rows]
    for labels, curve in notes.coinciding(drawn, top):  # the best `top` distinct curves
        starts = [window * i for i in range(len(curve))]
        ax.plot(starts, curve, marker="o", label=notes.group_label(labels))
    ax.legend(loc="best", fontsize=8)
    ax.set_xlabel(f"output position (start of each {window}-token window)")
    ax.set_ylabel("accept length (tokens per verify step)")
    ax.grid(alpha=0.3)
    ax.set_title(title(df, "Acceptance by output position"))
    fig.tight_layout()
    return fig


def accept_at_least(df: pd.DataFrame, top: int = 4) -> Figure | None:
    """P(>=k), the share of verify steps that yielded at least k + 1 tokens, by draft depth k: the
    best `top` distinct curves, each with every trial that has it, a panel per level that recorded
    it (result.json `step_histograms`).
    A chain's curve gives each shorter chain's accept length: 1 + the sum of its first s values.
    None where no trial recorded one (no speculation, or every level refused)."""
    if absent.accept_at_least(df):
        return None
    rows, panels = ranked(df), {}
    for level in sorted(int(c.removeprefix(AT_LEAST)) for c in df if str(c).startswith(AT_LEAST)):
        best = [r for _, r in rows.iterrows() if _curve(r, f"{AT_LEAST}{level}")]
        panels.update({level: best} if best else {})
    fig, axes = plt.subplots(
        1, len(panels), figsize=(1 + 5.5 * len(panels), 5), sharey=True, squeeze=False
    )
    for ax, (level, best) in zip(axes.flat, panels.items(), strict=True):
        by_label = {f"{r['name']} {r['config']}": r for r in best}
        drawn = [(label, _curve(r, f"{AT_LEAST}{level}")) for label, r in by_label.items()]
        for labels, values in notes.coinciding(drawn, top):  # the best `top` distinct curves
            tau = f": τ {1 + sum(values):.2f}"
            steps = by_label[labels[0]].get(f"accept_steps_c{level}")
            if len(labels) == 1 and steps is not None and steps == steps:  # NaN: not counted
                tau += f", {steps:.0f} steps"
            ax.plot(
                range(1, len(values) + 1), values, marker="o", label=notes.group_label(labels, tau)
            )
        ax.set(xlabel="draft depth k", ylim=(0, 1.02), title=f"{level} in flight")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(loc="lower left", fontsize=7)
        ax.grid(alpha=0.3)
    axes.flat[0].set_ylabel("P(>=k): share of verify steps with >= k + 1 tokens")
    fig.suptitle(title(df, "Acceptance by draft depth"))
    fig.tight_layout()
    return fig


def _curve(row: pd.Series, column: str = "accept_by_window") -> list[float]:
    value = row.get(column)
    return [float(v) for v in value] if isinstance(value, list | tuple) and value else []
