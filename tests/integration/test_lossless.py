"""The lossless check: a speculative trial's greedy outputs against the baseline's, whole trials
against the simulator (greedy output depends on the prompt alone; `lossy-after-tokens=N` makes a
speculative server part from it at token N)."""

from __future__ import annotations

import json

import pytest

from harness.measure import lossless
from harness.measure.lossless import LosslessOutput, compare
from harness.record.results import Outcome, TrialResult
from harness.spec import BenchmarkSpec, TrialSpec
from harness.trial import run_trial
from tests.conftest import eagle3, kimi_server, sim_engine

PROMPTS = 3


def trial(tmp_path, port, role, *faults, reference=None, **bench) -> TrialSpec:
    extra = [arg for fault in faults for arg in ("--sim-fault", fault)]
    values = dict(
        model="m",
        max_tokens=64,
        warmup=0,
        runs=1,
        requests_per_run=1,
        temperature=0.7,  # the check is greedy whatever the benchmark samples at
        lossless_check=PROMPTS,
        lossless_max_tokens=96,
    )
    values.update(bench)
    return TrialSpec(
        name=role,
        role=role,
        number=None,
        engine=sim_engine(200.0, "--sim-load-s", "1", *extra),
        server=kimi_server(port) if role == "baseline" else eagle3(port),
        benchmark=BenchmarkSpec(**values),
        pid_file=tmp_path / "servers" / f"port-{port}.pid",
        lossless_reference=reference,
    )


@pytest.fixture
def baseline(tmp_path, port) -> TrialResult:
    result = run_trial(trial(tmp_path, port, "baseline"), tmp_path / "baseline")
    assert result.outcome is Outcome.OK, result.error
    return result


def test_the_baseline_writes_its_greedy_outputs_with_their_token_ids(tmp_path, baseline):
    outputs = lossless.read(tmp_path / "baseline" / lossless.FILE)
    assert len(outputs) == PROMPTS and all(o.error is None for o in outputs)
    assert all(len(o.output_ids or []) == 96 and o.text for o in outputs)
    assert baseline.lossless == [] and "lossless_prompts" not in baseline.metrics


def test_a_lossless_speculative_trial_agrees_token_for_token(tmp_path, port, baseline):
    reference = tmp_path / "baseline" / lossless.FILE
    result = run_trial(trial(tmp_path, port, "trial", reference=reference), tmp_path / "t")
    assert result.outcome is Outcome.OK, result.error
    assert "outputs_diverge" not in result.warnings
    assert [a["first_divergent_token"] for a in result.lossless] == [None] * PROMPTS
    assert all(a["compared"] == "output_ids" for a in result.lossless)
    assert result.metrics["lossless_prompts_diverged"] == 0
    assert result.metrics["lossless_min_agree_tokens"] == 96
    stored = json.loads((tmp_path / "t" / "result.json").read_text())
    assert stored["lossless"] == result.lossless


def test_a_lossy_speculative_trial_is_flagged_with_where_it_diverged(tmp_path, port, baseline):
    reference = tmp_path / "baseline" / lossless.FILE
    spec = trial(tmp_path, port, "trial", "lossy-after-tokens=10", reference=reference)
    result = run_trial(spec, tmp_path / "t")
    assert result.outcome is Outcome.OK, result.error  # measured, and flagged
    assert "outputs_diverge" in result.warnings
    assert [a["first_divergent_token"] for a in result.lossless] == [10] * PROMPTS
    assert result.metrics["lossless_prompts_diverged"] == PROMPTS
    assert result.metrics["lossless_min_agree_tokens"] == 10


def test_a_late_divergence_is_recorded_but_not_flagged(tmp_path, port, baseline):
    reference = tmp_path / "baseline" / lossless.FILE
    late = lossless.DIVERGE_BEFORE_TOKENS + 40
    spec = trial(tmp_path, port, "trial", f"lossy-after-tokens={late}", reference=reference)
    result = run_trial(spec, tmp_path / "t")
    assert "outputs_diverge" not in result.warnings  # numerical noise flips near-ties late
    assert [a["first_divergent_token"] for a in result.lossless] == [late] * PROMPTS


def test_the_check_can_be_turned_off(tmp_path, port):
    result = run_trial(trial(tmp_path, port, "baseline", lossless_check=0), tmp_path / "off")
    assert result.outcome is Outcome.OK, result.error
    assert not (tmp_path / "off" / lossless.FILE).exists()


def test_text_is_compared_when_a_server_gives_no_token_ids():
    reference = LosslessOutput("p", "abcdefgh", None)
    same = compare(LosslessOutput("p", "abcdefgh", None), reference)
    assert same.first_divergent_token is None and same.compared == "text"
    parted = compare(LosslessOutput("p", "abcdXXXX", [1, 2, 3, 4]), reference)
    assert parted.first_divergent_token == 2  # character 4 of 8, over 4 tokens: about token 2
    assert compare(LosslessOutput("p", "abcd", None), reference).first_divergent_token == 0
