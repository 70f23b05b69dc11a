"""The study's answer compares with the baseline a deployment runs at each level
(sweep.study.answer.no_speculation): above speculation's cap of 48 the uncapped baseline, at and
below it the study's own. A weighted answer over 1/32/64 must not say "deploy" on the strength of a
baseline held to 48 requests at 64 in flight."""

from __future__ import annotations

from harness.record.results import Outcome, RunSummary, TrialResult
from sweep.readout.ranking import for_objective
from sweep.study.answer import levels, recommendation
from sweep.study.answer.no_speculation import deployed_baseline, deployed_line, levels_above
from sweep.study.trial.objective import Objective

LEVELS = (1, 32, 64)
PROFILE = Objective("weighted_throughput", 64, levels=LEVELS)


def server(name: str, role: str, cap: int, per_level: dict[int, list[float]]) -> TrialResult:
    """A result with runs 1..3 at each level (output tok/s) and their per-level metrics."""
    runs, metrics = [], {"tok_s": sum(per_level[1]) / 3}
    for c, values in per_level.items():
        for k, v in enumerate(values, 1):
            runs.append(RunSummary(k, c, c, 0, 100, v, v, v, 0.1, None, None))
        metrics[f"output_tok_s_c{c}"] = sum(values) / len(values)
        metrics[f"output_tok_s_c{c}_ci95"] = (max(values) - min(values)) / 2
    params = {"speculative_num_steps": 3} if role == "trial" else {}
    return TrialResult(
        name, role, Outcome.OK, "sim", True, 1.0, params, metrics=metrics, runs=runs,
        effective={"max_running_requests": cap},
    )  # fmt: skip


def spread(*means: float) -> dict[int, list[float]]:
    """Runs 1..3 at 1, 32 and 64 in flight: each level's mean -1%, mean, +1%."""
    return {c: [m * 0.99, m, m * 1.01] for c, m in zip(LEVELS, means, strict=True)}


CAPPED = server("baseline", "baseline", 48, spread(100, 2400, 3200))
FREE = server("baseline_uncapped", "baseline", 2048, spread(100, 2400, 4000))
CHAIN = server("trial_0000", "trial", 48, spread(125, 2640, 3520))


def test_the_levels_above_the_cap_come_from_the_uncapped_baseline():
    assert levels_above(CAPPED, FREE) == [64]
    judged = deployed_baseline(CAPPED, FREE)
    assert judged.metrics["output_tok_s_c64"] == 4000 and judged.metrics["output_tok_s_c32"] == 2400
    assert sorted(r.output_tok_s for r in judged.runs if r.concurrency == 64) == [3960, 4000, 4040]
    ranking = for_objective(PROFILE)
    assert abs(ranking.value(judged) - (100 + 2400 + 4000) / 3) < 1e-9  # derived anew
    assert set(ranking.runs(judged)) == {1, 2, 3}  # run r pairs with run r of every trial


def test_the_weighted_answer_against_the_deployed_baseline_is_speculation_off():
    ranking = for_objective(PROFILE)
    rows = levels.per_level([CHAIN], CAPPED, PROFILE, uncapped=FREE, cap=48)
    at_equal_caps = recommendation.decide([CHAIN], CAPPED, ranking, rows, set(), "s", "r")
    assert at_equal_caps.speculation  # (125 + 2640 + 3520) / (100 + 2400 + 3200) = 1.10x
    deployed = recommendation.decide(
        [CHAIN], deployed_baseline(CAPPED, FREE), ranking, rows, set(), "s", "r"
    )
    assert not deployed.speculation and deployed.speedup < 1  # 6285 / 6500 = 0.97x
    assert deployed.per_level[64] == levels.OFF


def test_nothing_changes_without_an_uncapped_baseline_or_a_level_above_the_cap():
    assert deployed_baseline(CAPPED, None) is CAPPED and deployed_line(CAPPED, None) is None
    low = server("baseline_uncapped", "baseline", 2048, {1: [100, 100, 100]})
    assert deployed_baseline(CAPPED, low) is CAPPED
    assert "at 64 in flight the one at SGLang's own" in deployed_line(CAPPED, FREE)
