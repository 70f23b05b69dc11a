"""The notes drawn on figures, each computed from the data it describes, so a note says what the
figure's own numbers show (tests/unit/test_figure_notes.py builds data where each note holds
and where it does not).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from analysis.absent import value_text, varied
from analysis.frame import NUMERIC, SPEC

CURVE_DIGITS = 3  # curves equal to 0.001 are drawn as one line: no figure here resolves finer


def held_knobs(rows: pd.DataFrame) -> str | None:
    """The knobs every trial ran at one value (no panel: a single strip shows no effect)."""
    shown = set(varied(rows))
    held = [n for n in NUMERIC if n not in shown and n in rows and rows[n].notna().any()]
    return f"one value in every trial, no panel: {', '.join(value_text(rows, n) for n in held)}" \
        if held else None  # fmt: skip


def unset_knobs(rows: pd.DataFrame) -> str | None:
    """The knobs no trial set; 'no speculation' only where those are the speculative ones."""
    unset = [n for n in NUMERIC if n not in rows or rows[n].isna().all()]
    if not unset:
        return None
    why = ", no speculation" if set(SPEC) <= set(unset) else ""
    return f"no trial set {', '.join(unset)}{why}"


def coinciding(
    curves: Sequence[tuple[str, Sequence[float]]], top: int | None = None
) -> list[tuple[list[str], list]]:
    """Curves grouped where they are equal to CURVE_DIGITS (drawn once, labelled with every
    trial), in the order first seen; at most `top` groups, a later curve equal to one of them
    still named in it."""
    groups: dict[tuple, tuple[list[str], list]] = {}
    for label, values in curves:
        key = tuple(round(float(v), CURVE_DIGITS) for v in values)
        if key in groups or top is None or len(groups) < top:
            groups.setdefault(key, ([], list(values)))[0].append(label)
    return list(groups.values())


def group_label(labels: list[str], suffix: str = "") -> str:
    """One legend entry for a group: the trials one per line, 'identical curves' said."""
    if len(labels) == 1:
        return labels[0] + suffix
    return "\n".join(labels) + suffix + f"\n({len(labels)} identical curves, drawn as one)"


def interval_note(bars: dict[tuple[str, int], float], table: list[dict]) -> str:
    """The speedup figure's note on its bars against the per-level table's paired intervals.

    bars: (trial, level) -> the bar's full width (unpaired: from each mean's own interval);
    table: the sweep's per-level rows (levels-*.json). Pairing run r of both (same prompts)
    cancels the prompts' spread, but with few runs its t quantile is wide, so either can be
    the narrower one: the note says which it was, level by level."""
    note = "bars: 95%, unpaired (from each mean's own interval)"
    narrower, wider = [], []
    for row in table:
        best = row.get("best") or {}
        low, high, c = best.get("low"), best.get("high"), row.get("concurrency")
        width = bars.get((best.get("trial"), c))
        if low is None or high is None or width is None:
            continue
        (narrower if high - low < width else wider).append(str(c))
    parts = []
    if narrower:
        parts.append(f"narrower at {', '.join(narrower)} in flight")
    if wider:
        parts.append(f"wider at {', '.join(wider)} in flight")
    if parts:
        note += f"\nthe per-level table's paired interval is {' and '.join(parts)}"
    return note


def out_of_memory(rows: pd.DataFrame) -> str | None:
    """The trials the capacity figure has no pool for: those that ran out of memory, and those
    predicted to and not launched, each counted as what it was."""
    ran = int((rows["outcome"] == "oom").sum())
    predicted = int((rows["outcome"] == "predicted_oom").sum())
    parts = [f"{ran} trial{'s' * (ran != 1)} ran out of memory"] if ran else []
    if predicted:
        what = "predicted to" if ran else f"trial{'s' * (predicted != 1)} predicted to run out"
        what += "" if ran else " of memory"
        parts.append(f"{predicted} {what} (not launched)")
    return f"{', '.join(parts)}: no pool to plot" if parts else None
