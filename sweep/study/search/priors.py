"""The configurations a study measures before its sampler proposes anything.

`search.enqueue` always (by default SGLang's recommended EAGLE-3 chain, 3/1/4), and, when the
objective reads a level above one request in flight, `search.enqueue_under_load` too (by default
the one-step chain, 1/1/2). Speculation's best depth falls with batch size: SGLang's own adaptive
defaults (0.5.23 `speculative/adaptive_spec_params.py`) run 1, 3, 5 or 7 steps at batch 1 and
at most 1 from batch 32, so a study over a load profile measures both ends of the chain first
and the sampler starts from a bracket instead of from the single-stream end alone.

Where the memory policy chooses the fraction (`search.memory` other than `sample`), a prior's
`mem_fraction_static` is enqueued as a user attribute (`memory.PRIOR_FRACTION`), not as a fixed
parameter: Optuna hands a fixed parameter to the trial without asking the sampler, so a prior
would launch at its configured fraction even after that fraction ran out of GPU memory on this
box. The memory sampler runs it there unless the study knows it fails (`sweep.study.search.memory`).
"""

from __future__ import annotations

from typing import Any

import optuna

from sweep.config.fraction import FRACTION
from sweep.study.search.memory import PRIOR_FRACTION, objective_levels, resolve_mode


def first_trials(search: Any, objective) -> list[dict[str, Any]]:
    """The parameter sets to enqueue, in order, for this objective, each with the searched
    parameters only: a knob the command line holds for every server has left the space
    (sweep.config.study_name), and its prior value would not be the one launched."""
    trials = [dict(p) for p in (search.get("enqueue") or [])]
    if max(objective_levels(objective)) > 1:
        trials += [dict(p) for p in (search.get("enqueue_under_load") or [])]
    space = search.get("space")
    if not space:
        return trials
    searched = [{k: v for k, v in p.items() if k in space} for p in trials]
    return [p for p in searched if not unlisted(p, space)]


def unlisted(prior: dict[str, Any], space: Any) -> list[str]:
    """The prior's values a categorical parameter of `space` does not list, as `key=value`.
    Optuna cannot enqueue those (a fixed categorical value must be one of the choices), and a
    space narrowed to other choices says the user does not want that configuration launched;
    a value outside an int or float range is enqueued as written, as Optuna takes it."""
    return [
        f"{k}={v}"
        for k, v in prior.items()
        if space[k].get("type") == "categorical" and v not in list(space[k].get("choices") or [])
    ]


def left_out(search: Any, objective) -> list[str]:
    """The priors `first_trials` leaves out, each with the values the space does not list."""
    trials = [dict(p) for p in (search.get("enqueue") or [])]
    if max(objective_levels(objective)) > 1:
        trials += [dict(p) for p in (search.get("enqueue_under_load") or [])]
    space = search.get("space") or {}
    out = []
    for prior in trials:
        values = unlisted({k: v for k, v in prior.items() if k in space}, space)
        if values:
            out.append(f"{', '.join(values)} is not among search.space's {_choices(space, values)}")
    return out


def _choices(space: Any, values: list[str]) -> str:
    keys = dict.fromkeys(v.split("=", 1)[0] for v in values)
    return "; ".join(f"{k} choices {list(space[k].choices)}" for k in keys)


def enqueue(study: optuna.Study, search: Any, objective, skip_if_exists: bool = True) -> None:
    """Enqueue `first_trials`, the fraction as the memory policy takes it; with `skip_if_exists`
    a prior already in the study (enqueued with or without its fraction) is not enqueued again."""
    managed = resolve_mode(str(search.get("memory", "auto")), objective) != "sample"
    for params in first_trials(search, objective):
        attrs = {}
        if managed and FRACTION in params:
            attrs[PRIOR_FRACTION] = params.pop(FRACTION)
        if skip_if_exists and _enqueued(study, params):
            continue
        study.enqueue_trial(params, user_attrs=attrs, skip_if_exists=False)


def _enqueued(study: optuna.Study, params: dict[str, Any]) -> bool:
    for trial in study.get_trials(deepcopy=False):
        fixed = trial.system_attrs.get("fixed_params", trial.params)
        if all(k in fixed and fixed[k] == v for k, v in params.items()):
            return True
    return False
