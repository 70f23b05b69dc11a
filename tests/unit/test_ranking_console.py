"""A throughput study's trial lines and trials table lead with its objective (output tok/s at
its level), in the same order as its `Best:` line, not with per-user decode speed."""

from __future__ import annotations

import pytest

from harness.record.results import Outcome, RunSummary, TrialResult
from sweep.readout import console as sweep_console
from sweep.readout.console import console
from sweep.readout.ranking import SINGLE_STREAM, Ranking, for_objective
from sweep.readout.trial_lines import ConsoleReporter
from sweep.readout.trials_table import summary_table
from sweep.study.trial.objective import Objective


def trial(name: str, output: float, per_user: float, hicache: int) -> TrialResult:
    runs = [RunSummary(k, 32, 352, 0, 1000, per_user, output, output, 0.1, None, None)
            for k in (1, 2)]  # fmt: skip
    metrics = {
        "tok_s": per_user,
        "tok_s_ci95": 0.5,
        "decode_tok_s_c32": per_user,
        "output_tok_s_c32": output,
        "output_tok_s_c32_ci95": 40.0,
    }
    params = {"mem_fraction_static": 0.85, "hicache_size": hicache}
    return TrialResult(name, "trial", Outcome.OK, "sim", True, 50.0, params, metrics=metrics,
                       runs=runs)  # fmt: skip


# More output at 32 in flight, but each user's stream a little slower: the two rankings disagree.
BUSY = trial("trial_0001", output=713.4, per_user=25.0, hicache=48)
CALM = trial("trial_0000", output=654.3, per_user=26.5, hicache=0)


def test_the_objective_picks_the_ranking():
    assert for_objective(Objective("throughput", 32)) == Ranking(32)
    assert for_objective(Objective("tok_s", 32)) == SINGLE_STREAM


def test_a_throughput_table_is_ordered_and_labelled_by_output_tok_s():
    with console.capture() as out:
        console.print(summary_table([CALM, BUSY], None, True, ranking=Ranking(32)))
    text = out.get()
    assert "output tok/s @32 ±95%" in text
    assert text.index("trial_0001") < text.index("trial_0000")
    assert "713.4 ± 40.0" in text
    with console.capture() as out:  # single stream: per-user decode, the other order
        console.print(summary_table([CALM, BUSY], None, True))
    text = out.get()
    assert text.index("trial_0000") < text.index("trial_0001") and "26.5 ± 0.5" in text


def test_the_trial_line_leads_with_the_objective_and_keeps_the_per_user_speed():
    with sweep_console.console.capture() as out:
        ConsoleReporter(True, ranking=Ranking(32)).trial_done(BUSY, CALM)
        ConsoleReporter(True, ranking=Ranking(32)).run_done(BUSY.runs[0], 2)
    text = out.get()
    assert "713.4 ± 40.0 tok/s output at 32 in flight (25.0 tok/s per user)" in text
    assert "1.09× baseline" in text
    assert "run 1/2 @ concurrency 32: 713.4 tok/s output, 25.0 per user" in text


def test_the_console_names_the_levels_whose_outputs_ran_in_waves():
    result = TrialResult("t", "trial", Outcome.OK, "sim", True, 1.0, {}, warnings=["equal_lengths"])
    result.metrics["equal_length_c32"] = 512.0
    with console.capture() as captured:
        ConsoleReporter(simulated=True).trial_done(result, None)
    text = " ".join(captured.get().split())
    assert "at 32 (512 tokens) in flight nearly every output had the same length" in text
    assert "Equal lengths and waves" in text


def profile_trial(name: str, single: float, at64: float) -> TrialResult:
    """Two runs at 1 and at 64 in flight; run 2 of each level 2% above run 1."""
    runs = []
    for k, f in ((1, 1.0), (2, 1.02)):
        runs.append(RunSummary(k, 1, 2, 0, 4096, single * f, None, single * f, 0.1, None, None))
        runs.append(RunSummary(k, 64, 64, 0, 9e4, 70.0, 60.0, at64 * f, 0.5, None, None))
    metrics = {
        "tok_s": single * 1.01,
        "tok_s_ci95": 2.0,
        "output_tok_s_c1": single * 1.01,
        "output_tok_s_c1_ci95": 2.0,
        "output_tok_s_c64": at64 * 1.01,
        "output_tok_s_c64_ci95": 30.0,
    }
    return TrialResult(name, "trial", Outcome.OK, "sim", True, 50.0, {}, metrics=metrics,
                       runs=runs)  # fmt: skip


def test_a_weighted_study_ranks_and_names_its_best_by_the_weighted_throughput():
    from sweep.readout.verdict import best_line, best_of

    objective = Objective("weighted_throughput", 64, levels=[1, 64], weights=[1, 3])
    ranking = for_objective(objective)
    assert ranking != SINGLE_STREAM and ranking.metric == "weighted_throughput"
    tree = profile_trial("trial_0003", single=135.7, at64=3300.0)  # fastest alone, slower loaded
    chain = profile_trial("trial_0000", single=131.0, at64=3542.0)
    base = profile_trial("baseline", single=106.4, at64=3224.0)
    assert best_of([tree, chain], ranking=ranking) is chain
    assert best_of([tree, chain]) is tree  # by single stream it would be the tree
    # 0.25 x 1 + 0.75 x 64 for each run: run 2 is 2% above run 1 at both levels.
    assert ranking.runs(chain) == pytest.approx(
        {1: 0.25 * 131.0 + 0.75 * 3542.0, 2: 1.02 * (0.25 * 131.0 + 0.75 * 3542.0)}
    )
    line = best_line(chain, base, ranking)
    assert "trial_0000" in line and "tok/s output, weighted over 1/64 in flight" in line
    assert f"{ranking.value(chain) / ranking.value(base):.2f}× the baseline" in line
    with console.capture() as out:
        console.print(summary_table([tree, chain], base, True, ranking=ranking))
    text = out.get()
    assert "weighted tok/s output ±95%" in text
    assert text.index("trial_0000") < text.index("trial_0003")
