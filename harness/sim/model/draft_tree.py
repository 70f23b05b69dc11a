"""The draft tree of one request in one decode round, selected as SGLang 0.5.23 selects it.

SGLang 0.5.23 (`srt/speculative/`, read in `make compat`'s `.venv-compat`):
- draft step 0 keeps the root's `topk` best tokens, each scored by its draft probability
  (`spec_utils.py::_select_top_k_tokens_first`); every later step expands each of the `topk`
  branches into its own `topk` tokens, scores each by its path's product of draft probabilities
  (`_select_top_k_tokens_later`: `expand_scores = scores.unsqueeze(2) * topk_p.view(-1, topk,
  topk)`) and keeps the best `topk` of those `topk**2` as the next step's branches (`fast_topk`);
- the verify tree is the `num_draft_tokens - 1` candidates of all steps with the highest scores,
  per request and per round (`eagle_utils.py::organize_draft_results`:
  `torch.topk(score_list, num_draft_token - 1, dim=-1)`); the bonus token is its root;
- the target accepts along the path whose tokens it agrees with, one depth after another.

The drafter's scores are drawn per node. At depth index k a node's best child has draft
probability p1, the draft's confidence; its m-th child (m >= 2) has (1 - p1) times the share of
the top-1 miss that sibling m catches under the drafter's sibling model
(`shapes.miss_factor`: with n children the miss left is (1 - p1) * miss(k, n)). The drafter is
calibrated (EAGLE-2, Li et al. 2024: the draft's confidence approximates its acceptance rate): the
target's token is the m-th child with probability p_m. p1 is drawn as U ** ((1 - a_k) / a_k), the
Beta(a_k / (1 - a_k), 1) whose mean is the calibrated acceptance a_k (perf_model's a_k), so
P(top-1 accepted) = a_k exactly and the chain (topk 1) accepts what it always did; how the
confidence spreads around its mean is not measured anywhere in reference/ (this form has no
parameter of its own; docs/simulator-limits.md, "Draft trees").

A served request's draws come from a hash of the round's seed and the node's path, never from a
stream: a node has the same scores and the same target token whatever else the round drafts, so
two launches whose selection picks the same nodes accept the same tokens in every round, as on
SGLang (a topk above the `num_draft_tokens - 1` slots: harness.sglang.speculative.dominated_by).
Expected values (`at_least`) draw fixed rounds with numpy instead: the same selection, for all
rounds at once.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from harness.sglang.speculative import dominated_by
from harness.sim.model import shapes
from harness.sim.model.profiles import DrafterProfile

_MASK = (1 << 64) - 1
_ROOT = 0x5EED
_CONFIDENCE, _TARGET = 1, 2  # salts: the node's p1, the target's token at the node
# Rounds per expected value (the oracle, accept_at_least): the chain's part is exact and the
# tree's gain over it varies little between rounds, so its mean's standard error is ~0.1% of the
# accept length (0.003 at 5/8/32); the same rounds for every tree (common random numbers).
EXPECTATION_ROUNDS = 2000
_SEED = 20251206  # the expectation's fixed rounds
GAIN_GRID = 0.05  # the scale's grid for the tree's gain (its chain part is exact at any scale)


def _mix(x: int) -> int:
    """splitmix64's finalizer: a 64-bit hash whose outputs pass as independent uniforms."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _uniform(seed: int, node: int, salt: int) -> float:
    """A uniform in (0, 1] fixed by the round, the node and what it is for."""
    return ((_mix(seed ^ _mix(node + salt)) >> 11) + 1) * 2.0**-53


def _child(node: int, rank: int) -> int:
    return _mix(node * 131 + rank)


@dataclass(frozen=True)
class TreeShape:
    steps: int
    topk: int
    draft_tokens: int

    @property
    def slots(self) -> int:
        return self.draft_tokens - 1


def _confidence(seed: int, node: int, mean: float) -> float:
    """The draft probability of the node's best child: Beta(mean / (1 - mean), 1)."""
    if mean <= 0.0:
        return 0.0
    return _uniform(seed, node, _CONFIDENCE) ** ((1.0 - mean) / mean)


def _child_scores(p1: float, misses: tuple[float, ...], topk: int) -> list[float]:
    """Draft probabilities of the node's `topk` best children (misses[n]: miss left by n).

    The m-th is (1 - p1) * (misses[m-1] - misses[m]), the sibling model's share, but never more
    than the (m-1)-th: they are the draft's best tokens in order, so where the draft is unsure
    (p1 below the second's share) the siblings tie with it and catch no more than it does."""
    probs = [p1]
    for m in range(2, topk + 1):
        probs.append(min(probs[-1], (1.0 - p1) * (misses[m - 1] - misses[m])))
    return probs


