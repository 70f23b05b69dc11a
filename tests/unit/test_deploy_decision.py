"""The study's one answer (sweep.study.answer.recommendation): the best trial only where it beats
the baseline beyond noise, else speculation off; among the configurations the intervals cannot tell
apart from the best, the cheapest to run that itself beats the baseline, the others
named as tied."""

from __future__ import annotations

import pytest

from harness.record.results import Outcome, RunSummary, TrialResult
from sweep.readout.ranking import SINGLE_STREAM
from sweep.study.answer import levels, recommendation
from sweep.study.trial.objective import Objective


def trial(
    name: str,
    speeds: list[float],
    role: str = "trial",
    steps: int = 3,
    spec: tuple[int, int, int] | None = None,  # steps/topk/draft tokens as the server ran them
) -> TrialResult:
    runs = [RunSummary(k, 1, 3, 0, 100, v, v, v, 0.1, None, None) for k, v in enumerate(speeds, 1)]
    mean = sum(speeds) / len(speeds)
    spread = (max(speeds) - min(speeds)) / 2
    metrics = {"tok_s": mean, "tok_s_ci95": spread, "decode_tok_s_c1": mean}
    params = {} if role == "baseline" else {"speculative_num_steps": steps}
    effective = {}
    if spec is not None:
        keys = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
        params = effective = dict(zip(keys, spec, strict=True))
    return TrialResult(
        name,
        role,
        Outcome.OK,
        "sim",
        True,
        1.0,
        params,
        metrics=metrics,
        runs=runs,
        effective=effective,
    )


BASE = trial("baseline", [99, 100, 101], role="baseline")


def decide(results, baseline=BASE):
    rows = levels.per_level(results, baseline, Objective("tok_s", 64))
    return recommendation.decide(results, baseline, SINGLE_STREAM, rows, set(), "study", "results")


def test_a_trial_faster_beyond_its_paired_interval_is_deployed():
    fast = trial("trial_0000", [119, 120, 121], steps=5)
    slow = trial("trial_0001", [104, 105, 106])
    d = decide([fast, slow])
    assert d.deploy == "trial_0000" and d.speculation and d.low > 1
    assert d.tied_with == []
    line = d.line()
    assert line.startswith("[bold]Deploy:[/bold] trial_0000 (steps=5")
    assert "1.20× the baseline" in line and "reproduce --experiment study" in line


def test_a_best_within_the_baselines_noise_deploys_the_baseline():
    close = trial("trial_0000", [98, 101, 104])  # 1.01x, its paired interval reaches 1x
    d = decide([close])
    assert d.deploy == recommendation.BASELINE and not d.speculation and d.best == "trial_0000"
    assert d.config == levels.OFF and "speculation off" in d.line()
    assert "exports its launch, without speculation" in d.next_command
    assert d.as_dict()["line"].startswith("Deploy: speculation off")


def test_a_best_whose_interval_overlaps_a_cheaper_runner_ups_deploys_the_cheaper():
    noisy = trial("trial_0000", [150, 160, 170], steps=5)  # 160 +- 10
    steady = trial("trial_0001", [149, 150, 151])  # 150 +- 1: inside the best's interval
    far = trial("trial_0002", [109, 110, 111])
    d = decide([noisy, steady, far])
    assert d.deploy == "trial_0001" and d.best == "trial_0000"
    assert d.tied_with == ["trial_0001"]  # the Best line's caveat: the best's runner-ups
    assert d.alternatives == ["trial_0000"] and "tied with trial_0000" in d.line()


