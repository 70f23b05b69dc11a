"""P(>=k) through a whole trial on the simulator: run_trial records it per level in result.json,
its metrics and each request's counts, and 1 + its sum is the trial's accept length (from the
server's own per-request verify counts, another source) to within 1%. The gap is the steps the
histogram leaves out on purpose: the first chunk and the steps begun in each request's last 6
tokens, where the end may have cut what they carried: a few of ~285 steps per request here, which
measured 0.1% (C=1) and 0.3% (C=2) apart.

A launch whose chunks hold several steps (--stream-interval 4) records no P(>=k), and says why.
"""

from __future__ import annotations

import json

import pytest

from harness.record.results import Outcome
from harness.spec import BenchmarkSpec, TrialSpec
from harness.trial import run_trial
from tests.conftest import eagle3, sim_engine

TOLERANCE = 0.01  # the module docstring: the steps left out at each request's end


def spec(tmp_path, port, **server) -> TrialSpec:
    return TrialSpec(
        name="t",
        role="trial",
        number=None,
        engine=sim_engine(200.0, "--sim-load-s", "1"),
        server=eagle3(port, steps=5, topk=1, draft=6, **server),  # a chain 5 deep
        benchmark=BenchmarkSpec(
            model="m",
            max_tokens=768,
            ignore_eos=True,
            warmup=0,
            runs=2,
            concurrency=(1, 2),
            requests_per_level=(4, 4),
            lossless_check=0,
        ),
        pid_file=tmp_path / "servers" / f"port-{port}.pid",
    )


def test_a_trial_records_p_at_least_k_per_level_and_it_sums_to_its_accept_length(tmp_path, port):
    result = run_trial(spec(tmp_path, port), tmp_path / "t")
    assert result.outcome == Outcome.OK, result.error
    assert [h.concurrency for h in result.step_histograms] == [1, 2]
    requests = [json.loads(line) for line in (tmp_path / "t" / "requests.jsonl").open()]
    for hist in result.step_histograms:
        level = [r for r in requests if r["concurrency"] == hist.concurrency and r["error"] is None]
        verify = sum(r["verify_ct"] for r in level)
        assert hist.refused is None and hist.merged_steps == 0 and hist.left_out == 0
        assert len(hist.at_least) == 5 and hist.requests == len(level)
        # Every verify step counted but those the ends cut: at most 6 tokens' worth a request.
        assert verify - 6 * len(level) <= hist.steps < verify
        assert hist.steps == sum(sum(r["step_tokens"]) for r in level)  # pooled from requests
        assert result.metrics[f"accept_steps_c{hist.concurrency}"] == hist.steps
        accept = result.metrics[f"accept_len_c{hist.concurrency}"]
        assert 1 + sum(hist.at_least) == pytest.approx(accept, rel=TOLERANCE)
        assert all(a > b for a, b in zip(hist.at_least, hist.at_least[1:], strict=False))


def test_a_coarser_stream_interval_records_no_p_at_least_k_and_says_why(tmp_path, port):
    result = run_trial(spec(tmp_path, port, stream_interval=4), tmp_path / "t")
    assert result.outcome == Outcome.OK, result.error
    for hist in result.step_histograms:
        assert hist.at_least == [] and hist.steps == 0
        assert hist.refused.startswith("--stream-interval 4: a chunk carries the steps of 4")
    assert not any(key.startswith("accept_steps_c") for key in result.metrics)
    requests = [json.loads(line) for line in (tmp_path / "t" / "requests.jsonl").open()]
    assert all(r["step_tokens"] is None for r in requests)
    assert "accept_len" in result.metrics  # the accept length has sources of its own
