"""The study's results across every sweep and worker: what the closing answer reads.

A resumed sweep, or one worker of several, measures part of a study; the table, the Best line,
the per-level answer, the summary JSON and `sweep.reproduce` (which reads MLflow's runs of the
whole experiment) must all read the same trials. Each finished Optuna trial names its folder
(user attribute `folder`, set when it was told); its result.json there is the record.

Left out: an earlier sweep's interrupted trial (it was queued again and is a trial of its own
once resumed) and a folder on another node that this one cannot read (counted, so the console
can say so).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import optuna

from harness.record.results import Outcome, TrialResult
from sweep.study.trial.unlaunched import NOT_LAUNCHED

_TOLD = (
    optuna.trial.TrialState.COMPLETE,
    optuna.trial.TrialState.FAIL,
    optuna.trial.TrialState.PRUNED,
)
# What a trial spends of `search.n_trials`: a server start that ended in a verdict. An interrupted
# or harness-failed trial is queued again and measured later, so it spends nothing.
_NOT_SPENT = (*NOT_LAUNCHED, Outcome.INTERRUPTED, Outcome.ERROR)


@dataclass
class StudyResults:
    results: list[TrialResult]  # in trial-number order, this sweep's own objects where it has them
    this_sweep: int  # how many of them this sweep measured or recorded
    unreadable: list[str] = field(default_factory=list)  # trials whose folder is not on this node

    @property
    def earlier(self) -> int:
        return len(self.results) - self.this_sweep


def study_results(study: optuna.Study, this_sweep: list[TrialResult]) -> StudyResults:
    """Every told trial of the study, with this sweep's results in place of their folders'."""
    mine = {r.number: r for r in this_sweep if r.number is not None}
    found: dict[int, TrialResult] = {}
    unreadable = []
    for trial in study.get_trials(deepcopy=False, states=_TOLD):
        if trial.number in mine:
            continue
        folder = trial.user_attrs.get("folder")
        if not folder:
            continue  # interrupted before it was told a result: queued again
        if not (Path(folder) / "result.json").is_file():
            unreadable.append(f"trial_{trial.number:04d}")
            continue
        result = TrialResult.read(Path(folder))
        if result.outcome is Outcome.INTERRUPTED:
            continue
        result.number = trial.number
        found[trial.number] = result
    found.update(mine)
    unnumbered = [r for r in this_sweep if r.number is None]  # a folder read after Ctrl-C
    ordered = [found[n] for n in sorted(found)] + unnumbered
    return StudyResults(ordered, len(this_sweep), unreadable)


def launches_spent(study: optuna.Study) -> int:
    """Server starts the study has spent on trials that reached a verdict (every sweep, every
    worker): what `search.n_trials` counts when it is the study's total."""
    spent = 0
    for trial in study.get_trials(deepcopy=False, states=_TOLD):
        outcome = trial.user_attrs.get("outcome")
        if outcome is not None and Outcome(outcome) not in _NOT_SPENT:
            spent += 1
    return spent


def queued_again(study: optuna.Study) -> int:
    """Interrupted trials waiting to run again (the retry callback's `failed_trial`): a resume
    runs them whatever is left of n_trials, as its resume line promises."""
    waiting = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
    return sum(t.system_attrs.get("failed_trial") is not None for t in waiting)
