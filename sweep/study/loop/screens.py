"""A screened configuration launched in full continues its screen instead of repeating it.

The model sampler screens a configuration with one run per level (sweep.study.model, a `pruned`
trial marked `screened`) and may later launch it in full. The screen's run is a measurement of
that configuration like any other: the full launch is the same server (the same candidate key:
every searched value and the memory fraction), so it measures only the runs the screen did not,
numbered after them (`trial.first_run`, as a resolve relaunch numbers its runs: run r sends the
prompts run r of every trial and of the baseline sent, so the pairs hold), and its record pools
the screen's runs in (sweep.study.answer.pooling.pool_screen): benchmark.runs runs from two
launches, the interval over all of them. The screen's trial stays in the study as it was; the
model reads the configuration from the full trial alone (`POOLED`), which holds the screen's run.
"""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import TrialState

from harness.record.results import Outcome, TrialResult
from sweep.study.model.observations import POOLED, SCREENED


def screen_of(study: optuna.Study, candidate_key: str) -> TrialResult | None:
    """The study's screening launch of this configuration, not yet pooled into a full one, whose
    record this node can read (None: none)."""
    trials = study.get_trials(deepcopy=False)
    pooled = {t.user_attrs.get(POOLED) for t in trials}
    for t in trials:
        folder = t.user_attrs.get("folder")
        if (
            t.state is not TrialState.PRUNED
            or not t.user_attrs.get(SCREENED)
            or t.user_attrs.get("candidate_key") != candidate_key
            or t.number in pooled
            or not folder
            or not (Path(folder) / "result.json").is_file()
        ):
            continue
        record = TrialResult.read(Path(folder))
        if record.outcome is Outcome.PRUNED and record.runs:
            record.number = t.number
            return record
    return None


def after_screen(screen: TrialResult, runs: int) -> list[str]:
    """The full launch's overrides: the runs the screen did not measure, numbered after its own
    (at least one: benchmark.runs=1 would leave nothing, and a launch measures something)."""
    done = sorted({r.run for r in screen.runs})
    return [f"benchmark.runs={max(runs - len(done), 1)}", f"trial.first_run={done[-1] + 1}"]
