"""Transfer, labelled: a study's model may start from earlier studies' measurements.

Earlier studies in the same Optuna storage whose trials ran with the same setup key (the
candidate's `context`: engine, model, hardware, benchmark, prompts and the software they ran on,
sweep/config/setup_key.py) and the same drafter measured the same acceptance and step costs, so
their measurements join the model's fit from the first proposal: with two chain depths among
them the opening is skipped. They inform predictions only: they are never this study's answer,
do not count as measured here (each configuration is still launched to be chosen), and do not set
the improvement a proposal is scored against. The banner says where they come from;
`search.sampler.transfer=false` starts afresh.
"""

from __future__ import annotations

from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from sweep.study.model.observations import ATTR
from sweep.study.model.sampler import ModelSampler


def start_from_earlier(
    sampler: ModelSampler,
    study: Study,
    studies: list[tuple[str, list[FrozenTrial]]],
    context: str,
    drafter: str | None,
) -> str | None:
    """Hand the sampler the earlier studies' matching trials; the banner's line (None: none)."""
    searched_drafter = "drafter" in sampler.space.params
    taken: dict[str, int] = {}
    trials: list[FrozenTrial] = []
    for name, others in studies:
        picked = [
            t
            for t in others
            if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
            and t.user_attrs.get(ATTR)
            and (c := t.user_attrs.get("candidate"))
            and c.get("context") == context
            and (searched_drafter or c.get("drafter") == drafter)
        ]
        if picked:
            taken[name] = len(picked)
            trials += picked
    sampler.transferred = trials
    if not trials:
        return None
    where = ", ".join(f"{name} ({n})" for name, n in sorted(taken.items()))
    return (
        f"model: starts from {len(trials)} measured trial{'s' if len(trials) != 1 else ''} of "
        f"earlier studies with the same drafter and setup: {where}; they inform predictions, "
        "never the answer (search.sampler.transfer=false starts afresh)"
    )
