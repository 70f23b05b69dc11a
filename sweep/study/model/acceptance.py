"""Tokens per verify step, predicted for every draft shape from the shapes a study measured.

Chains. A chain's k-th draft token does not know how many drafts follow it, so the share of
verify steps that yield at least k + 1 tokens, P(>=k), is the same in every chain at least k deep,
and a chain of s steps accepts tau(s) = 1 + sum_{k<=s} P(>=k) tokens per step. The server's
per-step histogram (harness.measure.step_acceptance) gives P(>=k) for every depth a measured chain
reached, so one long chain predicts every shorter one. The model keeps the conditional rates
a_k = P(>=k) / P(>=k-1), each with its binomial uncertainty from the steps that reached depth
k - 1. A depth no chain reached carries the deepest measured rate on, times a drift per extra
depth drawn from DRIFT (wide on purpose: it is a guess until a chain that deep is measured).
Without histograms (a server that sends none, a stream too coarse), chains' accept lengths fit a
geometric a_k = a_1 * r**(k-1) on a grid, uniform before any chain is measured.

Trees. SGLang 0.5.23 selects each request's tree per round from the draft's scores: the
D - 1 best-scored candidates of topk branches per step (`srt/speculative/eagle_utils.py`
`organize_draft_results`), so a tree verifies its chain of D - 1 drafts in rounds where the draft
is sure and siblings where it is not. Its tau is its chain's plus a gain (`tree_selection`): each
extra sibling of a node carries a share 1 - rho of what the better ones left, the draft's
confidence spreads around the measured rates. rho is one number per drafter, with a posterior on a
grid (uniform before any tree is measured, so an unmeasured tree is uncertain and worth
measuring). It is a form, not a law: trees whose siblings differ by depth or rank miss it, and the
misfit (from the residuals once two trees are measured, MISFIT before) widens every tree's
interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.sglang.speculative import dominated_by
from sweep.study.model import tree_selection

Shape = tuple[int, int, int]  # (steps, topk, draft tokens)
RHO = np.round(np.arange(0.30, 1.0001, 0.01), 2)
DRIFT = (0.80, 1.00)  # per unmeasured depth: the last measured rate times a draw from this band
MISFIT = 0.05  # a tree's tau trusted to 5% until two trees say how far the form is off
_A1 = np.arange(0.05, 0.991, 0.01)
_R = np.arange(0.50, 1.001, 0.01)


@dataclass(frozen=True)
class Measured:
    shape: Shape
    tau: float
    at_least: tuple[float, ...] = ()
    steps: int = 0


def chain_levels(shape: Shape) -> list[int]:
    """The chain a shape's verify slots hold: one node per depth, at most D - 1 deep."""
    steps, _, draft = shape
    return [1] * min(steps, draft - 1)


