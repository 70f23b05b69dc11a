"""A screened trial: a configuration launched with one run per level, never an answer, that may
be launched in full later; and the fraction that full launch runs at.

The model sampler screens a configuration (sweep.study.model) and may launch it in full later
(sweep.study.loop.screens): the full launch continues the screen's runs and its record pools
them, which holds only where the two launches are the same server. The memory fraction is part
of that server: a screen at 0.93 and a full launch at 0.94 on a card whose KV pool binds admit
different numbers of requests, and the pooled runs would measure two configurations as one (on
a memory-tight box one fraction step moved throughput ~55%). So a configuration with a screen
not yet pooled runs in full at the screen's fraction (`sweep.study.search.memory`); it started
there, so it starts again.
"""

from __future__ import annotations

from dataclasses import replace

from optuna.trial import FrozenTrial, TrialState

from sweep.study.trial.candidates import Candidate

SCREENED = "screened"  # the trial attribute (and result warning) of a one-run screening launch
# A full launch's attribute: the screening trial whose runs its record pools (sweep.study.loop.
# screens); the model then reads that configuration from the full trial alone, which holds them.
POOLED = "pooled_screen"


def unpooled_screens(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """The screening launches no full launch has pooled yet."""
    pooled = {t.user_attrs.get(POOLED) for t in trials} - {None}
    return [
        t
        for t in trials
        if t.state is TrialState.PRUNED
        and t.user_attrs.get(SCREENED)
        and "candidate" in t.user_attrs
        and t.number not in pooled
    ]


def screen_fraction(trials: list[FrozenTrial], probe: Candidate) -> float | None:
    """The fraction a screen of `probe`'s configuration (every field but the fraction) ran at,
    where one waits to be launched in full; None where none does."""
    wanted = replace(probe, mem_fraction_static=None)
    for t in sorted(unpooled_screens(trials), key=lambda t: t.number):
        screened = Candidate.from_dict(t.user_attrs["candidate"])
        if replace(screened, mem_fraction_static=None) == wanted:
            return screened.mem_fraction_static
    return None
