"""The flush before a run, against SGLang's answers (docs/reliability.md): each attempt asks the
server to wait for idle (`?timeout=`), a refusal is retried with backoff, the outcome reaches the
run's summary and a failed flush is a trial warning, never silent."""

from __future__ import annotations

import logging

import httpx
import pytest

import harness.measure.flush as flush_module
from harness.measure.bench import Benchmark, BenchmarkResult
from harness.measure.clock import ServerClock
from harness.record.results import Outcome, RunSummary, TrialResult
from harness.sglang.surfaces import FLUSH_TIMED_OUT
from harness.spec import BenchmarkSpec, TrialSpec
from harness.trial import _judge
from tests.conftest import eagle3, sim_engine

# 0.5.1.post3 entrypoints/http_server.py::flush_cache: a refusal has the success text, status 400
LEGACY_REFUSAL = (
    "Cache flushed.\nPlease check backend logs for more details. (When there are running or "
    "waiting requests, the operation will not be performed.)\n"
)


def _bench(answers: list[tuple[int, str]], seen: list[httpx.Request]) -> Benchmark:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        status, text = answers.pop(0) if answers else (200, "Cache flushed.\n")
        return httpx.Response(status, text=text)

    bench = Benchmark(
        "http://sim", BenchmarkSpec(model="m"), ServerClock(1.0), speculative=True
    ).__enter__()
    bench._runner.run(bench._client.aclose())  # the mock answers instead of a server
    bench._client = httpx.AsyncClient(base_url="http://sim", transport=httpx.MockTransport(handler))
    return bench


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    monkeypatch.setattr(flush_module, "FLUSH_BACKOFF_S", 0.0)


def test_a_refused_flush_is_retried_and_each_attempt_asks_sglang_to_wait_for_idle():
    seen: list[httpx.Request] = []
    bench = _bench([(400, LEGACY_REFUSAL), (400, FLUSH_TIMED_OUT)], seen)
    try:
        assert bench.flush() is True
        assert bench._flush_attempts == 3
    finally:
        bench.__exit__(None, None, None)
    assert [r.url.path for r in seen] == ["/flush_cache"] * 3
    assert all(r.url.params["timeout"] == str(flush_module.FLUSH_WAIT_S) for r in seen)


def test_a_flush_refused_every_time_is_a_warning_and_reaches_the_run_and_the_trial(caplog):
    seen: list[httpx.Request] = []
    refusals = [(400, "Flush cache failed.\n")] * flush_module.FLUSH_ATTEMPTS
    bench = _bench(refusals, seen)
    try:
        with caplog.at_level(logging.WARNING, logger="harness.measure.bench"):
            assert bench.flush() is False
    finally:
        bench.__exit__(None, None, None)
    assert len(seen) == flush_module.FLUSH_ATTEMPTS
    assert any("flush_cache failed after" in r.message for r in caplog.records)

    run = RunSummary(1, 1, 1, 0, 10, 1.0, 1.0, 1.0, 0.1, None, None)
    run.flushed, run.flush_attempts = False, flush_module.FLUSH_ATTEMPTS
    spec = TrialSpec("t", "trial", None, sim_engine(), eagle3(30000), BenchmarkSpec(model="m"))
    result = TrialResult("t", "trial", Outcome.OK, "sim", True, 1.0, {})
    _judge(result, BenchmarkResult([], [run], {"tok_s": 1.0}), spec)
    assert "flush_failed" in result.warnings
    saved = TrialResult.from_dict(result.to_dict())  # result.json keeps it per run
    assert saved.runs[0].flushed is False
    assert saved.runs[0].flush_attempts == flush_module.FLUSH_ATTEMPTS
