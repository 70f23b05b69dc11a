"""When the study's verdict is unresolved and what a round of the resolve phase launches
(sweep.study.answer.unresolved), table by table: the rules, the contenders, the run numbers, the
budget, and the lines that say what settles an unresolved verdict."""

from __future__ import annotations

import pytest

from harness.record.results import Outcome, RunSummary, TrialResult
from sweep.readout.ranking import SINGLE_STREAM
from sweep.study.answer import unresolved

BUDGET = unresolved.Settings(max_rounds=2, runs=3, max_contenders=3)


def trial(
    name: str, speeds: list[float], role: str = "trial", first: int = 1, outcome=Outcome.OK
) -> TrialResult:
    runs = [
        RunSummary(k, 1, 3, 0, 100, v, v, v, 0.1, None, None) for k, v in enumerate(speeds, first)
    ]
    mean = sum(speeds) / len(speeds)
    metrics = {"tok_s": mean, "tok_s_ci95": (max(speeds) - min(speeds)) / 2}
    params = {} if role == "baseline" else {"speculative_num_steps": 3}
    return TrialResult(name, role, outcome, "sim", True, 1.0, params, metrics=metrics, runs=runs)


BASE = trial("baseline", [99, 100, 101, 100, 100], role="baseline")
FAST = trial("trial_0000", [119, 120, 121, 120, 120])  # 1.20x beyond its interval
SLOW = trial("trial_0000", [80, 81, 82, 81, 81])  # 0.81x beyond it
CLOSE = trial("trial_0000", [96, 106, 101, 98, 104])  # 1.01x, its paired interval holds 1x
NEAR = trial("trial_0001", [99, 100, 101, 100, 100])  # inside CLOSE's and SLOW-ish intervals
NEAR2 = trial("trial_0002", [98, 99, 100, 99, 99])
FAR = trial("trial_0003", [60, 61, 62, 61, 61])
NOISY_FAST = trial("trial_0000", [150, 160, 170, 160, 160])  # 1.60x, 160 +- 10
STEADY_FAST = trial("trial_0001", [149, 150, 151, 150, 150])  # inside NOISY_FAST's interval
SLOW_TIED = trial("trial_0001", [79, 80, 81, 80, 80])  # inside SLOW's interval


def plan(results, baseline=BASE, settings=BUDGET, rounds_done=0, segments=22, exclude=()):
    return unresolved.plan(
        results, baseline, SINGLE_STREAM, settings, rounds_done, segments, set(exclude)
    )


@pytest.mark.parametrize(
    ("case", "results", "baseline", "unresolved", "contenders", "with_baseline"),
    [
        ("faster beyond its interval, alone", [FAST, FAR], BASE, None, None, None),
        ("slower beyond its interval, tied", [SLOW, SLOW_TIED], BASE, None, None, None),
        ("within the baseline's noise", [CLOSE, FAR], BASE, "includes 1×", ("trial_0000",), True),
        (
            "within the noise and tied",
            [CLOSE, NEAR, NEAR2, FAR],
            BASE,
            "includes 1× and it is tied with trial_0001, trial_0002",
            ("trial_0000", "trial_0001", "trial_0002"),
            True,
        ),
        (
            "faster beyond it but tied",
            [NOISY_FAST, STEADY_FAST, FAR],
            BASE,
            "trial_0000 is tied with trial_0001",
            ("trial_0000", "trial_0001"),
            True,
        ),
        (
            "no baseline, tied",
            [NOISY_FAST, STEADY_FAST],
            None,
            "is tied with trial_0001",
            ("trial_0000", "trial_0001"),
            False,
        ),
        ("no baseline, alone", [FAST, FAR], None, None, None, None),
        (
            "a failed baseline is no baseline",
            [FAST, FAR],
            trial("baseline", [1.0], role="baseline", outcome=Outcome.OOM),
            None,
            None,
            None,
        ),
        (
            "nothing measured",
            [trial("trial_0000", [1.0], outcome=Outcome.OOM)],
            BASE,
            None,
            None,
            None,
        ),
    ],
)
def test_when_to_resolve_and_what_to_launch(
    case, results, baseline, unresolved, contenders, with_baseline
):
    found = plan(results, baseline)
    if unresolved is None:
        assert found.resolved and found.round is None and found.stop is None, case
        return
    assert not found.resolved and unresolved in found.state.why, case
    assert found.round is not None, case
    assert found.round.contenders == contenders, case
    assert found.round.baseline is with_baseline, case
    assert (found.round.first_run, found.round.runs) == (6, 3), case  # after runs 1-5


