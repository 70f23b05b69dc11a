"""P(>=k) through a whole trial on the simulator: run_trial records it per level in result.json,
its metrics and each request's counts. The simulator sends each request's histogram of verify
steps by accepted drafts on its finished chunk, as SGLang 0.5.23 does
(spec_correct_drafts_histogram), so every verify step counts, whole, and 1 + sum P(>=k) is the
trial's accept length (the server's completion tokens over its verify steps) but for the two
ends that length counts and the histogram does not: prefill's first token, and the part of the
last step max_tokens cut; at ~285 steps a request that is well under 1%. Without the server's
histograms the stream's chunks are counted instead (tests/unit/test_step_acceptance.py,
tests/sim/test_step_acceptance_model.py).

A launch whose chunks hold several steps (--stream-interval 4) still records P(>=k): the server's
histograms do not depend on the stream.
"""

from __future__ import annotations

import json

import pytest

from harness.record.results import Outcome
from harness.spec import BenchmarkSpec, TrialSpec
from harness.trial import run_trial
from tests.conftest import eagle3, sim_engine

TOLERANCE = 0.01  # the module docstring: the two ends of each request


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
        assert hist.source == "server" and hist.steps == verify  # every step, whole
        assert hist.steps == sum(sum(r["step_tokens"]) for r in level)  # pooled from requests
        assert result.metrics[f"accept_steps_c{hist.concurrency}"] == hist.steps
        accept = result.metrics[f"accept_len_c{hist.concurrency}"]
        assert 1 + sum(hist.at_least) == pytest.approx(accept, rel=TOLERANCE)
        assert all(a > b for a, b in zip(hist.at_least, hist.at_least[1:], strict=False))


def test_a_coarser_stream_interval_still_records_p_at_least_k_from_the_server(tmp_path, port):
    result = run_trial(spec(tmp_path, port, stream_interval=4), tmp_path / "t")
    assert result.outcome == Outcome.OK, result.error
    for hist in result.step_histograms:
        assert hist.source == "server" and hist.refused is None and len(hist.at_least) == 5
        accept = result.metrics[f"accept_len_c{hist.concurrency}"]
        assert 1 + sum(hist.at_least) == pytest.approx(accept, rel=TOLERANCE)
