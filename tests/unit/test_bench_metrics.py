from __future__ import annotations

import pytest

from harness.bench import BenchmarkSpec, aggregate_metrics, summarize_run
from harness.errors import ConfigError
from harness.results import RequestRecord


def record(start, first, end, tokens, finish="length", error=None, run=1):
    return RequestRecord(
        "measure", run, 1, "p", start, first, end, 20, tokens, tokens, finish, error
    )


def test_run_summary_is_token_weighted_and_excludes_ttft():
    records = [record(0.0, 1.0, 11.0, 1001), record(11.0, 12.0, 32.0, 1001)]
    s = summarize_run(1, 1, records, window_s=32.0, accept_len=2.5, accept_source="server_info")
    assert s.decode_tok_s == pytest.approx(2000 / 30)  # (1000 + 1000) tokens over 10 s + 20 s
    assert s.e2e_tok_s == pytest.approx(2002 / 32)
    assert s.output_tok_s == pytest.approx(2002 / 32)
    assert s.ttft_s == pytest.approx(1.0)
    assert s.truncated == 2 and s.errors == 0


def test_failed_requests_count_as_errors_not_tokens():
    records = [record(0.0, 1.0, 11.0, 1001), record(0.0, None, None, None, None, "boom")]
    s = summarize_run(1, 1, records, 11.0, None, None)
    assert s.errors == 1 and s.output_tokens == 1001


def test_aggregate_over_runs_gives_objective_with_interval():
    runs = [
        summarize_run(r, 1, [record(0.0, 1.0, 1.0 + 1000 / v, 1001, run=r)], 20.0, 2.4, "x")
        for r, v in ((1, 90.0), (2, 92.0), (3, 94.0))
    ]
    metrics = aggregate_metrics(runs, 1)
    assert metrics["tok_s"] == pytest.approx(92.0)
    assert metrics["tok_s_ci95"] == pytest.approx(4.303 * 2.0 / 3**0.5)
    assert metrics["accept_len"] == pytest.approx(2.4)
    assert metrics["error_rate_c1"] == 0.0
    assert metrics["truncation_rate_c1"] == 1.0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"runs": 0}, "benchmark.runs=0"),
        ({"concurrency": ()}, "concurrency is empty"),
        ({"max_tokens": 0}, "max_tokens=0"),
        ({"concurrency": (1, 0)}, "each level"),
    ],
)
def test_benchmark_spec_validation(fields, message):
    with pytest.raises(ConfigError, match=message):
        BenchmarkSpec(model="m", **fields)


def test_objective_concurrency_prefers_single_stream():
    assert BenchmarkSpec(model="m", concurrency=(8, 1)).objective_concurrency == 1
    assert BenchmarkSpec(model="m", concurrency=(8, 16)).objective_concurrency == 8
