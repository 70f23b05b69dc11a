from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.measure.acceptance import accept_from_counters, accept_from_requests
from harness.measure.metrics import (
    aggregate_metrics,
    inter_token_latencies,
    naive_window_rate,
    percentile,
    summarize_run,
    tokens_in_window,
)
from harness.measure.prometheus import prometheus_values
from harness.measure.timeline import Timeline
from harness.record.results import RequestRecord
from harness.spec import BenchmarkSpec


def record(start, first, end, tokens, finish="length", error=None, run=1, ended=False):
    r = RequestRecord("measure", run, 1, "p", start, first, end, 20, tokens, tokens, finish, error)
    r.reasoning_ended = ended
    return r


def timeline(r: RequestRecord, chunks: int = 11) -> Timeline:
    """Evenly spaced chunks from the first token to the end."""
    if not r.ok:
        return Timeline(r)
    span = r.end_s - r.first_token_s
    points = [(r.first_token_s, 1)] + [
        (
            r.first_token_s + span * i / (chunks - 1),
            1 + round((r.completion_tokens - 1) * i / (chunks - 1)),
        )
        for i in range(1, chunks)
    ]
    return Timeline(r, points)


def run_of(records, accept=None, source=None, run=1):
    starts = [r.start_s for r in records]
    ends = [r.end_s for r in records if r.end_s is not None]
    return summarize_run(
        run, 1, [timeline(r) for r in records], (min(starts), max(ends)), accept, source
    )


def test_run_summary_is_token_weighted_and_excludes_ttft():
    records = [record(0.0, 1.0, 11.0, 1001), record(11.0, 12.0, 32.0, 1001)]
    s = run_of(records, 2.5, "request_meta")
    assert s.decode_tok_s == pytest.approx(2000 / 30)  # (1000 + 1000) tokens over 10 s + 20 s
    assert s.e2e_tok_s == pytest.approx(2002 / 32)
    assert s.output_tok_s == pytest.approx(2002 / 32)
    assert s.ttft_s == pytest.approx(1.0)
    assert s.truncated == 2 and s.errors == 0
    assert s.ttft_p["p50"] == pytest.approx(1.0)
    assert s.itl_p["p50"] == pytest.approx(0.015, rel=0.05)  # 0.01 s and 0.02 s per token


def test_truncation_counts_only_outputs_cut_while_still_thinking():
    records = [record(0.0, 1.0, 11.0, 1001, ended=True), record(11.0, 12.0, 32.0, 1001)]
    assert run_of(records).truncated == 1


def test_failed_requests_count_as_errors_not_tokens():
    records = [record(0.0, 1.0, 11.0, 1001), record(0.0, None, None, None, None, "boom")]
    s = run_of(records)
    assert s.errors == 1 and s.output_tokens == 1001


def test_window_counts_tokens_generated_inside_it_not_completions():
    # Four requests of 1000 tokens at 100 tok/s each; the first two started long before the window.
    records = [
        record(-8.0, -7.9, 2.1, 1000),
        record(-8.0, -7.9, 2.1, 1000),
        record(0.0, 0.1, 10.1, 1000),
        record(0.0, 0.1, 10.1, 1000),
    ]
    lines = [timeline(r, 101) for r in records]
    window = (0.0, 10.1)
    true_rate = tokens_in_window(lines, *window) / 10.1
    assert true_rate == pytest.approx(
        4 * 100 * (2.1 / 10.1) / 4 * 2 + 2 * 100 * (10.0 / 10.1) + 2 / 10.1, rel=0.03
    )
    assert true_rate < 250  # two streams most of the time, four only briefly
    assert naive_window_rate(records, *window) == pytest.approx(4 * 1000 / 10.1)  # ~396: wrong


def test_inter_token_latency_splits_a_chunk_over_its_tokens():
    r = record(0.0, 1.0, 2.0, 5)
    gaps = inter_token_latencies([Timeline(r, [(1.0, 1), (1.5, 3), (2.0, 5)])])
    assert gaps == [0.25, 0.25, 0.25, 0.25]


def test_percentile_interpolates():
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([5], 99) == 5


def test_accept_length_sources():
    rs = [record(0, 1, 2, 101), record(0, 1, 2, 201)]
    rs[0].verify_ct, rs[1].verify_ct = 40, 80
    assert accept_from_requests(rs) == pytest.approx(300 / 120)  # first tokens: prefill
    # Counters move per finished request: 2 requests finished between the reads (the delta of
    # num_requests_total, whatever the client counted), 252 tokens, 100 verify steps.
    text = (
        "sglang:spec_verify_calls_total 10.0\n"
        'sglang:generation_tokens_total{is_streaming="true"} 100.0\n'
        'sglang:num_requests_total{is_streaming="true"} 1.0\n'
    )
    after = (
        "sglang:spec_verify_calls_total 110.0\n"
        'sglang:generation_tokens_total{is_streaming="true"} 300.0\n'
        'sglang:generation_tokens_total{is_streaming="false"} 52.0\n'
        'sglang:num_requests_total{is_streaming="true"} 2.0\n'
        'sglang:num_requests_total{is_streaming="false"} 1.0\n'
    )
    before_values, after_values = prometheus_values(text), prometheus_values(after)
    assert accept_from_counters(before_values, after_values) == pytest.approx(2.5)
    # Without the request counter the prefill tokens to subtract are unknown: no answer.
    del after_values["sglang:num_requests_total"]
    assert accept_from_counters(before_values, after_values) is None


def test_aggregate_over_runs_gives_objective_with_interval():
    runs = [
        run_of([record(0.0, 1.0, 1.0 + 1000 / v, 1001, run=r)], 2.4, "x", r)
        for r, v in ((1, 90.0), (2, 92.0), (3, 94.0))
    ]
    metrics = aggregate_metrics(runs, 1)
    assert metrics["tok_s"] == pytest.approx(92.0)
    assert metrics["tok_s_ci95"] == pytest.approx(4.303 * 2.0 / 3**0.5)
    assert metrics["accept_len"] == pytest.approx(2.4)
    assert metrics["error_rate_c1"] == 0.0
    assert metrics["truncation_rate"] == 1.0
    assert "ttft_ms_p99_c1" in metrics and "itl_ms_p50_c1" in metrics


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"runs": 0}, "benchmark.runs=0"),
        ({"concurrency": ()}, "concurrency is empty"),
        ({"max_tokens": 0}, "max_tokens=0"),
        ({"concurrency": (1, 0)}, "each level"),
        ({"api": "grpc"}, "benchmark.api='grpc'"),
        ({"concurrency": (1, 8), "requests_per_level": (3,)}, "one count >= 1 per"),
    ],
)
def test_benchmark_spec_validation(fields, message):
    with pytest.raises(ConfigError, match=message):
        BenchmarkSpec(model="m", **fields)


def test_requests_per_level():
    spec = BenchmarkSpec(model="m", concurrency=(1, 70), requests_per_level=(30, 70))
    # Above 1 a steady-state run sends C of ramp-up, its window's 70 and the C - 1 cut.
    assert spec.requests_at(70) == 70 + 70 + 69 and spec.requests_at(1) == 30
    assert BenchmarkSpec(model="m", concurrency=(1, 8)).requests_at(8) == 8 + 16 + 7


def test_objective_concurrency_prefers_single_stream():
    assert BenchmarkSpec(model="m", concurrency=(8, 1)).objective_concurrency == 1
    assert BenchmarkSpec(model="m", concurrency=(8, 16)).objective_concurrency == 8
