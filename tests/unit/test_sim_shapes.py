"""The model's optional shapes (harness.sim.model.shapes): off by default, every named profile's
numbers are the ones it gave before the shapes existed, to the bit; on, each shape changes what
it claims to change, and P(>=k) still agrees with the accept length and with sampling."""

from __future__ import annotations

import random
from dataclasses import replace
from itertools import pairwise

import pytest

from harness.sim.model import profiles
from harness.sim.model.perf_model import Deployment, PerfModel, Speculation
from harness.sim.model.profiles import EAGLE3_37K_TTT5, KIMI_K25, RTX_PRO_6000_PCIE

SETUP = {
    "rtx_pro_6000_pcie": ("kimi_k25", 8),
    "h200_nvlink": ("kimi_k25", 8),
    "h100_sxm": ("llama31_8b", 1),
}

# Hard-coded from a run before the shape fields existed (P(>=k) at position 700, tau at 1024,
# decode_step_s(8, 2000); CUDA graphs and overlap on, tuned NCCL, graph bs 48): the named
# profiles are calibrated, so the defaults must leave them bit-identical. The chains' values are
# that run's; the trees' (topk > 1) were taken again when the simulator began to select each
# round's tree as SGLang does (harness.sim.model.draft_tree), their step costs unchanged.
BEFORE = {
    "rtx_pro_6000_pcie/eagle3_10k/2-2-5": (
        [0.7416546055558508, 0.47961427266797757],
        2.1704787066738933,
        0.04128474764432035,
    ),
    "rtx_pro_6000_pcie/eagle3_37k_ttt5/4-4-16": (
        [0.7424892389490961, 0.5061416752752883, 0.28897081062462787, 0.1403916274519625],
        2.615156976116757,
        0.07763116270176458,
    ),
    "rtx_pro_6000_pcie/aq_medai_k2/3-1-4": (
        [0.6698507462686567, 0.38139501893517486, 0.18458266574609242],
        2.1461727940385265,
        0.03909877606622753,
    ),
    "h200_nvlink/eagle3_37k_ttt5/6-2-12": (
        [
            0.6598628818579151,
            0.40912870677355373,
            0.22689395864356784,
            0.11405355647594763,
            0.04982380317747451,
            0.017865599896927077,
        ],
        2.40566252905729,
        0.02685336896796225,
    ),
    "h100_sxm/eagle3_llama31_8b/5-8-32": (
        [
            0.9202993744834036,
            0.8001072708685625,
            0.6458620830107707,
            0.48319488774223324,
            0.33732123650849877,
        ],
        4.123969125181724,
        0.01963928602086709,
    ),
}


# The fitted constants that run had (benchmarks/_calibration.py refits them whenever the model
# moves): the snapshot holds the shapes' defaults to the model, not to today's fit.
SNAPSHOT_CONSTANTS = {
    "rtx_pro_6000_pcie": {
        "spec_host_no_overlap_ms": 6.70,
        "spec_host_ms": 5.85,
        "verify_token_us": 756.0,
        "eager_us_per_layer": 243.0,
        "attention_efficiency": 0.31,
    },
    "eagle3_10k": {"first_accept": 0.758},
    "eagle3_37k_ttt5": {"first_accept": 0.648},
    "aq_medai_k2": {"first_accept": 0.748},
    "eagle3_llama31_8b": {"first_accept": 0.795, "sibling_residual": 0.79},
}


def _as_snapshot(profile):
    return replace(profile, **SNAPSHOT_CONSTANTS.get(profile.name, {}))


def named(key: str) -> PerfModel:
    hw, drafter, config = key.split("/")
    steps, topk, draft = (int(x) for x in config.split("-"))
    target, tp = SETUP[hw]
    spec = Speculation("EAGLE3", steps, topk, draft, _as_snapshot(profiles.DRAFTERS[drafter]))
    dep = Deployment(tp, True, True, True, 0, 48, spec)
    return PerfModel(_as_snapshot(profiles.HARDWARE[hw]), profiles.TARGETS[target], dep)


