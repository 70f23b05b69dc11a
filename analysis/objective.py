"""What the figures rank and label by: the study's objective, as its sweep recorded it.

The sweep writes the objective it ranked by into every summary (`objective_detail`:
sweep.study.answer.summary): its metric names, levels and weights. The figures read the first metric
(the one the console's table and Best line rank by): single-stream decode tok/s for `tok_s` and
`speedup`, output tok/s at the level for `throughput`, the weighted sum over the load profile for
the weighted objectives (computed here from the per-level columns, as sweep.study.trial.objective
does). A frame without a summary (a study measured before summaries said it) ranks by
single-stream tok/s, as the sweep did then.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

_LEVEL = re.compile(r"^(output_tok_s|decode_tok_s)_c(\d+)$")
_PER_LEVEL = {"weighted_throughput": "output_tok_s", "weighted_speed": "decode_tok_s"}


@dataclass(frozen=True)
class RankBy:
    column: str  # the frame's column the figures rank and plot
    label: str  # its axis label

    @property
    def ci(self) -> str:
        return f"{self.column}_ci95"


SINGLE_STREAM = RankBy("tok_s", "single-stream decode speed (tok/s)")


def rank_by(detail: dict | None) -> RankBy:
    if not detail or not detail.get("metrics"):
        return SINGLE_STREAM
    metric = str(detail["metrics"][0])
    if metric == "tok_s":
        return SINGLE_STREAM
    if metric in _PER_LEVEL:
        levels = "/".join(str(c) for c in detail.get("levels") or [])
        what = "output" if metric == "weighted_throughput" else "per-user decode"
        return RankBy(metric, f"{what} tok/s, weighted over {levels} in flight")
    match = _LEVEL.match(metric)
    if match:
        what = "output throughput" if match[1] == "output_tok_s" else "per-user decode speed"
        return RankBy(metric, f"{what} at {match[2]} in flight (tok/s)")
    return RankBy(metric, metric)


def latest_objective(folders: list[Path]) -> dict | None:
    """The objective the study's latest summary recorded (None: no summary says one)."""
    found = [p for d in folders for p in d.glob("summary-*.json")]
    for path in sorted(found, key=lambda p: p.name, reverse=True):
        detail = json.loads(path.read_text()).get("objective_detail")
        if detail:
            return detail
    return None


def apply(df: pd.DataFrame, detail: dict | None) -> pd.DataFrame:
    """The frame with the objective's column (a weighted one computed from its levels) and
    `df.attrs["rank_by"]`, which the figures read."""
    rank = rank_by(detail)
    if rank.column in _PER_LEVEL and detail:
        base = _PER_LEVEL[rank.column]
        levels, weights = detail.get("levels") or [], detail.get("weights") or []
        columns = [f"{base}_c{c}" for c in levels]
        if columns and all(c in df for c in columns):
            df[rank.column] = sum(w * df[c] for w, c in zip(weights, columns, strict=True))
            cis = [f"{c}_ci95" for c in columns]
            if all(c in df for c in cis):
                df[rank.ci] = np.sqrt(
                    sum((w * df[c]) ** 2 for w, c in zip(weights, cis, strict=True))
                )
    if rank.column not in df:
        rank = SINGLE_STREAM  # not measured in this frame: the figures say what they show
    df.attrs["rank_by"] = rank
    return df


def of(df: pd.DataFrame) -> RankBy:
    return df.attrs.get("rank_by", SINGLE_STREAM)
