"""The speculative model (sweep/study/model/): acceptance by depth, the sibling factor, the
step-cost posterior, and the objective predicted with an interval."""

from __future__ import annotations

import math

import numpy as np
import pytest
from omegaconf import OmegaConf

from harness.record.stats import t975
from sweep.study.model import tree_selection
from sweep.study.model.acceptance import RHO, AcceptanceModel, Measured, chain_levels, tau_of
from sweep.study.model.cost import CostModel, CostPoint, features
from sweep.study.model.observations import (
    UNKNOWN_DF,
    UNKNOWN_NOISE,
    Level,
    Observation,
    run_noise,
)
from sweep.study.model.predict import Config, Predictor, Target, configurations, target_for
from sweep.study.search.space import SearchSpace
from sweep.study.trial.objective import Objective

SPACE = SearchSpace.from_config(OmegaConf.load("conf/search/eagle3_five.yaml").space)
# Conditional top-1 rates that are not geometric: a rise at depth 3, a cliff at 5
RATES = np.array([0.80, 0.70, 0.78, 0.62, 0.40])
RHO_TRUE = 0.82


def chain_at_least(steps: int) -> tuple[float, ...]:
    return tuple(float(np.prod(RATES[: k + 1])) for k in range(steps))


def tau_true(shape, rho=RHO_TRUE) -> float:
    """The model's own form: the chain of the shape's slots, plus a tree's gain under SGLang's
    selection (sweep.study.model.tree_selection)."""
    tau = float(tau_of(chain_levels(shape), RATES[None, :], np.array([rho]))[0])
    if shape[1] > 1:
        tau += float(tree_selection.gain_at(tree_selection.gains(shape, RATES), np.array([rho]))[0])
    return tau


def test_one_long_chain_predicts_every_shorter_chain_whatever_the_decay():
    long = Measured((5, 1, 6), tau_true((5, 1, 6)), chain_at_least(5), steps=200_000)
    model = AcceptanceModel([long], depth=5, rng=np.random.default_rng(0))
    rates, rho = model.rate_samples(512), model.rho_samples(512)
    for s in range(1, 5):
        draws = model.tau_samples((s, 1, s + 1), rates, rho)
        assert draws.mean() == pytest.approx(tau_true((s, 1, s + 1)), rel=0.005)


def test_a_depth_no_chain_reached_is_uncertain_until_measured():
    short = Measured((2, 1, 3), tau_true((2, 1, 3)), chain_at_least(2), steps=200_000)
    model = AcceptanceModel([short], depth=5, rng=np.random.default_rng(0))
    rates, rho = model.rate_samples(512), model.rho_samples(512)
    known = model.tau_samples((2, 1, 3), rates, rho)
    deep = model.tau_samples((5, 1, 6), rates, rho)
    assert known.std() < 0.01 and deep.std() > 10 * known.std()


def test_without_histograms_chains_fit_a_geometric_form():
    measured = [Measured((s, 1, s + 1), tau_true((s, 1, s + 1))) for s in (1, 5)]
    model = AcceptanceModel(measured, depth=5, rng=np.random.default_rng(0))
    assert model.reached == 0
    rates, rho = model.rate_samples(1024), model.rho_samples(1024)
    for s in (1, 5):  # the measured ones are matched; the form misses the cliff in between
        assert model.tau_samples((s, 1, s + 1), rates, rho).mean() == pytest.approx(
            tau_true((s, 1, s + 1)), rel=0.03
        )


def test_trees_fix_the_sibling_factor_and_the_posterior_is_uniform_before():
    chain = Measured((5, 1, 6), tau_true((5, 1, 6)), chain_at_least(5), steps=200_000)
    before = AcceptanceModel([chain], depth=5, rng=np.random.default_rng(0))
    assert np.allclose(before.rho_post, 1 / RHO.size)
    trees = [Measured(sh, tau_true(sh)) for sh in ((3, 4, 8), (4, 2, 7))]
    after = AcceptanceModel([chain, *trees], depth=5, rng=np.random.default_rng(0))
    assert after.rho_mean == pytest.approx(RHO_TRUE, abs=0.02)
    rates, rho = after.rate_samples(512), after.rho_samples(512)
    assert after.tau_samples((5, 4, 16), rates, rho).mean() == pytest.approx(
        tau_true((5, 4, 16)), rel=0.02
    )


def _cost_points(shapes, coef, noise, rng):
    out = []
    for sh in shapes:
        t = float(np.dot(features(sh, (), []), coef)) * (1 + noise * rng.standard_normal())
        out.append(CostPoint(features(sh, (), []), t, noise))
    return out


def test_chains_alone_leave_a_tree_uncertain_and_one_tree_narrows_it():
    coef = np.array([0.010, 0.0010, 0.0004, 0.0006])
    rng = np.random.default_rng(1)
    chains = _cost_points([(5, 1, 6), (1, 1, 2)], coef, 0.01, rng)
    tree = np.array([features((4, 4, 16), (), [])])
    wide = CostModel(chains, np.random.default_rng(2)).samples(tree, 2000)[:, 0]
    narrow = CostModel(
        chains + _cost_points([(3, 4, 8)], coef, 0.01, rng), np.random.default_rng(2)
    ).samples(tree, 2000)[:, 0]
    truth = float(tree[0] @ coef)
    assert np.percentile(wide, 2.5) <= truth <= np.percentile(wide, 97.5)
    assert np.percentile(narrow, 2.5) <= truth <= np.percentile(narrow, 97.5)
    assert np.ptp(np.percentile(narrow, [2.5, 97.5])) < 0.5 * np.ptp(
        np.percentile(wide, [2.5, 97.5])
    )
    assert (CostModel(chains, np.random.default_rng(3)).coefficients(500)[:, :4] >= 0).all()


