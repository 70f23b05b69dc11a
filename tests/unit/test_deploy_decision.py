"""The study's one answer (sweep.study.deploy): the best trial only where it beats the baseline
beyond noise, else speculation off; a best within a runner-up's interval is named as tied."""

from __future__ import annotations

from harness.record.results import Outcome, RunSummary, TrialResult
from sweep.readout.ranking import SINGLE_STREAM
from sweep.study import deploy, levels
from sweep.study.objective import Objective


def trial(name: str, speeds: list[float], role: str = "trial", steps: int = 3) -> TrialResult:
    runs = [RunSummary(k, 1, 3, 0, 100, v, v, v, 0.1, None, None) for k, v in enumerate(speeds, 1)]
    mean = sum(speeds) / len(speeds)
    spread = (max(speeds) - min(speeds)) / 2
    metrics = {"tok_s": mean, "tok_s_ci95": spread, "decode_tok_s_c1": mean}
    params = {} if role == "baseline" else {"speculative_num_steps": steps}
    return TrialResult(name, role, Outcome.OK, "sim", True, 1.0, params, metrics=metrics, runs=runs)


BASE = trial("baseline", [99, 100, 101], role="baseline")


def decide(results, baseline=BASE):
    rows = levels.per_level(results, baseline, Objective("tok_s", 64))
    return deploy.decide(results, baseline, SINGLE_STREAM, rows, set(), "study", "results")


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
    assert d.deploy == deploy.BASELINE and not d.speculation and d.best == "trial_0000"
    assert d.config == levels.OFF and "speculation off" in d.line()
    assert "exports its launch, without speculation" in d.next_command
    assert d.as_dict()["line"].startswith("Deploy: speculation off")


def test_a_best_whose_interval_overlaps_the_runner_ups_is_named_as_tied():
    noisy = trial("trial_0000", [150, 160, 170], steps=5)  # 160 +- 10
    steady = trial("trial_0001", [149, 150, 151])  # 150 +- 1: inside the best's interval
    far = trial("trial_0002", [109, 110, 111])
    d = decide([noisy, steady, far])
    assert d.deploy == "trial_0000" and d.tied_with == ["trial_0001"]
    assert "tied with trial_0001" in d.line()


def test_without_a_baseline_the_fastest_is_deployed_and_said_to_be_no_comparison():
    d = decide([trial("trial_0000", [119, 120, 121])], baseline=None)
    assert d.deploy == "trial_0000" and d.speedup is None
    assert "not a comparison" in d.reason


def test_nothing_measured_is_speculation_off():
    d = decide([])
    assert d.deploy == deploy.BASELINE and "no trial was measured" in d.reason


def test_speculative_trials_the_engine_cannot_run_say_so_in_the_answer():
    failed = []
    for name in ("trial_0000", "trial_0001"):
        result = TrialResult(name, "trial", Outcome.CRASH, "sglang", False, 1.0, {})
        result.crash_cause = "no_speculation"
        failed.append(result)
    d = decide(failed)
    assert d.deploy == deploy.BASELINE
    assert "this engine build cannot run speculation on this machine" in d.reason
    failed[1].crash_cause = None  # one crashed for another reason: no such claim
    assert decide(failed).reason == "no trial was measured within the limits"
