"""Why a figure has nothing to show, computed from the frame: one function per figure, each
returning the line the report prints where the figure would be, or None when the figure has
something to show. A figure that would be one dot, one strip or one point with a hint drawn
over it is left out with its line instead (the figures return None where these say why).
"""

from __future__ import annotations

import pandas as pd

from analysis import objective
from analysis.frame import (
    NUMERIC,
    OK,
    baseline,
    concurrency_levels,
    held_at,
    load_level,
    measured,
    trials,
)
from harness.record.results import AT_LEAST

MEMORY = ("mem_fraction_static", "hicache_size")


def ranked_ok(df: pd.DataFrame) -> pd.DataFrame:
    column = objective.of(df).column
    rows = measured(df)
    return rows[(rows["outcome"] == OK) & rows[column].notna()] if column in rows else rows[:0]


def varied(rows: pd.DataFrame) -> list[str]:
    """The knobs the trials ran at two values or more: the ones a panel can show an effect of."""
    return [n for n in NUMERIC if n in rows and rows[n].dropna().nunique() >= 2]


def value_text(rows: pd.DataFrame, name: str) -> str:
    held = held_at(rows, name)
    return f"{name} {held:g}" if held is not None else f"{name} unset (SGLang's default)"


def _has(rows: pd.DataFrame, column: str) -> pd.Series:
    return rows[column].notna() if column in rows else pd.Series(False, index=rows.index)


def _levels_text(df: pd.DataFrame) -> str | None:
    levels = concurrency_levels(df)
    if not levels:
        return "no concurrency level measured"
    if len(levels) == 1:
        return (
            f"one concurrency level measured ({levels[0]} in flight): a curve needs two "
            "(benchmark.concurrency=[1,8,64] measures more)"
        )
    return None


def speed_vs_baseline(df: pd.DataFrame) -> str | None:
    return None if not ranked_ok(df).empty else "no trial finished with a measurement"


def accept_vs_speed(df: pd.DataFrame) -> str | None:
    rows = ranked_ok(df)
    n = int(rows["accept_len"].notna().sum()) if "accept_len" in rows else 0
    if n == 0:
        return "no trial measured an accept length (no speculation in this study)"
    if n == 1:
        return "one trial measured an accept length: nothing to set it against"
    return None


def parameter_effects(df: pd.DataFrame) -> str | None:
    rows = trials(df)
    if not any(n in rows and rows[n].notna().any() for n in NUMERIC):
        return "no trial set a searched knob yet"
    if not varied(rows):
        held = ", ".join(value_text(rows, n) for n in NUMERIC if n in rows)
        return f"every trial ran the same values ({held}): no effect to show"
    return None


def oom_map(df: pd.DataFrame) -> str | None:
    rows = trials(df)
    if not [n for n in MEMORY if n in rows and rows[n].dropna().nunique() >= 2]:
        ran = " and ".join(value_text(rows, n) for n in MEMORY)
        return (
            f"every trial ran {ran}: no memory boundary to map (search.memory=sample searches them)"
        )
    return None


def throughput_vs_concurrency(df: pd.DataFrame) -> str | None:
    return _levels_text(df)


def speedup_vs_concurrency(df: pd.DataFrame) -> str | None:
    if baseline(df) is None:
        return "no baseline measured: no speedup to draw"
    return _levels_text(df)


def curves(df: pd.DataFrame, column: str) -> int:
    rows = ranked_ok(df)
    if column not in rows:
        return 0
    return int(rows[column].map(lambda v: isinstance(v, list | tuple) and len(v) > 0).sum())


def accept_by_position(df: pd.DataFrame) -> str | None:
    if curves(df, "accept_by_window") == 0:
        return (
            "no trial recorded acceptance by output position (it needs a stream chunk per "
            "verify step: a study without speculation, or server.stream_interval above 1, "
            "or chunks the client merged)"
        )
    return None


def accept_at_least(df: pd.DataFrame) -> str | None:
    columns = [c for c in df if str(c).startswith(AT_LEAST)]
    if not any(curves(df, c) for c in columns):
        return (
            "no trial recorded P(>=k) (no speculation, or each level refused: "
            "result.json step_histograms says why)"
        )
    return None


def history(df: pd.DataFrame) -> str | None:
    rows = trials(df)
    n = int((rows["outcome"] != "duplicate").sum())
    if n < 2:
        return f"{'one trial' if n == 1 else 'no trial'} ran: a history needs two"
    return None


def throughput_vs_kv_capacity(df: pd.DataFrame) -> str | None:
    level = load_level(df)
    if level is None:
        return "no level above 1 in flight measured (where the KV pool decides)"
    rows = trials(df)
    rows = rows[(rows["outcome"] == OK) & _has(rows, f"output_tok_s_c{level}")]
    pools = rows["kv_pool_tokens"].dropna().unique() if "kv_pool_tokens" in rows else []
    if len(pools) == 0:
        return "no trial recorded its KV pool"
    if len(pools) == 1:
        return f"every trial ran one KV pool ({pools[0]:,.0f} tokens): nothing to set it against"
    return None


def cache_hit_rate_vs_hicache(df: pd.DataFrame) -> str | None:
    level = load_level(df)
    if level is None:
        return "no level above 1 in flight measured (where the prefix cache is shared)"
    rows = trials(df)
    hits = f"cache_hit_rate_c{level}"
    rows = rows[(rows["outcome"] == OK) & _has(rows, hits)]
    if rows.empty:
        return "no trial recorded a cache hit rate"
    sizes = rows["hicache_size"].fillna(0).unique()
    if len(sizes) == 1:
        return f"every trial ran hicache_size {sizes[0]:g}: one column, nothing to compare"
    return None