def test_the_misfit_widens_the_band_when_costs_are_not_linear():
    rng = np.random.default_rng(4)
    shapes = [
        (s, k, d)
        for s, k, d in [
            (1, 1, 2),
            (5, 1, 6),
            (3, 4, 8),
            (2, 2, 4),
            (4, 2, 8),
            (3, 1, 4),
            (5, 4, 16),
            (2, 4, 6),
        ]
    ]
    points = []
    for sh in shapes:
        x = features(sh, (), [])
        t = 0.01 + 0.001 * sh[0] + 0.00005 * (sh[2] - 1) ** 2.5  # superlinear in draft tokens
        points.append(CostPoint(x, t, 0.01))
    model = CostModel(points, rng)
    assert model.misfit > 0.02


def _observation(number, shape, tau, speed, at_least=()):
    level = Level(tau, speed, 0.02 * speed, speed, 0.02 * speed, at_least, 100_000)
    return Observation(number, *shape, (), None, {1: level}, 100.0, 300.0, 1.0)


def test_the_predictor_ranks_configurations_from_three_launches():
    coef = np.array([0.010, 0.0010, 0.0004, 0.0006])

    def speed(sh):
        return tau_true(sh) / float(np.dot(features(sh, (), []), coef))

    opening = [(5, 1, 6), (1, 1, 2), (3, 4, 8)]
    obs = [
        _observation(i, sh, tau_true(sh), speed(sh), chain_at_least(sh[0]) if sh[1] == 1 else ())
        for i, sh in enumerate(opening)
    ]
    predictor = Predictor(obs, Target((1,), (1.0,), "decode"), SPACE)
    configs = configurations(SPACE, ())
    mid, low, high = predictor.summary(configs)
    truth = np.array([speed(c.shape) for c in configs])
    assert np.mean((low <= truth) & (truth <= high)) > 0.9
    order = np.argsort(np.argsort(mid)), np.argsort(np.argsort(truth))
    assert np.corrcoef(*order)[0, 1] > 0.8  # Spearman


def test_every_distinct_launch_is_a_configuration_once():
    configs = configurations(SPACE, ())
    shapes = [c.shape for c in configs]
    assert len(shapes) == len(set(shapes))
    assert (3, 1, 4) in shapes and (3, 1, 5) not in shapes  # topk 1: draft = steps + 1
    assert (1, 4, 5) in shapes and (1, 4, 6) not in shapes  # a tree holds at most s*k + 1
    assert Config((2, 4, 6), (("hicache_size", 48),)).label() == "2/4/6 hicache_size=48"


def test_pareto_objectives_have_no_single_prediction():
    assert target_for(Objective("tok_s+throughput", 64)) is None
    assert target_for(Objective("weighted_throughput", 64, levels=[1, 8])) == Target(
        (1, 8), (0.5, 0.5), "output"
    )


def _launch(spread: float | None, runs: int, speed: float = 100.0) -> Observation:
    """A chain measured with `runs` runs whose spread is `spread` (None: one run, no interval)."""
    ci = None if spread is None else t975(runs - 1) * spread * speed / math.sqrt(runs)
    level = Level(2.0, speed, ci, speed, ci, runs=runs)
    return Observation(0, 3, 1, 4, (), None, {1: level})


def test_a_runs_spread_is_read_from_the_launches_intervals_and_pooled_by_their_runs():
    assert run_noise([], (1,), "decode") == UNKNOWN_NOISE  # nothing measured: the assumption
    assert run_noise([_launch(None, 1)], (1,), "decode") == UNKNOWN_NOISE  # one run: no interval
    assert _launch(0.02, 5).levels[1].run_spread("decode") == pytest.approx(0.02)
    ten = [_launch(0.02, 5) for _ in range(10)]  # 40 degrees of freedom at 2%, the prior's 4 at 5%
    pooled = math.sqrt((UNKNOWN_DF * UNKNOWN_NOISE**2 + 40 * 0.02**2) / (UNKNOWN_DF + 40))
    assert run_noise(ten, (1,), "decode") == pytest.approx(pooled)
    loud = [_launch(0.10, 21) for _ in range(10)]  # a noisy box (+-10% runs) is read as one
    assert run_noise(loud, (1,), "decode") == pytest.approx(0.099, abs=0.001)
    assert run_noise(ten, (8,), "output") == UNKNOWN_NOISE  # not the objective's level


def test_a_tree_with_a_chains_slots_is_predicted_above_the_chain_and_a_dominated_one_the_same():
    """SGLang 0.5.23 keeps each round's D - 1 best-scored drafts (srt/speculative/eagle_utils.py
    `organize_draft_results`): 2/2/3 verifies a1's sibling where the draft is unsure, so the
    model's 2/2/3 accepts more than 2/1/3; a topk above the D - 1 slots never wins one, so 2/4/3
    is predicted exactly as 2/2/3 (harness.sglang.speculative.dominated_by)."""
    chain = Measured((5, 1, 6), tau_true((5, 1, 6)), chain_at_least(5), steps=200_000)
    model = AcceptanceModel([chain], depth=5, rng=np.random.default_rng(0))
    rho = np.full(256, RHO_TRUE)
    rates = np.repeat(model.rates[None, :], 256, axis=0)
    model.misfit = 0.0  # the forms alone, without a tree's misfit noise
    chain_tau = model.tau_samples((2, 1, 3), rates, rho)
    tree_tau = model.tau_samples((2, 2, 3), rates, rho)
    assert (tree_tau > chain_tau).all()
    assert (model.tau_samples((2, 4, 3), rates, rho) == tree_tau).all()
