"""A resolve relaunch's runs (sweep.study.answer.unresolved): numbered after the recorded ones, so
run r sends the prompts run r of every trial sends and no earlier run's; the config's
trial.first_run and trial.runs become exactly that benchmark, with the prompt plan untouched."""

from __future__ import annotations

from omegaconf import OmegaConf

from harness.measure.prompt_plan import PromptPlan
from harness.measure.schedule import Schedule
from harness.record.results import RunSummary
from harness.spec import BenchmarkSpec
from harness.workload import load_prompts
from sweep.config.specs import _relaunch

SPEC = BenchmarkSpec(model="m", runs=5, concurrency=(1, 8), requests_per_run=3, max_runs=20)


def numbers(spec: BenchmarkSpec, incomplete: set[tuple[int, int]] = frozenset()) -> list:
    measured: list[RunSummary] = []
    seen = []
    for run in Schedule(spec, measured, None):
        seen.append((run.number, run.concurrency))
        bad = (run.number, run.concurrency) in incomplete
        measured.append(
            RunSummary(run.number, run.concurrency, 3, 0, 300, 80.0, 79.0, 80.0, 0.1, None, None)
        )
        measured[-1].incomplete = bad
    return seen


def test_a_relaunch_numbers_its_runs_after_the_recorded_ones_at_every_level():
    relaunch = _relaunch(SPEC, OmegaConf.create({"first_run": 6, "runs": 3}))
    assert numbers(SPEC) == [(r, c) for c in (1, 8) for r in range(1, 6)]
    assert numbers(relaunch) == [(r, c) for c in (1, 8) for r in (6, 7, 8)]


def test_an_incomplete_run_of_a_relaunch_is_replaced_by_the_next_number():
    relaunch = _relaunch(SPEC, OmegaConf.create({"first_run": 6, "runs": 3}))
    seen = numbers(relaunch, incomplete={(7, 1)})
    assert [r for r, c in seen if c == 1] == [6, 7, 8, 9]


def test_run_r_of_a_relaunch_sends_run_rs_prompts_and_no_earlier_runs():
    prompts = load_prompts("builtin", 0, ())
    relaunch = _relaunch(SPEC, OmegaConf.create({"first_run": 6, "runs": 3}))
    first, again = PromptPlan(prompts, SPEC), PromptPlan(prompts, relaunch)
    for run in (6, 7, 8):
        assert again.segment(run, 1) == first.segment(run, 1)  # the pairs: same prompts
    recorded = {p.id for r in range(1, 6) for p in first.segment(r, 1)}
    fresh = {p.id for r in (6, 7, 8) for p in again.segment(r, 1)}
    assert recorded and fresh and not recorded & fresh  # new prompts, not the recorded runs'


def test_the_config_makes_exactly_that_many_runs_without_adaptive_runs_or_lossless_check():
    adaptive = BenchmarkSpec(model="m", runs=5, adaptive=True, lossless_check=4)
    relaunch = _relaunch(adaptive, OmegaConf.create({"first_run": 6, "runs": 2}))
    assert (relaunch.first_run, relaunch.runs, relaunch.max_runs) == (6, 2, 20)
    assert not relaunch.adaptive and relaunch.lossless_check == 0
    assert _relaunch(adaptive, OmegaConf.create({"first_run": 1, "runs": None})) is adaptive
