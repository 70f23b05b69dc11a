"""A throughput study's trial lines and trials table lead with its objective (output tok/s at
its level), in the same order as its `Best:` line, not with per-user decode speed."""

from __future__ import annotations

from harness.results import Outcome, RunSummary, TrialResult
from sweep import console as sweep_console
from sweep.console import ConsoleReporter, console, summary_table
from sweep.ranking import SINGLE_STREAM, Ranking, for_objective
from sweep.study.objective import Objective


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