def tau_of(levels: Sequence[int], rates: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """tau for every sample: rates (S x depth) and rho (S,)."""
    tau = np.ones(rates.shape[0])
    reach = np.ones(rates.shape[0])
    for j, n in enumerate(levels):
        if n == 0:
            break
        reach = reach * (1 - (1 - rates[:, j]) * rho ** (n - 1))
        tau = tau + reach
    return tau


class AcceptanceModel:
    """Fitted to one drafter's measured shapes at one concurrency level."""

    def __init__(self, measured: list[Measured], depth: int, rng: np.random.Generator):
        self.depth, self.rng = depth, rng
        self.chains = [m for m in measured if m.shape[1] == 1]
        self.trees = [m for m in measured if m.shape[1] > 1]
        self.rate_hat, self.rate_se, self.reached = self._chain_rates()
        self.rates = self._rate_point()  # the point estimate the trees' gains are taken at
        self._gain: dict[Shape, np.ndarray] = {}
        self.rho_post, self.misfit = self._sibling_posterior()
        self.rho_mean = float((self.rho_post * RHO).sum())

    # -- chains --------------------------------------------------------------------------------
    def _chain_rates(self) -> tuple[np.ndarray, np.ndarray, int]:
        """Conditional rates a_k (point, se) for k = 1..depth, and the depth histograms reached."""
        hat, se = np.full(self.depth, np.nan), np.full(self.depth, np.nan)
        for k in range(self.depth):
            num = den = 0.0
            for m in self.chains:
                if len(m.at_least) > k and m.steps > 0:
                    prev = m.at_least[k - 1] if k else 1.0
                    num += m.steps * m.at_least[k]
                    den += m.steps * prev
            if den > 0:
                p = min(max(num / den, 1e-3), 1 - 1e-3)
                hat[k], se[k] = p, np.sqrt(p * (1 - p) / den)
        reached = int(np.argmax(np.isnan(hat))) if np.isnan(hat).any() else self.depth
        if reached == 0:
            self.geometric = self._geometric_posterior()
        return hat, se, reached

    def _geometric_posterior(self) -> np.ndarray:
        """Weights over (a_1, r) from the chains' accept lengths (uniform without any)."""
        a1, r = np.meshgrid(_A1, _R, indexing="ij")
        logp = np.zeros_like(a1)
        for m in self.chains:
            s = min(m.shape[0], m.shape[2] - 1)
            reach, tau = np.ones_like(a1), np.ones_like(a1)
            for k in range(s):
                reach = reach * np.minimum(a1 * r**k, 0.999)
                tau = tau + reach
            sd = 0.02 * m.tau
            logp -= (tau - m.tau) ** 2 / (2 * sd**2)
        w = np.exp(logp - logp.max())
        return w / w.sum()

    def rate_samples(self, n: int) -> np.ndarray:
        """n draws of the conditional rates a_1..a_depth (n x depth)."""
        out = np.empty((n, self.depth))
        if self.reached == 0:
            w = self.geometric.ravel()
            idx = self.rng.choice(w.size, size=n, p=w)
            a1 = _A1[idx // _R.size][:, None]
            r = _R[idx % _R.size][:, None]
            return np.minimum(a1 * r ** np.arange(self.depth)[None, :], 0.999)
        for k in range(self.reached):
            out[:, k] = self.rng.normal(self.rate_hat[k], self.rate_se[k], n)
        for k in range(self.reached, self.depth):
            out[:, k] = out[:, k - 1] * self.rng.uniform(*DRIFT, n)
        return np.clip(out, 1e-3, 0.999)

    def _rate_point(self) -> np.ndarray:
        if self.reached == 0:
            return self.rate_samples(256).mean(axis=0)
        rates = self.rate_hat.copy()
        for k in range(self.reached, self.depth):
            rates[k] = rates[k - 1] * sum(DRIFT) / 2
        return rates

    # -- trees ---------------------------------------------------------------------------------
    def _gains(self, shape: Shape) -> np.ndarray:
        """The tree's gains; a tree SGLang verifies as a smaller one's (topk or steps above
        its D - 1 slots, harness.sglang.speculative.dominated_by) has that one's exactly."""
        shape = dominated_by(*shape) or shape
        if shape not in self._gain:
            self._gain[shape] = tree_selection.gains(shape, self.rates)
        return self._gain[shape]

    def _sibling_posterior(self) -> tuple[np.ndarray, float]:
        uniform = np.full(RHO.size, 1.0 / RHO.size)
        if not self.trees:
            return uniform, MISFIT
        point = self.rates[None, :]
        preds = np.array(
            [
                tau_of(chain_levels(m.shape), point, np.ones(1))[0]
                + tree_selection.gain_at(self._gains(m.shape), RHO)
                for m in self.trees
            ]
        )
        taus = np.array([m.tau for m in self.trees])
        rel = (preds - taus[:, None]) / taus[:, None]
        misfit = MISFIT
        if len(self.trees) >= 2:
            best = int(np.argmin((rel**2).sum(axis=0)))
            spread = np.sqrt((rel[:, best] ** 2).sum() / (len(self.trees) - 1))
            misfit = max(float(spread), 0.005)  # never trusted past the tau's own noise
        logp = -(rel**2).sum(axis=0) / (2 * misfit**2)
        post = np.exp(logp - logp.max())
        return post / post.sum(), misfit

    def tau_samples(self, shape: Shape, rates: np.ndarray, rho: np.ndarray) -> np.ndarray:
        """tau draws for `shape`, given draws of the rates and of rho (trees add their misfit):
        the chain of its D - 1 slots, plus a tree's gain under SGLang's selection."""
        tau = tau_of(chain_levels(shape), rates, rho)
        if shape[1] > 1:
            tau = tau + tree_selection.gain_at(self._gains(shape), rho)
            tau = tau * (1 + self.misfit * self.rng.standard_normal(tau.size))
        return np.maximum(tau, 1.0)

    def rho_samples(self, n: int) -> np.ndarray:
        return self.rng.choice(RHO, size=n, p=self.rho_post)
