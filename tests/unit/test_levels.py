"""The recommendation per level: best per concurrency with its paired interval, "speculation off"
where nothing beats the baseline, latency limits that change the answer, and where it is shown."""

from __future__ import annotations

import json

import optuna
from omegaconf import OmegaConf

from harness.record.results import Outcome, RunSummary, TrialResult
from sweep.readout.console import console
from sweep.readout.trials_table import summary_table
from sweep.readout.verdict import summary_lines
from sweep.study.answer import levels, parent_run
from sweep.study.answer.summary import infeasible
from sweep.study.loop.decisions import SearchDriver
from sweep.study.trial.objective import Objective
from tests.unit.test_search import cand

LEVELS = (1, 8, 64)


def trial(name, per_level, itl=None, role="trial", steps=3) -> TrialResult:
    """per_level: {C: (speed, spread)}; decode tok/s at 1, output tok/s above, three paired runs."""
    runs, metrics = [], {}
    for c, (speed, spread) in per_level.items():
        for k, delta in enumerate((-spread, 0.0, spread), start=1):
            v = speed + delta
            runs.append(RunSummary(k, c, 3, 0, 100, v if c == 1 else v / c, v, v, 0.1, None, None))
        metrics[f"decode_tok_s_c{c}"] = speed if c == 1 else speed / c
        metrics[f"output_tok_s_c{c}"] = speed
        metrics[f"itl_ms_p99_c{c}"] = (itl or {}).get(c, 10.0)
    metrics["tok_s"] = metrics["decode_tok_s_c1"]
    params = {} if role == "baseline" else {"speculative_num_steps": steps}
    return TrialResult(name, role, Outcome.OK, "sim", True, 1.0, params, metrics=metrics, runs=runs)


BASE = trial("baseline", {1: (100, 1), 8: (700, 5), 64: (3000, 20)}, role="baseline")
FAST = trial(
    "trial_0000", {1: (150, 1), 8: (900, 5), 64: (2800, 20)}, itl={1: 45.0, 64: 55.0}, steps=5
)
STEADY = trial("trial_0001", {1: (130, 1), 8: (950, 5), 64: (2900, 20)}, itl={64: 30.0})


def test_best_per_level_and_speculation_off_where_every_configuration_loses():
    rows = levels.per_level([FAST, STEADY], BASE, Objective("tok_s", 64))
    assert [r.concurrency for r in rows] == list(LEVELS)
    one, eight, sixty_four = rows
    assert one.recommend == "trial_0000" and one.metric == "decode_tok_s"
    assert one.best.speedup == 1.5 and one.best.low > 1  # paired: the runs' shared offsets cancel
    assert eight.recommend == "trial_0001" and eight.metric == "output_tok_s"
    assert sixty_four.recommend == levels.OFF and sixty_four.best.trial == "trial_0001"
    assert sixty_four.best.high < 1
    m = levels.metrics(rows)
    assert m["speculate_c1"] == 1.0 and m["speculate_c64"] == 0.0
    assert m["best_speedup_c8_ci95_low"] > 1


def test_a_best_within_the_baselines_noise_is_speculation_off():
    close = trial("trial_0002", {1: (101, -3)})  # runs that move against the baseline's
    base = trial("baseline", {1: (100, 3)}, role="baseline")
    (row,) = levels.per_level([close], base, Objective("tok_s", 64))
    assert row.recommend == levels.OFF and row.best.low < 1 < row.best.high


def test_a_limit_that_excludes_the_fastest_single_stream_configuration_changes_the_answer():
    slo = Objective("tok_s", 64, slo={"itl_ms_p99": 40})  # at every measured level
    rows = levels.per_level([FAST, STEADY], BASE, slo)
    assert rows[0].recommend == "trial_0001" and rows[0].excluded == ["trial_0000"]
    # ... and the study agrees: FAST is infeasible for Optuna, STEADY is its best trial
    study = optuna.create_study(directions=["maximize"])
    driver = SearchDriver(study, slo)
    driver.tell(study.ask(), cand(mem=0.85), FAST, None)
    driver.tell(study.ask(), cand(mem=0.86), STEADY, None)
    assert study.best_trial.number == 1
    # the console marks it and the verdict line skips it
    over = infeasible([FAST, STEADY], slo)
    assert over == {"trial_0000": "over SLO: itl_ms_p99 45.0 > 40 @ 1; itl_ms_p99 55.0 > 40 @ 64"}
    lines, metrics = summary_lines([FAST, STEADY], BASE, None, exclude=set(over))
    assert metrics["best_tok_s"] == 130 and "trial_0001" in "".join(lines)
    with console.capture() as out:
        console.print(summary_table([FAST, STEADY], BASE, True, notes=over))
        console.print(levels.table(rows, True, slo.slo_text()))
    text = out.get()
    assert "infeasible over SLO: itl_ms_p99 45.0 > 40 @ 1" in text
    assert "speculation off" in text and "over the limits at 1: trial_0000" in text


def test_a_limit_at_one_level_leaves_the_others_alone():
    at_64 = Objective("tok_s", 64, slo={"itl_ms_p99": 40}, slo_level=64)
    rows = levels.per_level([FAST, STEADY], BASE, at_64)
    assert rows[0].recommend == "trial_0000" and rows[0].excluded == []
    assert rows[2].excluded == ["trial_0000"]