@pytest.mark.parametrize("key", BEFORE)
def test_the_named_profiles_are_unchanged_with_the_shapes_off(key):
    m = named(key)
    at_least, tau, step = BEFORE[key]
    # to the last few bits, not bit for bit: a fresh install's numerical libraries (numpy 2.4.6
    # here) moved one P(>=k) by one unit in the last place; any shape moves these by far more
    # than 1e-12
    assert m.accept_at_least(700) == pytest.approx(at_least, rel=1e-12, abs=0)
    assert m.expected_accept_len(1024) == pytest.approx(tau, rel=1e-12, abs=0)
    assert m.decode_step_s(8, 2000) == pytest.approx(step, rel=1e-12, abs=0)


def shaped(steps=5, topk=1, draft=None, hw=RTX_PRO_6000_PCIE, **drafter) -> PerfModel:
    spec = Speculation(
        "EAGLE3",
        steps,
        topk,
        draft or steps + 1,
        replace(EAGLE3_37K_TTT5, **drafter),
    )
    return PerfModel(hw, KIMI_K25, Deployment(8, True, True, True, 0, 48, spec))


def conditional(at_least: list[float]) -> list[float]:
    """P(>=k) / P(>=k-1): the chain's per-depth acceptance."""
    return [b / a for a, b in zip([1.0, *at_least], at_least, strict=False)]


def test_the_default_chain_is_geometric_and_a_depth_shape_is_not():
    plain = conditional(shaped().accept_at_least())
    ratios = [b / a for a, b in pairwise(plain)]
    assert ratios == pytest.approx([EAGLE3_37K_TTT5.depth_decay] * 4)
    # a rise then a cliff at depth 4
    shape = (1.0, 1.1, 1.05, 0.5, 0.45)
    rates = conditional(shaped(depth_shape=shape).accept_at_least())
    assert rates == pytest.approx([EAGLE3_37K_TTT5.first_accept * x for x in shape])
    assert rates[1] > rates[0] and rates[3] < 0.6 * rates[2]


def test_a_depth_shape_shorter_than_the_tree_goes_on_geometrically():
    rates = conditional(shaped(depth_shape=(1.0, 0.9)).accept_at_least())
    a1, decay = EAGLE3_37K_TTT5.first_accept, EAGLE3_37K_TTT5.depth_decay
    assert rates == pytest.approx([a1, *(a1 * 0.9 * decay**j for j in range(4))])


def test_deeper_drafts_fade_faster_with_position_under_depth_fade():
    def fade(m: PerfModel) -> list[float]:
        return [
            b / a
            for a, b in zip(
                conditional(m.accept_at_least(0)), conditional(m.accept_at_least(4000)), strict=True
            )
        ]

    plain, deep = fade(shaped()), fade(shaped(depth_fade=0.5))
    assert plain == pytest.approx([plain[0]] * 5)  # one fade for every depth
    assert deep[0] == pytest.approx(plain[0])  # the first depth fades as before
    assert all(b < a for a, b in pairwise(deep))
    # at position 0 nothing fades
    assert shaped(depth_fade=0.5).accept_at_least(0) == shaped().accept_at_least(0)


def sibling_q(m: PerfModel) -> list[float]:
    return conditional(m.accept_at_least())


def test_per_depth_sibling_residuals_change_only_their_depth():
    # 2 steps x topk 2 with 5 draft tokens: the root's two children always kept (four slots),
    # then the two best-scored of the four grandchildren
    base = shaped(2, 2, 5)
    per_depth = shaped(2, 2, 5, sibling_residuals=(0.85, 0.5))
    q0, q1 = sibling_q(base), sibling_q(per_depth)
    assert q1[0] == pytest.approx(q0[0])
    assert q1[1] > q0[1]


