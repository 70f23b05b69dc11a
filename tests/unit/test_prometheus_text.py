"""SGLang's /metrics text read as Prometheus reads it (harness.measure.prometheus): counters
summed over their series, gauges never summed across ranks, NaN/+Inf/timestamps/labels parsed."""

from __future__ import annotations

import math

from harness.measure.prometheus import prometheus_values

# The shape prometheus_client writes for SGLang 0.5.23 at TP=2: HELP/TYPE lines, `_created`
# samples, escaped label values, a histogram with its +Inf bucket, a NaN gauge, timestamps.
TEXT = r"""# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{engine_type="unified",model_name="kimi \"k2.5\"",pp_rank="0",tp_rank="1"} 0.25
sglang:token_usage{engine_type="unified",model_name="kimi \"k2.5\"",pp_rank="0",tp_rank="0"} 0.5
# HELP sglang:spec_accept_length The average acceptance length.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{tp_rank="0"} NaN
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{is_streaming="true",model_name="m"} 1200.0 1764762000000
sglang:prompt_tokens_total{is_streaming="false",model_name="m"} 300.0
sglang:prompt_tokens_created{is_streaming="true",model_name="m"} 1.7647e+09
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{cache_source="device",model_name="m"} 800.0
sglang:cached_tokens_total{cache_source="host",model_name="m"} 100.0
# TYPE sglang:num_retracted_requests_total counter
sglang:num_retracted_requests_total{tp_rank="0"} 2.0
sglang:num_retracted_requests_total{tp_rank="1"} 3.0
# HELP sglang:e2e_request_latency_seconds Histogram of End-to-end request latency in seconds
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_bucket{le="1.0",model_name="m"} 1.0
sglang:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 4.0
sglang:e2e_request_latency_seconds_count{model_name="m"} 4.0
sglang:e2e_request_latency_seconds_sum{model_name="m"} 9.5
sglang:max_total_num_tokens{tp_rank="0"} +Inf
python_gc_objects_collected_total{generation="0"} 7.0
"""


def test_counters_sum_over_their_series_and_drop_created():
    values = prometheus_values(TEXT)
    assert values["sglang:prompt_tokens_total"] == 1500.0  # streaming + not
    assert values["sglang:cached_tokens_total"] == 900.0  # device + host
    assert values["sglang:num_retracted_requests_total"] == 5.0  # both ranks
    assert values["sglang:e2e_request_latency_seconds_count"] == 4.0
    assert values["sglang:e2e_request_latency_seconds_sum"] == 9.5
    assert not any(k.endswith(("_created", "_bucket")) for k in values)
    assert not any(not k.startswith("sglang:") for k in values)


def test_a_gauge_is_rank_0s_never_a_sum_of_ranks():
    values = prometheus_values(TEXT)
    assert values["sglang:token_usage"] == 0.5  # tp_rank 0's, though rank 1 came first
    assert math.isnan(values["sglang:spec_accept_length"])
    assert values["sglang:max_total_num_tokens"] == math.inf  # untyped, not *_total: a gauge


def test_empty_and_foreign_text_read_as_nothing():
    assert prometheus_values("") == {}
    assert prometheus_values("# TYPE up gauge\nup 1\n") == {}
