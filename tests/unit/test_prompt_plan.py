"""The prompt plan: warm-up apart, runs disjoint, run r the same in every trial, and what happens
when the workload is too small (harness.measure.prompt_plan)."""

from __future__ import annotations

import itertools
import logging

import pytest

from harness.errors import ConfigError
from harness.measure.prompt_plan import PromptPlan, check_fits
from harness.spec import BenchmarkSpec
from harness.workload import Prompt, load_prompts


def prompts(n: int) -> list[Prompt]:
    return [Prompt(id=f"p{i}", messages=({"role": "user", "content": f"q{i}"},)) for i in range(n)]


def spec(**values) -> BenchmarkSpec:
    return BenchmarkSpec(**{"model": "m", **values})


def ids(source, n: int) -> list[str]:
    return [p.id for p in itertools.islice(source, n)]


def test_warmup_is_never_measured_and_runs_are_disjoint():
    s = spec(warmup=2, runs=5, requests_per_run=3, max_runs=8)
    plan = PromptPlan(load_prompts("builtin", s.seed), s)
    warm = set(ids(plan.source("warmup", 0, 1), s.warmup))
    runs = [ids(plan.source("measure", r, 1), 3) for r in range(1, s.max_runs + 1)]
    measured = [p for run in runs for p in run]
    assert len(warm) == 2 and not warm & set(measured)
    assert len(set(measured)) == len(measured) == 3 * s.max_runs  # replacements too: own prompts


def test_run_r_is_the_same_in_every_trial_and_moves_with_the_seed():
    s = spec(warmup=2, runs=5, requests_per_run=3)
    first = PromptPlan(load_prompts("builtin", 0), s)
    again = PromptPlan(load_prompts("builtin", 0), s)
    other = PromptPlan(load_prompts("builtin", 1), s)
    for r in range(1, 6):
        assert ids(first.source("measure", r, 1), 3) == ids(again.source("measure", r, 1), 3)
    assert ids(first.source("measure", 1, 1), 3) != ids(other.source("measure", 1, 1), 3)


def test_levels_have_their_own_segments():
    s = spec(warmup=1, runs=2, concurrency=(1, 4), requests_per_run=2, max_runs=2)
    plan = PromptPlan(prompts(47), s)
    # 46 // max_runs; a steady-state run at 4 sends 4 + 16 (its window) + 3 (cut) = 23 prompts
    assert plan.segment_length(1) == 23 and plan.segment_length(4) == 23
    assert ids(plan.source("measure", 1, 4), 4) == ["p1", "p2", "p3", "p4"]
    assert ids(plan.source("measure", 2, 4), 4) == ["p24", "p25", "p26", "p27"]


def test_a_run_past_its_segment_cycles_its_own_prompts_and_warns_once(caplog):
    s = spec(warmup=1, runs=3, requests_per_run=2, max_runs=3)
    plan = PromptPlan(prompts(7), s)  # pool 6: three segments of 2
    with caplog.at_level(logging.WARNING, logger="harness.measure.prompt_plan"):
        assert ids(plan.source("measure", 2, 1), 5) == ["p3", "p4", "p3", "p4", "p3"]
        ids(plan.source("measure", 3, 1), 5)
    assert sum("repeats them" in r.message for r in caplog.records) == 1


def test_a_run_past_the_last_segment_reuses_one_and_says_so(caplog):
    s = spec(warmup=1, runs=2, requests_per_run=2, max_runs=5)
    plan = PromptPlan(prompts(5), s)  # pool 4: two segments of 2
    with caplog.at_level(logging.WARNING, logger="harness.measure.prompt_plan"):
        assert ids(plan.source("measure", 3, 1), 2) == ids(plan.source("measure", 1, 1), 2)
        plan.segment(4, 1)
    assert sum("reuses run 1's prompts" in r.message for r in caplog.records) == 1


def test_a_workload_far_too_small_is_refused_at_config_time():
    s = spec(warmup=2, runs=5, requests_per_run=3)
    check_fits(prompts(17), s)  # 2 + 5 x 3
    with pytest.raises(ConfigError, match="has 16 prompts; the plan needs 17"):
        check_fits(prompts(16), s)


def test_short_levels_names_the_levels_whose_runs_cannot_all_have_their_own_prompts():
    s = spec(warmup=2, runs=5, concurrency=(1, 64), requests_per_run=3, max_runs=20)
    # 64 in flight: 2 x 64 + 64 - 1 = 191 prompts a run.
    assert PromptPlan(prompts(2 + 5 * 191), s).short_levels(5) == {}
    assert PromptPlan(prompts(2 + 3 * 191), s).short_levels(5) == {64: 3}


def test_the_default_workload_gives_five_runs_at_64_in_flight_their_own_prompts():
    # Issue #31: at the default warm-up and runs, no run at 64 reuses another run's prompts.
    s = spec(warmup=2, runs=5, concurrency=(1, 8, 32, 64), requests_per_run=3, max_runs=20)
    reasoning = load_prompts("builtin", 0, ("math", "code", "science", "logic"))
    assert PromptPlan(reasoning, s).short_levels(s.runs) == {}