def test_later_siblings_catch_less_under_a_rank_power():
    one_depth = {"steps": 1, "topk": 8, "draft": 9}
    base, ranked = shaped(**one_depth), shaped(**one_depth, sibling_rank_power=1.0)
    a1, r = EAGLE3_37K_TTT5.first_accept, EAGLE3_37K_TTT5.sibling_residual
    # all eight children verified: the sibling model's catch, less what the cap takes where a
    # sibling's share would exceed the better one's (harness.sim.model.draft_tree._child_scores),
    # over the expectation's fixed rounds
    assert sibling_q(base)[0] == pytest.approx(1 - (1 - a1) * r**7, rel=0.01)
    # the m-th sibling leaves r ** (1 / (m-1)): 7 siblings leave r ** H(7), not r ** 7
    harmonic = sum(1 / m for m in range(1, 8))
    assert sibling_q(ranked)[0] < sibling_q(base)[0]
    assert sibling_q(ranked)[0] == pytest.approx(1 - (1 - a1) * r**harmonic, rel=0.01)
    assert sibling_q(ranked)[0] < sibling_q(base)[0]


ALL_SHAPES = {
    "depth_shape": (1.0, 1.08, 0.95, 0.6, 0.55, 0.5),
    "depth_fade": 0.6,
    "sibling_residuals": (0.9, 0.8, 0.7),
    "sibling_rank_power": 0.7,
}


@pytest.mark.parametrize("shape", [{}, *({k: v} for k, v in ALL_SHAPES.items()), ALL_SHAPES])
@pytest.mark.parametrize("config", [(6, 1, 7), (4, 4, 16), (5, 8, 32)])
def test_at_least_sums_to_tau_and_sampling_agrees(shape, config):
    m = shaped(*config, **shape)
    for position in (0, 1500):
        at_least = m.accept_at_least(position, 0.9)
        assert 1 + sum(at_least) == pytest.approx(m.expected_accept_len(position, 0.9))
        assert all(b <= a for a, b in pairwise(at_least))
    rng = random.Random(5)
    draws = [m.sample_tokens(rng, 1500, 0.9) for _ in range(10_000)]
    assert sum(draws) / len(draws) == pytest.approx(m.expected_accept_len(1500, 0.9), rel=0.02)
    at_least = m.accept_at_least(1500, 0.9)
    for k in (1, len(at_least)):
        assert sum(t > k for t in draws) / len(draws) == pytest.approx(at_least[k - 1], abs=0.015)


def step(draft: int, steps: int = 4, topk: int = 4, **hw) -> float:
    m = shaped(steps, topk, draft, hw=replace(RTX_PRO_6000_PCIE, **hw))
    return m.decode_step_s(1, 600)


def test_a_verify_bucket_jumps_the_step_past_its_threshold():
    drafts = range(6, 19)
    extra = [step(d, verify_bucket_ms=2.0) - step(d) for d in drafts]
    # the thresholds are (8, 16): 9..16 draft tokens pay one bucket, 17 and 18 two
    want = [2e-3 * ((d > 8) + (d > 16)) for d in drafts]
    assert extra == pytest.approx(want, abs=1e-12)
    jumps = [b - a for a, b in pairwise(step(d, verify_bucket_ms=2.0) for d in drafts)]
    smooth = [b - a for a, b in pairwise(step(d) for d in drafts)]
    assert jumps[2] > smooth[2] + 1.9e-3 and jumps[10] > smooth[10] + 1.9e-3


def test_a_verify_exponent_grows_the_cost_per_draft_token():
    def verify_cost(d: int, **hw) -> float:
        return step(d, **hw) - step(d, verify_token_us=0.0, **hw)

    v = RTX_PRO_6000_PCIE.verify_token_us * 1e-6
    assert verify_cost(16) == pytest.approx(15 * v)
    assert verify_cost(5, verify_token_exponent=1.4) == pytest.approx(4 * v)  # the pivot
    assert verify_cost(16, verify_token_exponent=1.4) == pytest.approx(15 * v * (15 / 4) ** 0.4)
    assert verify_cost(3, verify_token_exponent=1.4) < 2 * v


def test_candidate_bookkeeping_is_not_linear_in_steps_topk_and_draft_tokens():
    def cost(steps: int, topk: int) -> float:
        return step(steps * topk, steps, topk, draft_candidate_us=10.0) - step(
            steps * topk, steps, topk
        )

    assert cost(1, 4) == pytest.approx(5 * 10e-6)  # 1 + topk candidates at one step
    assert cost(4, 4) == pytest.approx((1 + 4 + 3 * 16) * 10e-6)
    assert cost(4, 2) == pytest.approx((1 + 2 + 3 * 4) * 10e-6)
