"""Seconds per verify iteration, per level: linear in what a launch makes the GPU do, at the
CUDA-graph batch its steps replay.

One speculative iteration runs `steps` draft forwards over `topk` branches, then one target
forward verifying `draft_tokens` tokens, for every request in the batch. SGLang replays the
CUDA graph of the smallest captured batch size at or above the running requests
(harness.sglang.graphs), so a step's time is a staircase in the requests it runs: constant
within a captured bucket, a jump where the batch crosses a captured size. At a given level
its time is close to

    step = c0 + c1 * steps + c2 * steps * topk + c3 * (draft_tokens - 1)
           + (P / P_ref - 1) * (c4 + c5 * (draft_tokens - 1))  (+ an offset per value of each
                                                                 other searched knob)

with P the padded batch the launch's steps replayed (its mean requests per decode step, padded
to the sizes it captured: both as the launch reports them) and P_ref the level's usual one
(`predict`): c4 + c5 (draft - 1) is the part of the step that grows with the graph's rows (the
draft's passes over them and the target's verify of their draft tokens), as much again for
twice the rows. Where every launch of a level ran the same
padded batch the form is the line c0..c3 (the padding terms are left out: nothing measured moves
them); where the KV pool let
launches admit different numbers of requests (a lower fraction, a tight card), the terms carry
the staircase between them. The step is measured per trial and level as tau / speed for the
per-user speed, and as tau / speed times the requests in a step for the output speed over all
streams (which divides the step by them). The coefficients have a Gaussian posterior: a prior
N(0, scale^2) per coefficient, scale the slowest measured step (wide: a coefficient that size
would make a configuration twice the slowest), observations weighted by their measured 95%
intervals plus the form's misfit (c0's prior flat: a zero-mean prior on it would claim, from one
trial, that a step is all work terms), estimated from the residuals once there are more trials
than coefficients. Chains alone fix only c0 and c1 + c2 + c3 (their features move together); a
tree separates them; until then a tree's cost is as uncertain as the prior says, and the search
sees it as worth measuring. The fixed part, the work terms and a row's cost are times, so draws
keep c0..c5 >= 0; a draw below half the fastest measured step is held there (the linear form
extrapolated past zero is not a step time). The draws come from a Gibbs sampler on the
truncated posterior (rejection fails: chains alone leave it a long thin ridge, mostly outside
the bound).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtr, ndtri

Shape = tuple[int, int, int]
GIBBS_SWEEPS = 30
FLAT = 100.0  # c0's prior spread in units of the slowest t: flat where the data can reach


WORK_TERMS = 6  # c0..c5: times, held >= 0 (the indicators after them are offsets)
LINE_TERMS = 4  # c0..c3: the line without the padding terms


def features(
    shape: Shape,
    others: Sequence[tuple[str, Any]],
    levels: list[tuple[str, Any]],
    padding: float | None = None,
):
    """The row of one configuration: 1, steps, steps x topk, draft - 1, then the padded batch
    relative to the level's usual one (`padding`, P / P_ref - 1) and that times draft - 1 (None:
    the line, without those two), then one indicator per (knob, value) in `levels` (every other
    knob's values but its first)."""
    s, k, d = shape
    row = [1.0, float(s), float(s * k), float(d - 1)]
    if padding is not None:
        row += [padding, padding * (d - 1)]
    values = dict(others)
    row += [1.0 if values.get(name) == value else 0.0 for name, value in levels]
    return row


@dataclass
class CostPoint:
    x: list[float]
    t: float  # seconds per step (tau / speed, times the requests in a step for output speed)
    rel_se: float  # the measurement's relative standard error


class CostModel:
    def __init__(
        self, points: list[CostPoint], rng: np.random.Generator, bounded: int = LINE_TERMS
    ):
        # bounded: the leading coefficients that are times (held >= 0 in the draws)
        self.rng = rng
        self.bounded = bounded
        self.n = len(points)
        x = np.array([p.x for p in points])
        t = np.array([p.t for p in points])
        rel = np.array([p.rel_se for p in points])
        self.p = x.shape[1]
        self.scale = float(t.max())
        self.floor = 0.5 * float(t.min())
        prior = np.eye(self.p) / self.scale**2
        prior[0, 0] = 1 / (FLAT * self.scale) ** 2  # c0: no pull towards 0 (see the docstring)
        misfit = 0.0
        for _ in range(2):  # fit, estimate the misfit from the residuals, refit
            var = (t**2) * (rel**2 + misfit**2)
            w = 1.0 / var
            precision = x.T @ (x * w[:, None]) + prior
            self.cov = np.linalg.inv(precision)
            self.mean = self.cov @ (x.T @ (w * t))
            if self.n <= self.p:
                break
            resid = (t - x @ self.mean) / t
            excess = float((resid**2).sum() / (self.n - self.p) - (rel**2).mean())
            misfit = float(np.sqrt(max(excess, 0.0)))
        self.misfit = misfit

    def coefficients(self, n: int) -> np.ndarray:
        """n draws of the coefficients from the posterior held to what a step time can be: the
        fixed part, the work terms (steps, branches, draft tokens) and a padded row's cost are
        times, so c0..c5 >= 0 (the other knobs' offsets may be negative: CUDA graphs on, say,
        against off).
        A Gibbs sampler on the truncated Gaussian (n chains side by side, GIBBS_SWEEPS sweeps
        from the bound-respecting mean): each coefficient in turn from its conditional given the
        others, a univariate normal cut at 0 for the work terms."""
        precision = np.linalg.inv(self.cov)
        x = np.tile(self.mean, (n, 1))
        x[:, : self.bounded] = np.maximum(x[:, : self.bounded], 0.0)
        for _ in range(GIBBS_SWEEPS):
            for i in range(self.p):
                q = precision[i, i]
                others = (x - self.mean) @ precision[i] - (x[:, i] - self.mean[i]) * q
                mean, sd = self.mean[i] - others / q, 1.0 / np.sqrt(q)
                if i < self.bounded:  # truncated at 0: inverse CDF over the allowed part
                    lo = ndtr((0.0 - mean) / sd)
                    u = lo + (1 - lo) * self.rng.random(n)
                    x[:, i] = np.maximum(mean + sd * ndtri(np.clip(u, 1e-12, 1 - 1e-12)), 0.0)
                else:
                    x[:, i] = mean + sd * self.rng.standard_normal(n)
        return x

    def samples(self, rows: np.ndarray, n: int) -> np.ndarray:
        """n draws of the step for each row (n x rows): the coefficients' posterior plus the
        misfit."""
        t = self.coefficients(n) @ rows.T
        if self.misfit:
            t = t * (1 + self.misfit * self.rng.standard_normal(t.shape))
        return np.maximum(t, self.floor)
