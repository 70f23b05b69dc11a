"""The console says when a configuration is KV-bound (issue 17) and what its pool did."""

from __future__ import annotations

from harness.record.results import Outcome, RunSummary, TrialResult
from sweep.readout.memory_lines import memory_line
from sweep.readout.verdict import summary_lines


def _result(name: str, level: int, **metrics: float) -> TrialResult:
    run = RunSummary(
        run=1,
        concurrency=level,
        requests=10,
        errors=0,
        output_tokens=100,
        decode_tok_s=10.0,
        e2e_tok_s=None,
        output_tok_s=400.0,
        ttft_s=None,
        accept_len=None,
        accept_len_source=None,
    )
    return TrialResult(
        name=name,
        role="trial",
        outcome=Outcome.OK,
        engine="sim",
        simulated=True,
        clock_scale=1.0,
        params={},
        metrics={"tok_s": 10.0, **metrics},
        runs=[run],
    )


SEEDS = dict(
    kv_pool_tokens=159277.0,
    host_cache_tokens=2515968.0,
    requests_fit=29.0,
    request_tokens_mean=5400.0,
    token_usage_mean=0.94,
    running_mean=35.0,
    queue_mean=115.0,
    cache_hit_rate=0.8,
    retractions=0.0,
    kv_bound=1.0,
)


def test_memory_line_at_a_loaded_level_names_the_pool_and_the_verdict():
    line = memory_line(_result("trial_0001", 150, **SEEDS))
    assert line is not None
    assert line.startswith("memory @ 150: KV pool 159,277 tokens (holds 29 of 5,400)")
    for part in (
        "host cache 2,515,968",
        "token usage 0.94",
        "35 running, 115 queued",
        "cache hits 80%",
        "0 retracted",
        "KV-bound",
    ):
        assert part in line


def test_no_memory_line_at_one_request_in_flight():
    assert memory_line(_result("trial_0001", 1, **SEEDS)) is None


def test_summary_names_the_kv_bound_configurations():
    free = dict(SEEDS, token_usage_mean=0.5, queue_mean=0.0, kv_bound=0.0)
    results = [_result("trial_0001", 150, **SEEDS), _result("trial_0002", 150, **free)]
    lines, _ = summary_lines(results, None, None)
    (verdict,) = [line for line in lines if line.startswith("KV-bound")]
    assert "1 of 2 configurations (trial_0001)" in verdict
    lines, _ = summary_lines(results[1:], None, None)
    assert not [line for line in lines if "KV-bound" in line]
