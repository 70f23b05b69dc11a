"""A relaunch's runs pooled with its configuration's record (sweep.study.answer.pooling): the runs
added, what the runs give recomputed over all of them, the rest kept, the first launch's record
never overwritten, and a relaunch that runs another server never pooled."""

from __future__ import annotations

import json
import math
from pathlib import Path

from harness.record.results import Outcome, RunSummary, TrialResult
from harness.record.stats import summarize
from sweep.study.answer import pooling


def launch(folder: Path, speeds: list[float], first: int = 1, **effective) -> TrialResult:
    runs = [
        RunSummary(k, 1, 3, 0, 100, v, v, v, 0.1, 2.0, "meta") for k, v in enumerate(speeds, first)
    ]
    stat = summarize(speeds)
    metrics = {"tok_s": stat.mean, "tok_s_ci95": stat.ci95, "kv_pool_tokens": 116170.0}
    metrics["tok_s_runs"] = float(len(speeds))
    effective = {"speculative_num_steps": 3, "mem_fraction_static": 0.85, **effective}
    return TrialResult(
        "trial_0003", "trial", Outcome.OK, "sim", True, 50.0, {"speculative_num_steps": 3},
        effective=effective, metrics=metrics, runs=runs, folder=str(folder), number=3,
    )  # fmt: skip


def test_the_pooled_record_holds_every_run_and_its_interval_over_all_of_them(tmp_path):
    first = launch(tmp_path, [88.0, 90.0, 86.0, 89.0, 87.0])
    extra = launch(tmp_path / "resolve-1", [91.0, 85.0, 88.0], first=6)
    pooled = pooling.pool(first, extra, 1, 1)
    assert [r.run for r in pooled.runs] == [1, 2, 3, 4, 5, 6, 7, 8]
    everything = summarize([88.0, 90.0, 86.0, 89.0, 87.0, 91.0, 85.0, 88.0])
    assert math.isclose(pooled.metrics["tok_s"], everything.mean)
    assert math.isclose(pooled.metrics["tok_s_ci95"], everything.ci95)
    assert pooled.metrics["tok_s_runs"] == 8.0
    assert pooled.metrics["kv_pool_tokens"] == 116170.0  # no run gives it: the first launch's
    assert pooled.resolve == [
        {"round": 1, "folder": extra.folder, "runs": [6, 7, 8], "outcome": "ok", "wall_s": None}
    ]
    assert len(first.runs) == 5 and first.resolve == []  # the record it came from is untouched


def test_a_second_round_adds_to_the_first_and_the_first_launch_is_kept_once(tmp_path):
    first = launch(tmp_path, [88.0, 90.0, 86.0])
    first.write(tmp_path)
    once = pooling.pool(first, launch(tmp_path / "resolve-1", [91.0, 85.0], first=4), 1, 1)
    pooling.write(once)
    twice = pooling.pool(once, launch(tmp_path / "resolve-2", [87.0, 89.0], first=6), 1, 2)
    pooling.write(twice)
    kept = json.loads((tmp_path / pooling.FIRST_LAUNCH).read_text())
    assert [r["run"] for r in kept["runs"]] == [1, 2, 3] and kept["resolve"] == []
    again = TrialResult.read(tmp_path)
    assert [r.run for r in again.runs] == [1, 2, 3, 4, 5, 6, 7]
    assert [e["round"] for e in again.resolve] == [1, 2]
    # The baseline's re-check repeats runs 1-3's prompts: its drift is against this launch.
    assert [r.run for r in pooling.first_launch(again).runs] == [1, 2, 3]
    assert pooling.first_launch(first) is first


def test_a_relaunch_that_ran_another_server_is_named_not_pooled(tmp_path):
    first = launch(tmp_path, [88.0, 90.0])
    same = launch(tmp_path / "resolve-1", [89.0, 87.0], first=3, cuda_visible_devices="2,3")
    other = launch(tmp_path / "resolve-1", [89.0, 87.0], first=3, mem_fraction_static=0.8)
    assert pooling.mismatch(first, same) is None  # where it ran is not what it ran
    assert pooling.mismatch(first, other) == "mem_fraction_static 0.85 -> 0.8"


def test_a_relaunch_goes_inside_its_configurations_folder(tmp_path):
    here = launch(tmp_path / "trial_0003", [88.0])
    (tmp_path / "trial_0003").mkdir()
    assert pooling.relaunch_folder(here, 2, tmp_path) == tmp_path / "trial_0003" / "resolve-2"
    elsewhere = launch(Path("/another/node/trial_0003"), [88.0])
    assert pooling.relaunch_folder(elsewhere, 1, tmp_path) == tmp_path / "trial_0003" / "resolve-1"