@dataclass
class _Round:
    """One request's drafted candidates in one round and the verify tree SGLang keeps."""

    keys: list[int]  # per expanded node (0: the root): its path hash
    probs: list[list[float]]  # per expanded node: its children's draft probabilities
    child_base: list[int]  # per expanded node: its first child's candidate index
    expanded_as: dict[int, int]  # candidate -> node, for those kept as branches
    kept: list[tuple[float, int, int, int]]  # (score, -depth, -rank, candidate)


def _draft(
    seed: int,
    shape: TreeShape,
    means: tuple[float, ...],
    misses: tuple[tuple[float, ...], ...],
) -> _Round:
    """The round's candidates and the `draft_tokens - 1` SGLang keeps. Candidates rank by score;
    equal scores (the capped siblings of an unsure draft) by depth, then sibling rank, so the
    kept set holds every kept node's parent and better siblings, as SGLang's always does."""
    r = _Round([_ROOT], [], [], {}, [])
    parent_of: list[int] = []  # per candidate: the node it is a child of
    candidates: list[tuple[float, int, int, int]] = []
    branches = [(1.0, 0, 0, -1)]
    for k in range(shape.steps):
        expanded = []
        for score, _, neg_rank, c in branches:
            node = len(r.probs)
            if c >= 0:
                r.expanded_as[c] = node
                r.keys.append(_child(r.keys[parent_of[c]], -neg_rank))
            p = _child_scores(_confidence(seed, r.keys[node], means[k]), misses[k], shape.topk)
            r.probs.append(p)
            r.child_base.append(len(parent_of))
            for rank, q in enumerate(p, 1):
                expanded.append((score * q, -(k + 1), -rank, len(parent_of)))
                parent_of.append(node)
        candidates.extend(expanded)
        branches = heapq.nlargest(shape.topk, expanded)  # _select_top_k_tokens_*: fast_topk
    r.kept = heapq.nlargest(shape.slots, candidates)  # organize_draft_results: torch.topk
    return r


def sample_accepted(
    seed: int,
    shape: TreeShape,
    means: tuple[float, ...],
    misses: tuple[tuple[float, ...], ...],
) -> int:
    """Draft tokens the target accepts in one round whose hash seed is `seed`.

    means[k]: the top-1 acceptance a_k at depth index k; misses[k][n]: the share of the top-1
    miss that n children at depth index k leave (misses[k][1] == 1)."""
    r = _draft(seed, shape, means, misses)
    kept = {c[3] for c in r.kept}
    node: int | None = 0
    accepted = 0
    while node is not None:
        # the target's token: the child whose probability interval holds v (the draft's
        # probabilities are calibrated); beyond the drafted children, none
        v, reach, child = _uniform(seed, r.keys[node], _TARGET), 0.0, None
        for rank, q in enumerate(r.probs[node]):
            reach += q
            if v <= reach:
                child = r.child_base[node] + rank
                break
        if child is None or child not in kept:
            break
        accepted += 1
        node = r.expanded_as.get(child)  # not a branch: nothing drafted below it
    return accepted


def top1_means(
    d: DrafterProfile, shape: TreeShape, scale: float, position: int
) -> tuple[float, ...]:
    """a_k per depth index k, as perf_model's chain has them (capped at 0.98)."""
    means = []
    for k in range(shape.steps):
        a = d.first_accept * shapes.depth_factor(d, k) * scale
        if d.depth_fade:
            a *= shapes.depth_fade(d, k, position)
        means.append(min(0.98, a))
    return tuple(means)


def miss_table(d: DrafterProfile, shape: TreeShape) -> tuple[tuple[float, ...], ...]:
    """miss[k][n]: the share of the top-1 miss at depth index k that n children leave."""
    return tuple(
        (1.0, *(shapes.miss_factor(d, k, n) for n in range(1, shape.topk + 1)))
        for k in range(shape.steps)
    )


