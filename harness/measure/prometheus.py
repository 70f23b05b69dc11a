"""SGLang's `/metrics` text (Prometheus exposition format) read into {name: value}.

Parsed by `prometheus_client`'s own text parser (the library SGLang exports with), so NaN, +Inf,
timestamps, escaped label values, HELP/TYPE lines and histograms read as Prometheus reads them.
Only the `sglang:` samples are kept, and how a name's series combine follows its type:

- a counter's series (histogram `_sum`/`_count` alike) are disjoint shares of one total (per
  `is_streaming`, per `cache_source`, per rank), so they are summed: the server's total;
  `_created` samples (a counter's creation time) are dropped;
- a gauge's series are never summed: with TP every rank reports the same scheduler state, and a
  sum of ranks' `token_usage` is no usage. A gauge reads as its `tp_rank="0"` series (the first
  series where no `tp_rank` label is there);
- a sample without a TYPE line counts as a counter when its name ends in `_total`, else as a
  gauge (Prometheus' own naming rule);
- histogram buckets are left out (no reader needs them).

Both readers of `/metrics` parse through it: the accept length's counter deltas
(`harness.measure.acceptance`) and the memory window's (`harness.measure.memory_probe`).
"""

from __future__ import annotations

import math

from prometheus_client.parser import text_string_to_metric_families

PREFIX = "sglang:"
_SUMMED_TYPES = {"counter", "histogram", "summary", "gaugehistogram"}


def prometheus_values(text: str) -> dict[str, float]:
    """{sample name: value}: counters summed over their series, a gauge from one series."""
    summed: dict[str, float] = {}
    gauges: dict[str, tuple[bool, float]] = {}  # name -> (from tp_rank 0, value)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if not name.startswith(PREFIX) or name.endswith(("_created", "_bucket")):
                continue
            kind = family.type
            if kind == "unknown":
                kind = "counter" if name.endswith("_total") else "gauge"
            if kind in _SUMMED_TYPES:
                if not math.isnan(sample.value):
                    summed[name] = summed.get(name, 0.0) + sample.value
                continue
            rank0 = sample.labels.get("tp_rank", "0") == "0"
            if name not in gauges or (rank0 and not gauges[name][0]):
                gauges[name] = (rank0, sample.value)
    return {**{k: v for k, (_, v) in gauges.items()}, **summed}
