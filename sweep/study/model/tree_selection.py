"""What a draft tree adds to its chain, under SGLang 0.5.23's selection (for `acceptance`).

SGLang 0.5.23 builds each request's verify tree per round from the draft's scores
(`srt/speculative/spec_utils.py` `_select_top_k_tokens_first/_later`: topk branches per step, each
expanded into topk tokens scored by their path's product of draft probabilities, the best topk of
those topk**2 kept as branches; `srt/speculative/eagle_utils.py` `organize_draft_results`: the
`num_draft_tokens - 1` best scores of all steps are verified). A tree of D draft tokens therefore
verifies the chain of D - 1 drafts in a round where the draft is sure and siblings where it is not,
and accepts, on average, its chain's tau plus a gain.

The gain is estimated here over ROUNDS fixed rounds (the same for every shape, rates and rho, so
predictions move smoothly with them). In a round the draft's confidence at a node of depth j
(the probability of its best token) is drawn with mean a_j, the measured conditional rate, as
U ** ((1 - a_j) / a_j) (Beta(a_j / (1 - a_j), 1): the spread is an assumption, a form with no
parameter of its own); the m-th best token has (1 - p1)(1 - rho) rho**(m - 2), never more than
the (m - 1)-th. With calibrated draft probabilities a verified node's score is the chance that
the target accepts its path, so P(>= j) in a round is the sum of the verified scores at depth j,
and the gain is that sum less the chain's (the product of the rank-1 confidences) in the same
round: zero in the rounds where SGLang keeps the chain, never negative.
"""

from __future__ import annotations

import functools

import numpy as np

Shape = tuple[int, int, int]  # (steps, topk, draft tokens)
RHO_GRID = np.round(np.arange(0.30, 1.0001, 0.05), 2)  # gains at these rho, interpolated between
ROUNDS = 400  # rounds per rho: the gain's standard error is a few 0.1% of tau
SEED = 20251206  # fixed: the same rounds for every shape and fit


def _child_probs(p1: np.ndarray, rho: np.ndarray, topk: int) -> np.ndarray:
    """Draft probabilities of the topk best children of nodes with confidence p1 (N x B):
    N x B x topk. rho: N x 1."""
    probs = np.empty((*p1.shape, topk))
    probs[..., 0] = p1
    for m in range(1, topk):
        share = (1.0 - p1) * (1.0 - rho) * rho ** (m - 1)
        probs[..., m] = np.minimum(probs[..., m - 1], share)
    return probs


def gains(shape: Shape, rates: np.ndarray) -> np.ndarray:
    """The tree's gain in P(>= j) over its chain of D - 1 drafts, per rho in RHO_GRID and depth
    j = 1 .. steps (len(RHO_GRID) x steps), at the conditional rates `rates` (point values)."""
    steps, topk, draft = shape
    a = np.clip(np.asarray(rates[:steps], dtype=float), 1e-3, 0.98)
    chain, every, depth = _drafted(steps, topk, a.tobytes())
    slots = draft - 1
    if slots < every.shape[1]:  # organize_draft_results: the D - 1 best scores
        kept = np.argpartition(-every, slots - 1, axis=1)[:, :slots]
    else:
        kept = np.broadcast_to(np.arange(every.shape[1]), every.shape)
    kept_scores, kept_depth = np.take_along_axis(every, kept, axis=1), depth[kept]
    at_least = np.stack(
        [(kept_scores * (kept_depth == j + 1)).sum(axis=1) for j in range(steps)], axis=1
    )
    length = min(steps, slots)
    at_least[:, :length] -= np.cumprod(chain[:, :length], axis=1)
    return at_least.reshape(RHO_GRID.size, ROUNDS, steps).mean(axis=1)


@functools.lru_cache(maxsize=16)  # a fit's (steps, topk) pairs: 10 in the shipped space
def _drafted(steps: int, topk: int, rates: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One fit's drafted rounds for (steps, topk): the rank-1 path's confidences, every
    candidate's score and its depth. Every draft-token count of the pair selects from these
    same candidates (`gains`), so a fit drafts each pair once, not once per tree."""
    a = np.frombuffer(rates)
    grid = RHO_GRID.size
    rng = np.random.default_rng(SEED)
    power = (1.0 - a) / a
    rho = np.repeat(RHO_GRID, ROUNDS)[:, None]  # (N, 1), N = grid x ROUNDS

    def draws(shape_: tuple[int, ...], j: int) -> np.ndarray:  # the same rounds at every rho
        return np.tile(rng.random(shape_), (grid, 1)) ** power[j]

    chain = draws((ROUNDS, 1), 0)  # the rank-1 path's confidences, one column per depth
    chain = np.concatenate([chain, *(draws((ROUNDS, 1), j) for j in range(1, steps))], axis=1)
    scores = _child_probs(chain[:, :1], rho, topk).reshape(-1, topk)  # depth 1: all branches
    on_chain = np.zeros_like(scores, dtype=bool)
    on_chain[:, 0] = True
    found, depths = [scores], [np.full(topk, 1)]
    branches, flags = scores, on_chain
    for j in range(1, steps):
        p1 = np.where(flags, chain[:, j : j + 1], draws((ROUNDS, topk), j))
        expanded = (branches[:, :, None] * _child_probs(p1, rho, topk)).reshape(len(rho), -1)
        child_flags = (flags[:, :, None] & (np.arange(topk) == 0)).reshape(len(rho), -1)
        found.append(expanded)
        depths.append(np.full(expanded.shape[1], j + 1))
        best = np.argpartition(-expanded, topk - 1, axis=1)[:, :topk]  # fast_topk
        branches = np.take_along_axis(expanded, best, axis=1)
        flags = np.take_along_axis(child_flags, best, axis=1)
    every, depth = np.concatenate(found, axis=1), np.concatenate(depths)
    for array in (chain, every, depth):
        array.flags.writeable = False  # shared between the trees of a fit
    return chain, every, depth


def gain_at(table: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """The summed gain (tau) at each rho, interpolated in a `gains` table."""
    return np.interp(rho, RHO_GRID, table.sum(axis=1))