def at_least(shape: TreeShape, d: DrafterProfile, scale: float, position: int) -> list[float]:
    """The tree's P(>= j drafts accepted), j = 1 .. steps, at the acceptance `scale` and output
    `position`: its chain's exactly, plus the tree's gain over the fixed rounds, interpolated on
    a grid of the scale (GAIN_GRID apart) so that an oracle walking through an output reuses it.
    A tree SGLang verifies as a smaller one's (dominated_by) gets that one's gain exactly."""
    smaller = dominated_by(shape.steps, shape.topk, shape.draft_tokens)
    if smaller is not None:
        own = at_least(TreeShape(*smaller), d, scale, position)
        return own + [0.0] * (shape.steps - len(own))
    low = math.floor(scale / GAIN_GRID)
    weight = scale / GAIN_GRID - low
    at = round(position / 250) * 250 if d.depth_fade else position
    misses = miss_table(d, shape)
    ends = [expected_gain(shape, top1_means(d, shape, p * GAIN_GRID, at), misses)
            for p in (low, low + 1)]  # fmt: skip
    chain = chain_at_least(shape, top1_means(d, shape, scale, position))
    return [c + g + weight * (h - g) for c, g, h in zip(chain, *ends, strict=True)]


def chain_at_least(shape: TreeShape, means: tuple[float, ...]) -> list[float]:
    """P(>= j drafts accepted), j = 1 .. steps, of the chain of the tree's slots (its rank-1
    children): the products of the means, exactly."""
    at_least, reach = [0.0] * shape.steps, 1.0
    for j in range(min(shape.steps, shape.slots)):
        reach *= means[j]
        at_least[j] = reach
    return at_least


def _child_table(p1: np.ndarray, misses: tuple[float, ...], topk: int) -> np.ndarray:
    """`_child_scores` for an array of confidences: ... x topk."""
    probs = np.empty((*p1.shape, topk))
    probs[..., 0] = p1
    for m in range(2, topk + 1):
        share = (1.0 - p1) * (misses[m - 1] - misses[m])
        probs[..., m - 1] = np.minimum(probs[..., m - 2], share)
    return probs


@lru_cache(maxsize=4096)
def expected_gain(
    shape: TreeShape,
    means: tuple[float, ...],
    misses: tuple[tuple[float, ...], ...],
) -> tuple[float, ...]:
    """What SGLang's tree adds to `chain_at_least`'s P(>= j), j = 1 .. steps, over
    EXPECTATION_ROUNDS fixed rounds (the same every call: common random numbers).

    With calibrated draft probabilities a kept node's score is the chance the target accepts
    its whole path, so P(>= j) in a round is the sum of its kept scores at depth j; the chain's
    is the product of its rank-1 confidences. Their difference in the same rounds is zero in
    most of them (the tree kept the chain), so its mean carries little noise; it is never
    negative in a round, since SGLang keeps the highest scores. The rounds are drawn with numpy
    here (the drafting and selection of `_draft`, for all rounds at once)."""
    steps, topk, slots, rounds = shape.steps, shape.topk, shape.slots, EXPECTATION_ROUNDS
    rng = np.random.default_rng(_SEED)
    mean = np.asarray(means, dtype=float)
    power = np.where(mean > 0, (1.0 - mean) / np.maximum(mean, 1e-12), np.inf)
    chain = rng.random((rounds, steps)) ** power  # the rank-1 path's confidences
    scores = _child_table(chain[:, :1], misses[0], topk).reshape(rounds, topk)
    on_chain = np.zeros((rounds, topk), dtype=bool)
    on_chain[:, 0] = True
    found, depths = [scores], [np.ones(topk, dtype=int)]
    branches, flags = scores, on_chain
    for k in range(1, steps):
        p1 = np.where(flags, chain[:, k : k + 1], rng.random((rounds, topk)) ** power[k])
        expanded = (branches[:, :, None] * _child_table(p1, misses[k], topk)).reshape(rounds, -1)
        child_flags = (flags[:, :, None] & (np.arange(topk) == 0)).reshape(rounds, -1)
        found.append(expanded)
        depths.append(np.full(expanded.shape[1], k + 1))
        best = np.argpartition(-expanded, topk - 1, axis=1)[:, :topk]  # fast_topk
        branches = np.take_along_axis(expanded, best, axis=1)
        flags = np.take_along_axis(child_flags, best, axis=1)
    every, depth = np.concatenate(found, axis=1), np.concatenate(depths)
    if slots < every.shape[1]:  # organize_draft_results: the D - 1 best scores
        kept = np.argpartition(-every, slots - 1, axis=1)[:, :slots]
    else:
        kept = np.broadcast_to(np.arange(every.shape[1]), every.shape)
    kept_scores, kept_depth = np.take_along_axis(every, kept, axis=1), depth[kept]
    gain = np.stack([(kept_scores * (kept_depth == j + 1)).sum(axis=1) for j in range(steps)], 1)
    length = min(steps, slots)
    gain[:, :length] -= np.cumprod(chain[:, :length], axis=1)
    return tuple(float(g) for g in gain.mean(axis=0))
