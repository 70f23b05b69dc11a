"""A resolve relaunch's runs pooled with what its trial (or the baseline) recorded, and a
screening launch's runs pooled into its configuration's full launch.

One configuration keeps one record: the folder's result.json becomes the pooled one, its `runs`
the first launch's and every relaunch's (their numbers never collide: a relaunch continues after
the highest recorded one, sweep.study.answer.unresolved), the metrics computed from runs
(harness.measure.metrics.aggregate_metrics: tok_s and its interval, each level's rates, latency
percentiles, accept length) recomputed over all of them, and `resolve` listing the relaunches
pooled in. What no run gives (start-up, the KV pool and memory record, the lossless check,
warnings) stays the first launch's. Nothing measured is overwritten: the first launch's own
result.json is kept beside it as `result-launch.json` before the first pooling, and each
relaunch keeps its folder (`resolve-<k>/` inside the trial's: config, command, server log,
requests, its own result).

A configuration screened with one run (sweep.study.model) and later launched in full is one
configuration measured twice: the full launch runs after the screen's run numbers
(sweep.study.loop.screens), and its record is the pooled one (`pool_screen`): the screen's runs
first, the metrics from runs recomputed over all of them, `screens` naming the screen's trial.
The full launch's own result.json is kept beside it as `result-launch.json`, and the screen's
trial keeps its own folder and record.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

from harness.measure.metrics import aggregate_metrics
from harness.record.results import TrialResult

FIRST_LAUNCH = "result-launch.json"  # the first launch's own result.json, kept
# What must be equal for two launches to be one configuration (what the server said it ran).
SAME_SERVER = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "mem_fraction_static",
    "hicache_size",
    "max_running_requests",
)


def relaunch_folder(record: TrialResult, number: int, study_dir: Path) -> Path:
    """Where the study's `number`-th resolve round puts this configuration's relaunch: inside
    its folder (one measured on another node: a folder of its name in this study's)."""
    folder = Path(record.folder) if record.folder else Path()
    home = folder if record.folder and folder.is_dir() else study_dir / record.name
    return home / f"resolve-{number}"


def mismatch(record: TrialResult, relaunch: TrialResult) -> str | None:
    """What the relaunched server runs differently (None: the same configuration)."""
    different = [
        f"{key} {record.effective[key]} -> {relaunch.effective[key]}"
        for key in SAME_SERVER
        if key in record.effective
        and key in relaunch.effective
        and record.effective[key] != relaunch.effective[key]
    ]
    return "; ".join(different) or None


def pool(
    record: TrialResult, relaunch: TrialResult, objective_concurrency: int, number: int
) -> TrialResult:
    """`record` with `relaunch`'s runs added and the run-derived metrics recomputed."""
    runs = [*record.runs, *relaunch.runs]
    derived = aggregate_metrics(record.runs, objective_concurrency)  # what the runs gave before
    kept = {k: v for k, v in record.metrics.items() if k not in derived}
    entry = {
        "round": number,
        "folder": relaunch.folder,
        "runs": sorted({r.run for r in relaunch.runs}),
        "outcome": str(relaunch.outcome),
        "wall_s": relaunch.wall_s,
    }
    return replace(
        record,
        runs=runs,
        metrics={**kept, **aggregate_metrics(runs, objective_concurrency)},
        resolve=[*record.resolve, entry],
    )


def pool_screen(full: TrialResult, screen: TrialResult, objective_concurrency: int) -> TrialResult:
    """`full` (a screened configuration's launch in full) with its screen's runs pooled in."""
    runs = [*screen.runs, *full.runs]
    derived = aggregate_metrics(full.runs, objective_concurrency)
    kept = {k: v for k, v in full.metrics.items() if k not in derived}
    entry = {
        "trial": screen.name,
        "folder": screen.folder,
        "runs": sorted({r.run for r in screen.runs}),
        "wall_s": screen.wall_s,
    }
    return replace(
        full,
        runs=runs,
        metrics={**kept, **aggregate_metrics(runs, objective_concurrency)},
        screens=[*full.screens, entry],
    )


def write(pooled: TrialResult) -> None:
    """The pooled record as the folder's result.json, the first launch's kept beside it."""
    folder = Path(pooled.folder)
    if not folder.is_dir():  # measured on another node: the study's attribute keeps it
        return
    first = folder / FIRST_LAUNCH
    if not first.exists() and (folder / "result.json").is_file():
        shutil.copy2(folder / "result.json", first)
    pooled.write(folder)


def first_launch(record: TrialResult | None) -> TrialResult | None:
    """The record as its first launch left it (result-launch.json), or itself where nothing was
    pooled into it: what the baseline's re-check, which sends the same runs' prompts again, is
    compared with for drift."""
    if record is None or not record.resolve:
        return record
    kept = Path(record.folder) / FIRST_LAUNCH
    if not kept.is_file():
        return record
    data = json.loads(kept.read_text())
    return TrialResult.from_dict(data)