@pytest.mark.parametrize(
    ("settings", "rounds_done", "segments", "stop", "runs"),
    [
        (unresolved.Settings(max_rounds=0), 0, 22, "off", None),  # the default: said, not spent
        (BUDGET, 1, 22, None, 3),  # round 2 of 2
        (BUDGET, 2, 22, "spent", None),  # the study's budget is spent: a resume adds nothing
        (BUDGET, 0, 5, "exhausted", None),  # runs 1-5 used every disjoint segment
        (BUDGET, 0, 7, None, 2),  # two fresh segments left: a short round
    ],
)
def test_the_budget_and_the_workload_bound_a_round(settings, rounds_done, segments, stop, runs):
    found = plan([CLOSE, FAR], settings=settings, rounds_done=rounds_done, segments=segments)
    assert not found.resolved and found.stop == stop
    assert found.contenders == ("trial_0000",)
    if runs is None:
        assert found.round is None
    else:
        assert found.round is not None and found.round.runs == runs
        assert found.round.short is (runs < settings.runs)


def test_new_run_numbers_follow_the_highest_any_side_recorded_incomplete_runs_included():
    pooled_base = trial("baseline", [99, 100, 101, 100, 100, 100, 99, 101], role="baseline")
    stalled = trial("trial_0000", [96, 106, 101, 98, 104])
    stalled.runs.append(RunSummary(6, 1, 3, 1, 0, None, None, None, None, None, None))
    stalled.runs[-1].incomplete = True
    assert plan([CLOSE, FAR], baseline=pooled_base).round.first_run == 9
    assert plan([stalled, FAR]).round.first_run == 7


def test_contenders_are_capped_fastest_first_and_the_rest_named():
    found = plan([CLOSE, NEAR, NEAR2, FAR], settings=unresolved.Settings(2, 3, max_contenders=2))
    assert found.round.contenders == ("trial_0000", "trial_0001")
    assert found.round.left_out == ("trial_0002",)
    line = unresolved.round_line(found.round, 1, unresolved.Settings(2, 3, 2), found.state.why)
    assert line.startswith("[bold]resolving:[/bold] trial_0000, trial_0001 vs baseline, 3 more")
    assert "(round 1 of 2; runs 6-8)" in line and "1 more tied runner-up(s) not relaunched" in line


def test_a_trial_over_a_latency_limit_is_never_a_contender():
    found = plan([CLOSE, NEAR, FAR], exclude={"trial_0000"})
    assert found.state.best.name == "trial_0001"
    assert "trial_0000" not in found.contenders


def test_the_line_below_the_deploy_line_names_what_settles_it():
    off = plan([CLOSE, FAR], settings=unresolved.Settings(max_rounds=0))
    line = unresolved.unresolved_line(off, unresolved.Settings(), ("search.n_trials=4",), 0)
    assert "sweep search.n_trials=4 search.resolve.max_rounds=2" in line
    assert "no trial runs again" in line and "trial_0000 and the baseline" in line
    spent = plan([CLOSE, FAR], rounds_done=2)
    line = unresolved.unresolved_line(spent, BUDGET, (), 6)
    assert "after 6 extra runs in 2 resolve round(s)" in line and "max_rounds=2" in line
    dry = plan([CLOSE, FAR], segments=5)
    assert "no fresh prompts left" in unresolved.unresolved_line(dry, BUDGET, (), 0)
    assert unresolved.unresolved_line(plan([FAST, FAR]), BUDGET, (), 0) is None
    alone = plan([NOISY_FAST, STEADY_FAST], baseline=None, settings=unresolved.Settings())
    line = unresolved.unresolved_line(alone, unresolved.Settings(), (), 0)
    assert "on trial_0000 and trial_0001;" in line and "baseline" not in line.split("on trial")[1]


@pytest.mark.parametrize(
    "bad",
    [dict(max_rounds=-1), dict(runs=0), dict(max_contenders=0)],
)
def test_settings_out_of_range_are_refused_naming_the_key(bad):
    with pytest.raises(ValueError, match=r"search\.resolve\."):
        unresolved.Settings(**bad)
