"""Every figure the report draws, in its order, with why one is left out (analysis.absent):
`draw(name, df)` is the figure, or the line that says why there is none (what the notebooks
show in its place)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
from matplotlib.figure import Figure

from analysis import absent, acceptance, capacity, levels, plots

Maker = Callable[[pd.DataFrame], Figure | None]
FIGURES: dict[str, tuple[Maker, Callable[[pd.DataFrame], str | None]]] = {
    "speed_vs_baseline": (plots.speed_vs_baseline, absent.speed_vs_baseline),
    "accept_vs_speed": (plots.accept_vs_speed, absent.accept_vs_speed),
    "parameter_effects": (plots.parameter_effects, absent.parameter_effects),
    "oom_map": (plots.oom_map, absent.oom_map),
    "throughput_vs_concurrency": (
        plots.throughput_vs_concurrency,
        absent.throughput_vs_concurrency,
    ),
    "speedup_vs_concurrency": (levels.speedup_vs_concurrency, absent.speedup_vs_concurrency),
    "accept_by_position": (acceptance.accept_by_position, absent.accept_by_position),
    "accept_at_least": (acceptance.accept_at_least, absent.accept_at_least),
    "history": (plots.history, absent.history),
    "throughput_vs_kv_capacity": (
        capacity.throughput_vs_kv_capacity,
        absent.throughput_vs_kv_capacity,
    ),
    "cache_hit_rate_vs_hicache": (
        capacity.cache_hit_rate_vs_hicache,
        absent.cache_hit_rate_vs_hicache,
    ),
}
TITLES = {
    "speed_vs_baseline": "Speed against the baseline",
    "accept_vs_speed": "Accept length and speed",
    "parameter_effects": "Effect of each parameter",
    "oom_map": "Where memory runs out",
    "throughput_vs_concurrency": "Throughput against concurrency",
    "speedup_vs_concurrency": "Speedup against concurrency",
    "accept_by_position": "Acceptance by output position",
    "accept_at_least": "Acceptance by draft depth",
    "history": "Optimisation history",
    "throughput_vs_kv_capacity": "Throughput against KV capacity",
    "cache_hit_rate_vs_hicache": "Cache hit rate against HiCache size",
}


def why_not(name: str, df: pd.DataFrame) -> str | None:
    """The line the report prints instead of figure `name`; None where it has data."""
    return FIGURES[name][1](df)


def draw(name: str, df: pd.DataFrame) -> Figure | str:
    """Figure `name`, or the line that says why it has nothing to show."""
    make, reason = FIGURES[name]
    why = reason(df)
    figure = None if why else make(df)
    return figure if figure is not None else f"{TITLES[name]}: left out: {why or 'no data'}"
