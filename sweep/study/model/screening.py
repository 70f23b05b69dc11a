"""What one screened run would tell the model sampler, and where a screen tells most.

A screen is one run per level of a configuration (`observations.SCREENED`): mostly its server's
start-up, about half a launch in full. The sampler decides *whether* to screen from the
configuration it would launch (its median below the best measured value, or its prediction
extrapolated, and a run worth more than the model's guess: `worth_screening`). *Where* the
screen goes is a separate question: the configuration whose one run, once known, is expected to
raise most the best the model then believes in (`most_informative`).

That is the knowledge gradient of one noisy measurement (Frazier, Powell and Dayanik, "A
knowledge-gradient policy for sequential information collection", 2008): the expected value of
max over every configuration of its posterior mean after the run, less that max before it. The
draws the model makes are joint (each row one posterior draw of the acceptance and the step cost,
evaluated at every configuration), so a run of one configuration moves the others through what
they share: a first tree's run fixes the sibling factor and the split of the step's work terms
for every tree, a chain's only the chains. The posterior after a run is those draws reweighted by
the run's likelihood (its relative spread the box's run noise, `observations.run_noise`); the
run's outcomes are drawn from the configuration's own predictive (a draw times the run's
noise). On a plateau of near-equal configurations the screen that would tell the search which
way the top lies (a wide tree, fixing the branches' cost) is worth more than the one whose
prediction merely reaches highest (the proposal's own neighbour, one draft token further on).
"""

from __future__ import annotations

import random

import numpy as np

OUTCOMES = 32  # the run's outcomes averaged over per configuration (each a draw of it)


def worth_screening(draws: np.ndarray, noise: float) -> bool:
    """Whether one run of a configuration tells more than the model's draws for it: their
    spread wider than the run's (`noise` of the median: the box's, `observations.run_noise`).
    Then the run outweighs the model where they are combined (`anchored`) and may turn the
    decision; where the model is surer, the configuration screened is the one launched in full
    next anyway (traced on the landscape family's flat tops: screen, then in full, four times in
    one search), and the screen's GPU-hours are lost."""
    return float(np.std(draws)) > noise * float(np.median(draws))


def knowledge_gradient(
    draws: np.ndarray, noise: float, columns: list[int], rng: random.Random
) -> np.ndarray:
    """For each configuration in `columns` (of `draws`, n draws x configurations), the expected
    rise of the best posterior mean over every configuration once one run of it is known (its
    relative spread `noise`)."""
    n = draws.shape[0]
    best_now = float(draws.mean(axis=0).max())
    gen = np.random.default_rng(rng.randrange(2**32))
    gains = np.zeros(len(columns))
    for a, x in enumerate(columns):
        # the run's outcomes: draws of the configuration, each with a run's spread
        y = draws[gen.integers(0, n, OUTCOMES), x] * (1 + noise * gen.standard_normal(OUTCOMES))
        # each draw's likelihood of each outcome, normalised per outcome (the posterior's weights)
        log_w = -0.5 * ((y[:, None] - draws[None, :, x]) / (noise * y[:, None])) ** 2
        w = np.exp(log_w - log_w.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)
        gains[a] = float((w @ draws).max(axis=1).mean()) - best_now
    return gains


def most_informative(
    draws: np.ndarray, noise: float, eligible: list[int], rng: random.Random
) -> int:
    """The column among `eligible` (non-empty) whose screen tells most about the best."""
    gains = knowledge_gradient(draws, noise, eligible, rng)
    return eligible[int(np.argmax(gains))]


__all__ = ["knowledge_gradient", "most_informative", "worth_screening"]
