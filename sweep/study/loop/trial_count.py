"""How many server starts a sweep makes, and how its banner says so.

`search.n_trials` counts server starts (a duplicate, a predicted OOM or a known crash launches
nothing and is not one), by default the study's total (`search.n_trials_scope=study`: a sweep
of a study that has some runs the rest), or this sweep's (`sweep`); `search.budget_gpu_hours`
replaces the count with GPU-hours. Where the model sampler's stop rules may end the sweep before
the count (sweep.study.model.stopping), the banner gives it as the most the sweep launches.
"""

from __future__ import annotations

import optuna

from sweep.study.answer.all_sweeps import launches_spent, queued_again


def trials_to_run(search, study: optuna.Study) -> tuple[int, int]:
    """(starts the study spent before this sweep, starts this sweep makes). With several workers
    started together each sees the same remainder, as Optuna's optimize counts per process; a
    trial queued again after an interruption is run even where nothing else is left."""
    if search.get("n_trials_scope", "study") == "sweep":
        return 0, int(search.n_trials)
    spent = launches_spent(study)
    return spent, max(int(search.n_trials) - spent, queued_again(study))


def stops_when_settled(search) -> bool:
    """Whether the model's stopping rules may end this sweep before search.n_trials."""
    sampler = search.sampler
    budget = search.get("budget_gpu_hours")
    return sampler.name == "model" and bool(sampler.get("stop", True)) and budget is None


def banner_line(search, study: optuna.Study) -> str:
    """The banner's count of trials: what this sweep runs, against what the study has."""
    budget = search.get("budget_gpu_hours")
    spent_now = launches_spent(study)
    had = f" (the study has {_trials(spent_now)})" if spent_now else ""
    if budget is not None:
        return f"trials until the study has spent {budget:g} GPU-hours{had}"
    spent, target = trials_to_run(search, study)
    if search.get("n_trials_scope", "study") == "sweep":
        return f"{_trials(target)} more (search.n_trials_scope=sweep){had}"
    if not spent:
        return _trials(target)
    if not target:
        return (
            f"no trials: the study has {spent} of search.n_trials={search.n_trials} already "
            "(the study's total; raise it, or search.n_trials_scope=sweep runs that many more)"
        )
    return (
        f"{_trials(target)} to finish the study's {search.n_trials} ({spent} done; "
        "search.n_trials_scope=sweep runs that many more)"
    )


def _trials(n: int) -> str:
    return f"{n} trial" if n == 1 else f"{n} trials"
