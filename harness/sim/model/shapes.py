"""Optional shapes of acceptance and step cost that the calibrated model does not have.

Every shape is a field of DrafterProfile or HardwareProfile whose default turns it off; with the
defaults each function here returns what perf_model computed before the shapes existed, by the
same arithmetic, so the named (calibrated) profiles give bit-identical numbers. The shapes are
not calibrated: they exist so benchmarks/_search_family.py's "shapes" part can draw landscapes
whose acceptance and cost take forms a model-based search does not assume:

- depth_shape: a_k = first_accept * depth_shape[k-1] instead of first_accept * decay**(k-1)
  (a rise then a fall, a cliff at some depth); depths past the tuple go on geometrically from
  its last entry;
- depth_fade: deep drafts fade faster over the output than shallow ones: the fade at depth k is
  1 / (1 + pos / long_context_tokens * (1 + depth_fade * (k-1))) instead of one fade for all;
- sibling_residuals: a residual per depth instead of one shared sibling_residual;
  sibling_rank_power g: the m-th sibling (m >= 2) leaves residual ** ((m-1) ** -g) of what is
  left, so later siblings catch less (g = 0: residual ** (n-1), the shared factor);
- verify buckets: the verify pass pays verify_bucket_ms more for each threshold in
  verify_bucket_tokens its draft tokens exceed (kernel/CUDA-graph tile jumps);
- verify_token_exponent e: the per-draft-token verify cost v grows with the draft tokens,
  v * (d-1) * ((d-1) / VERIFY_PIVOT_TOKENS) ** (e-1);
- draft_candidate_us: tree bookkeeping per candidate node the drafter scores and selects from,
  1 + topk + (steps-1) * topk**2 of them per iteration (not linear in steps, steps*topk, d).
"""

from __future__ import annotations

from harness.sim.model.profiles import DrafterProfile, HardwareProfile

VERIFY_PIVOT_TOKENS = 4  # verify_token_exponent leaves the cost of 4 verified drafts unchanged


def depth_factor(d: DrafterProfile, k: int) -> float:
    """a_(k+1) / first_accept at depth index k (0-based), before any fade."""
    if not d.depth_shape:
        return d.depth_decay**k
    if k < len(d.depth_shape):
        return d.depth_shape[k]
    return d.depth_shape[-1] * d.depth_decay ** (k - len(d.depth_shape) + 1)


def depth_fade(d: DrafterProfile, k: int, position: int) -> float:
    """The extra fade of depth index k at output `position`, on top of the common one
    (1 / (1 + pos / L), which perf_model applies to every depth): 1 with depth_fade off."""
    if not d.depth_fade or not position:
        return 1.0
    common = position / d.long_context_tokens
    return (1 + common) / (1 + common * (1 + d.depth_fade * k))


def miss_factor(d: DrafterProfile, k: int, nodes: int) -> float:
    """The share of the top-1 miss at depth index k that `nodes` siblings still leave."""
    residual = d.sibling_residual
    if d.sibling_residuals:
        residual = d.sibling_residuals[min(k, len(d.sibling_residuals) - 1)]
    if not d.sibling_rank_power:
        return residual ** (nodes - 1)
    return residual ** sum((m - 1) ** -d.sibling_rank_power for m in range(2, nodes + 1))


def verify_ms(hw: HardwareProfile, draft_tokens: int) -> float:
    """The per-iteration verify cost of `draft_tokens` beyond the target forward, in ms."""
    extra = draft_tokens - 1
    if hw.verify_token_exponent != 1.0 and extra > 0:
        ms = (
            hw.verify_token_us
            * 1e-3
            * extra
            * (extra / VERIFY_PIVOT_TOKENS) ** (hw.verify_token_exponent - 1)
        )
    else:
        ms = hw.verify_token_us * 1e-3 * extra
    if hw.verify_bucket_ms:
        ms += hw.verify_bucket_ms * sum(draft_tokens > t for t in hw.verify_bucket_tokens)
    return ms


def candidate_ms(hw: HardwareProfile, steps: int, topk: int) -> float:
    """Tree bookkeeping over the candidates the drafter scores in one iteration, in ms."""
    if not hw.draft_candidate_us or steps == 0:
        return 0.0
    return hw.draft_candidate_us * 1e-3 * (1 + topk + (steps - 1) * topk**2)
