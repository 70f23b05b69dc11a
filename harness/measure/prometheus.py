"""SGLang's `/metrics` text (Prometheus exposition format) read into {name: value}.

Only the `sglang:` samples are kept, each name's samples summed over their labels (one per TP
rank, per cache source, ...), so a counter reads as the server's total. Both readers of `/metrics`
parse through it: the accept length's counter deltas (`harness.measure.acceptance`) and the
memory window's (`harness.measure.memory_probe`).
"""

from __future__ import annotations

import re

_METRIC = re.compile(r"^(sglang:[a-z_]+)(?:\{[^}]*\})?\s+([0-9.eE+-]+)$", re.M)


def prometheus_values(text: str) -> dict[str, float]:
    values: dict[str, float] = {}
    for name, value in _METRIC.findall(text):
        values[name] = values.get(name, 0.0) + float(value)  # sum over ranks/labels
    return values