def test_the_table_is_written_for_mlflow_and_the_report(tmp_path):
    rows = levels.per_level([FAST, STEADY], BASE, Objective("tok_s", 64))
    summary = tmp_path / "summary-20260101-000000.json"
    path = parent_run.write_levels(summary, rows)
    assert path.name == "levels-20260101-000000.json"
    data = json.loads(path.read_text())
    assert [d["recommend"] for d in data] == ["trial_0000", "trial_0001", levels.OFF]
    assert data[0]["best"]["low"] > 1 and data[0]["best"]["params"] == {"speculative_num_steps": 5}
    cfg = OmegaConf.create({"report": False})
    assert parent_run.sweep_artifacts(cfg, optuna.create_study(), Objective("tok_s", 64),
                                     tmp_path, summary, rows) == [path]  # fmt: skip


def test_export_picks_by_the_studys_objective_and_limits_not_always_tok_s():
    from sweep.reproduce.choose import best_by_objective

    runs = [(r.name, r.metrics) for r in (FAST, STEADY)]
    assert best_by_objective(runs, Objective("tok_s", 64))[0] == 0  # FAST: 150 tok/s
    weighted = Objective("weighted_throughput", 64, levels=[8, 64])
    assert best_by_objective(runs, weighted)[0] == 1  # STEADY serves more at 8 and 64
    limited = Objective("tok_s", 64, slo={"itl_ms_p99": 40})
    index, why = best_by_objective(runs, limited)
    assert index == 1 and "objective" in why  # FAST is over the ITL limit
    assert best_by_objective(runs, Objective("tok_s", 64), level=8)[0] == 1
    assert best_by_objective(runs, limited, level=1)[0] == 1


def test_the_table_says_where_both_servers_ran_at_the_shared_request_cap():
    rows = levels.per_level([FAST, STEADY], BASE, Objective("tok_s", 64))
    with console.capture() as out:
        console.print(levels.table(rows, True, equal_cap=48))
    text = " ".join(out.get().split())
    assert "at 64: both servers ran 48 and queued the rest" in text
    assert "search.baseline_equal_caps=false" in text
    with console.capture() as out:  # caps that differ (or none shared): the trials table says so
        console.print(levels.table(rows, True))
    assert "queued the rest" not in out.get()


# At 64 in flight the equal-cap baseline queued 16 of them (both servers ran 48); SGLang's own
# limit runs all 64 without speculation, which serves more (the numbers are the test's).
UNCAPPED = trial("baseline_x_uncapped", {1: (100, 1), 8: (700, 5), 64: (3400, 20)}, role="baseline")
EQUAL_WINS = trial("trial_0003", {1: (150, 1), 8: (900, 5), 64: (3300, 20)})


def test_above_the_cap_the_answer_is_against_sglangs_own_limit_with_equal_caps_beside_it():
    rows = levels.per_level([EQUAL_WINS], BASE, Objective("tok_s", 64), uncapped=UNCAPPED, cap=48)
    one, eight, sixty_four = rows
    # Within the cap both baselines are one server: the study's, nothing beside it.
    assert (one.baseline_kind, one.equal_caps) == ("equal_caps", None) and one.baseline == 100
    assert eight.baseline_kind == "equal_caps" and eight.equal_caps is None
    # Above it: 3300 beats the capped 3000 (1.10x) but not the 3400 a deployment runs (0.97x).
    assert sixty_four.baseline_kind == "uncapped" and sixty_four.baseline == 3400
    assert sixty_four.best.speedup == 3300 / 3400 and sixty_four.recommend == levels.OFF
    equal = sixty_four.equal_caps
    assert equal.cap == 48 and equal.baseline == 3000 and equal.speedup == 1.1
    assert equal.recommend == "trial_0003" and equal.low > 1
    m = levels.metrics(rows)
    assert m["speculate_c64"] == 0.0 and m["best_speedup_equal_caps_c64"] == 1.1
    assert "best_speedup_equal_caps_c8" not in m
    with console.capture() as out:
        console.print(levels.table(rows, True, equal_cap=48))
    text = " ".join(out.get().split())
    assert "at 64: against the baseline at SGLang's own running-request limit" in text
    assert "1.10×" in text and "queued the rest" not in text
    # A failed uncapped baseline, or none: the equal-cap answers as before.
    failed = TrialResult("baseline_x_uncapped", "baseline", Outcome.OOM, "sim", True, 1.0, {})
    for other in (failed, None):
        again = levels.per_level([EQUAL_WINS], BASE, Objective("tok_s", 64), uncapped=other, cap=48)
        assert again[2].baseline_kind == "equal_caps" and again[2].recommend == "trial_0003"


def test_the_uncapped_baseline_is_measured_only_when_a_level_is_above_the_cap():
    from sweep.study.loop.baseline import needs_uncapped

    def cfg(levels_, equal=True, cap=None, baseline=True):
        return OmegaConf.create(
            {
                "search": {"baseline": baseline, "baseline_equal_caps": equal},
                "server": {"max_running_requests": cap},
                "benchmark": {"concurrency": levels_},
            }
        )

    assert needs_uncapped(cfg([1, 8, 64]))
    assert not needs_uncapped(cfg([1, 8, 48]))  # the cap never binds at 48 in flight
    assert not needs_uncapped(cfg([1, 64], equal=False))  # the study's baseline is uncapped
    assert not needs_uncapped(cfg([1, 64], cap=96))  # both servers run the cap set
    assert not needs_uncapped(cfg([1, 64], baseline=False))