BASE_100 = [99, 100, 101]
# (case, trials as (name, runs, steps/topk/draft), baseline runs or None,
#  deployed, named as tied with it, words the Deploy line gives as its reason)
CASES = [
    (
        "8x H200: 4/4/15 best, 3/4/13 within its interval: the cheaper is deployed",
        [("t_4415", [198, 200, 202], (4, 4, 15)), ("t_3413", [195, 197, 199], (3, 4, 13))],
        BASE_100,
        "t_3413",
        ["t_4415"],
        "the cheapest to run (fewest draft tokens, then steps, then topk) of the 2",
    ),
    (
        "fewest draft tokens first, then fewest steps, then smallest topk",
        [
            ("t_428", [198, 200, 202], (4, 2, 8)),
            ("t_516", [197, 199, 201], (5, 1, 6)),  # more steps, fewer draft tokens
            ("t_346", [196, 198, 200], (3, 4, 6)),  # as few draft tokens, fewer steps
            ("t_326", [195, 197, 199], (3, 2, 6)),  # and a smaller topk: the cheapest
        ],
        BASE_100,
        "t_326",
        ["t_428", "t_516", "t_346"],
        "of the 4 configurations the 95% intervals cannot tell apart from the fastest",
    ),
    (
        "a cheaper tied one that does not itself beat the baseline is passed over",
        [("t_4415", [190, 200, 210], (4, 4, 15)), ("t_3413", [60, 140, 220], (3, 4, 13))],
        BASE_100,
        "t_4415",
        ["t_3413"],
        "not the cheaper t_3413: tied with the fastest, but not faster than the baseline",
    ),
    (
        "apart beyond their intervals: the fastest, whatever it costs",
        [("t_4415", [198, 200, 202], (4, 4, 15)), ("t_3413", [149, 150, 151], (3, 4, 13))],
        BASE_100,
        "t_4415",
        [],
        "faster than the baseline beyond the 95% interval (tok/s)",
    ),
    (
        "without a baseline: the cheapest of the indistinguishable, said to be no comparison",
        [("t_4415", [198, 200, 202], (4, 4, 15)), ("t_3413", [195, 197, 199], (3, 4, 13))],
        None,
        "t_3413",
        ["t_4415"],
        "of the 2 configurations the 95% intervals cannot tell apart from the fastest; no "
        "baseline was measured",
    ),
    (
        "the best within the baseline's noise: speculation off, whatever is tied with it",
        [("t_4415", [90, 105, 120], (4, 4, 15)), ("t_3413", [100, 103, 106], (3, 4, 13))],
        BASE_100,
        recommendation.BASELINE,
        [],
        "no configuration beats the baseline beyond the 95% interval",
    ),
]


@pytest.mark.parametrize(
    ("case", "trials", "base", "deployed", "named", "why"), CASES, ids=[c[0] for c in CASES]
)
def test_the_cheapest_of_the_indistinguishable_that_beats_the_baseline(
    case, trials, base, deployed, named, why
):
    results = [trial(name, runs, spec=spec) for name, runs, spec in trials]
    baseline = trial("baseline", base, role="baseline") if base is not None else None
    d = decide(results, baseline)
    assert (d.deploy, d.alternatives) == (deployed, named)
    assert d.best == trials[0][0]  # the best by the objective is still named as such
    line = recommendation.plain(d.line())
    assert why in line
    if named:
        assert f"tied with {', '.join(named)}" in line
    # the deployed one's
    if base is not None and deployed not in (trials[0][0], recommendation.BASELINE):
        chosen = next(r for r in results if r.name == deployed)
        assert f"{d.speedup:.2f}" == f"{chosen.metrics['tok_s'] / 100:.2f}"


def test_without_a_baseline_the_fastest_is_deployed_and_said_to_be_no_comparison():
    d = decide([trial("trial_0000", [119, 120, 121])], baseline=None)
    assert d.deploy == "trial_0000" and d.speedup is None
    assert "not a comparison" in d.reason


def test_nothing_measured_is_speculation_off():
    d = decide([])
    assert d.deploy == recommendation.BASELINE and "no trial was measured" in d.reason


def test_speculative_trials_the_engine_cannot_run_say_so_in_the_answer():
    failed = []
    for name in ("trial_0000", "trial_0001"):
        result = TrialResult(name, "trial", Outcome.CRASH, "sglang", False, 1.0, {})
        result.crash_cause = "no_speculation"
        failed.append(result)
    d = decide(failed)
    assert d.deploy == recommendation.BASELINE
    assert "this engine build cannot run speculation on this machine" in d.reason
    failed[1].crash_cause = None  # one crashed for another reason: no such claim
    assert decide(failed).reason == "no trial was measured within the limits"
