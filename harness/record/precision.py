"""The digits a metric is worth, one rule for every place a person reads it (MLflow's columns, the
report's table).

Why these digits: a number shown past what the measurement can tell invites reading noise as a
difference. A run's tok/s moves by about 1 tok/s at 1 in flight (more above), so tok/s keeps
0.1, as the console prints it; accept length keeps 0.01 (the console's "accept len 2.05": its
runs differ in the second decimal); a ratio or share (speedup, P(>=k), hit rate, token usage)
keeps 0.001, which tells 0.903x from 0.904x and no further; latencies in ms keep 0.1 ms, seconds
0.01 s, a percentage 0.01. A count (an integral value) is kept as it is, and anything else keeps
4 significant digits. The trial folders keep every digit: rounding is for reading, and the
folders are what analysis and resume compute from.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

_LEVEL = re.compile(r"_c\d+$")
SIGNIFICANT = 4  # anything no rule below names


def step(name: str) -> float | None:
    """The unit `name` is rounded to; None: SIGNIFICANT significant digits."""
    key = _LEVEL.sub("", name.removeprefix("run."))
    if "accept_len" in key:
        return 0.01
    if key.endswith("_cv") or any(
        part in key
        for part in ("speedup", "_share", "_rate", "accept_at_least", "kv_bound", "token_usage")
    ):
        return 0.001
    if "tok_s" in key:
        return 0.1
    if "_ms" in key:
        return 0.1
    if key.endswith("_pct"):
        return 0.01
    if key.endswith("_s"):
        return 0.01
    return None


def meaningful(name: str, value: float) -> float:
    """`value` of the metric `name` at the digits it is worth (module docstring)."""
    value = float(value)
    if not math.isfinite(value) or value == int(value):
        return value
    unit = step(name)
    if unit is None:
        digits = SIGNIFICANT - 1 - math.floor(math.log10(abs(value)))
        return round(value, digits)
    decimals = -math.floor(math.log10(unit) + 1e-9)
    return round(value, decimals)


def rounded(metrics: Mapping[str, float]) -> dict[str, float]:
    """Every metric at its meaningful digits."""
    return {name: meaningful(name, value) for name, value in metrics.items()}
