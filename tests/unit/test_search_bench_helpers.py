"""The pure helpers of benchmarks/search_efficiency.py: censored medians and their bootstrap
intervals, the effective grid, and the drawn family of landscapes."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from omegaconf import OmegaConf

from benchmarks import _search_family
from benchmarks._search_arms import effective_points, grid_for, objective_for
from benchmarks._search_report import summarize_landscape
from benchmarks._search_stats import bootstrap_median, bootstrap_ratio, median, quantile
from harness.sglang.speculative import dominated_by
from harness.sim.model import profiles
from sweep.study.search.space import DRAFT, STEPS, TOPK, SearchSpace

SPACE = SearchSpace.from_config(OmegaConf.load("conf/search/eagle3_five.yaml").space)


def test_a_censored_search_counts_as_worse_than_any_that_got_there():
    assert median([1.0, 2.0, None]) == 2.0
    assert median([1.0, None, None]) == math.inf  # more than half never got there


def test_the_interval_covers_the_median_and_opens_upwards_when_censoring_can_win():
    values = [float(v) for v in range(1, 21)]
    low, high = bootstrap_median(values, resamples=500)
    assert low <= median(values) <= high and low < high
    low, high = bootstrap_median([*values[:11], *[None] * 9], resamples=500)
    assert math.isfinite(low) and high == math.inf


def test_the_ratio_interval_pairs_the_seeds():
    a = [float(v) for v in range(1, 31)]
    point, low, high = bootstrap_ratio(a, [2 * v for v in a], resamples=500)
    assert point == pytest.approx(0.5) and low == pytest.approx(0.5) and high == pytest.approx(0.5)
    point, low, high = bootstrap_ratio([None] * 3, [None] * 3)
    assert math.isnan(point)


def test_the_worst_decile_is_the_high_end():
    assert quantile([float(v) for v in range(1, 11)], 0.9) == 9.0
    assert quantile([1.0, math.nan, 3.0], 0.5) == 1.0


def test_the_grid_has_each_effective_launch_once():
    points = effective_points(SPACE)
    keys = [(p[STEPS], p[TOPK], p.get(DRAFT, p[STEPS] + 1)) for p in points]
    assert len(keys) == len(set(keys))
    assert [k for k in keys if k[1] == 1] == [(s, 1, s + 1) for s in range(1, 6)]  # one per steps
    assert all(d <= min(16, s * k + 1) for s, k, d in keys)
    # no tree SGLang verifies as a smaller launch does (a topk or depth above the D - 1 slots):
    # the driver never launches one, so it is no search's answer
    assert all(dominated_by(*k) is None for k in keys)
    assert (1, 2, 2) in keys and (2, 2, 2) not in keys and (5, 4, 5) not in keys
    assert len(points) == 5 + 20 + 38  # topk 1, 2 and 4 over steps 1-5, draft 2-16


def test_the_grid_searches_hicache_only_where_the_memory_policy_leaves_it_open():
    assert grid_for(SPACE, objective_for("single")) == effective_points(SPACE)
    multi = grid_for(SPACE, objective_for("multi"))
    assert len(multi) == 2 * len(effective_points(SPACE))
    assert {p["hicache_size"] for p in multi} == {0, 48}


def test_the_family_is_seeded_within_its_ranges_and_registered(monkeypatch):
    for table in ("HARDWARE", "TARGETS", "DRAFTERS"):  # registered in copies, not the real ones
        monkeypatch.setattr(profiles, table, dict(getattr(profiles, table)))
    first = _search_family.family(12, seed=3)
    again = _search_family.family(12, seed=3)
    assert [s.name for s, _ in first] == [s.name for s, _ in again]
    assert len({s.name for s, _ in first}) == 12
    assert [s.name for s, _ in _search_family.family(5, seed=3)] == [s.name for s, _ in first[:5]]
    for setup, constants in first:
        for group, ranges in (
            ("hardware", _search_family.HARDWARE_RANGES),
            ("target", _search_family.TARGET_RANGES),
            ("drafter", _search_family.DRAFTER_RANGES),
        ):
            for key, (lo, hi) in ranges.items():
                assert lo <= constants[group][key] <= hi, (key, constants[group][key])
        assert (
            profiles.HARDWARE[setup.hardware].kernel_us_per_layer
            == (constants["hardware"]["kernel_us_per_layer"])
        )
        assert profiles.DRAFTERS[setup.drafter].first_accept == constants["drafter"]["first_accept"]
    assert _search_family.draw(random.Random(1)) != _search_family.draw(random.Random(2))


def test_the_shaped_family_is_seeded_and_its_members_are_the_plain_ones_with_shapes(monkeypatch):
    for table in ("HARDWARE", "TARGETS", "DRAFTERS"):
        monkeypatch.setattr(profiles, table, dict(getattr(profiles, table)))
    plain = _search_family.family(6, seed=3)
    shaped = _search_family.family(6, seed=3, shapes=True)
    assert [s.name for s, _ in shaped] == [s.name for s, _ in _search_family.family(6, 3, True)]
    assert [s.name for s, _ in _search_family.family(2, 3, True)] == [s.name for s, _ in shaped[:2]]
    assert not {s.name for s, _ in shaped} & {s.name for s, _ in plain}
    assert all(s.name.startswith("shaped") for s, _ in shaped)
    ranges = _search_family.SHAPE_RANGES
    for (_, base), (setup, constants) in zip(plain, shaped, strict=True):
        for group in ("hardware", "target", "drafter"):  # the plain constants, shapes on top
            assert {k: constants[group][k] for k in base[group]} == base[group]
        drafter = profiles.DRAFTERS[setup.drafter]
        shape = drafter.depth_shape
        assert len(shape) == _search_family.SHAPE_DEPTHS and shape[0] == 1.0
        ratios = [b / a for a, b in itertools.pairwise(shape)]
        assert max(ratios) - min(ratios) > 1e-3  # not geometric
        assert min(ratios) >= 0.5 * 0.85 * 0.8 - 1e-3 and max(ratios) <= 1.12 + 1e-3
        assert len(set(drafter.sibling_residuals)) > 1
        for key in ("depth_fade", "sibling_rank_power"):
            assert ranges[key][0] <= getattr(drafter, key) <= ranges[key][1]
        hw = profiles.HARDWARE[setup.hardware]
        assert hw.verify_bucket_tokens[0] in ranges["verify_bucket_first"]
        assert isinstance(hw.verify_bucket_tokens, tuple) and isinstance(shape, tuple)
        for key in ("verify_bucket_ms", "verify_token_exponent", "draft_candidate_us"):
            assert ranges[key][0] <= getattr(hw, key) <= ranges[key][1]
    # the name carries a hash of every constant, shapes included: one shape changed, a new name
    _, constants = shaped[0]
    moved = {**constants, "drafter": {**constants["drafter"], "depth_fade": 0.123}}
    assert _search_family.member_name(0, moved, "shaped") != shaped[0][0].name


def test_the_memory_tight_family_is_the_plain_one_on_cards_its_weights_fill():
    # registered in the real tables (the simulator's parser reads them), each added entry undone
    added = {t: set(getattr(profiles, t)) for t in ("HARDWARE", "TARGETS", "DRAFTERS")}
    try:
        _check_the_memory_tight_family()
    finally:
        for table, names in added.items():
            for name in set(getattr(profiles, table)) - names:
                del getattr(profiles, table)[name]


def _check_the_memory_tight_family():
    plain = _search_family.family(6, seed=3)
    tight = _search_family.family(6, seed=3, tight=True)
    assert [s.name for s, _ in _search_family.family(2, 3, tight=True)] == [
        s.name for s, _ in tight[:2]
    ]
    assert all(s.name.startswith("tight") for s, _ in tight)
    weights = _search_family.weights_mib_per_gpu()
    assert weights == 74_741 + 450  # Kimi-K2.5 INT4 over TP 8, and the drafter
    for (_, base), (setup, constants) in zip(plain, tight, strict=True):
        card = profiles.HARDWARE[setup.hardware].gpu_memory_mib
        lo, hi = _search_family.WEIGHTS_SHARE
        assert lo - 1e-3 <= weights / card <= hi + 1e-3
        assert constants["drafter"] == base["drafter"] and constants["target"] == base["target"]
        moved = {k for k in base["hardware"] if base["hardware"][k] != constants["hardware"][k]}
        assert moved <= {"gpu_memory_mib"}
        assert _search_family.starts_somewhere(constants)  # a one-step chain starts in the space


def test_the_best_other_arm_is_one_run_on_every_seed():
    full = [(3, 3.0)] * 10
    runs = {"specsweep+priors": full, "specsweep": full, "random": [(4, 4.0)] * 10}
    runs["gp"] = [(1, 1.0)] * 3  # cheaper, on 3 seeds only: shown, not chosen
    verdict = summarize_landscape("x", 100.0, runs)["verdict"]
    assert verdict["specsweep"]["best_other"] == "random"
    assert verdict["specsweep"]["gpu_hours_ratio"] == pytest.approx(0.75)


def test_a_cold_cache_warmed_by_two_processes_holds_what_one_process_computes(
    tmp_path, monkeypatch
):
    """`warm` splits a landscape's points over worker processes and gathers their answers into
    the oracle: key for key what one process computes (the simulator's model is deterministic)."""
    from benchmarks import _search_landscape as landscape
    from benchmarks import search_efficiency

    points = search_efficiency.all_points(SPACE)[:40]  # the one-step chain's fractions: seconds
    answers = []
    for name, jobs in (("one", 1), ("two", 2)):
        monkeypatch.setattr(landscape, "CACHE", tmp_path / f"{name}.json")  # cold
        land = landscape.Landscape("single", landscape.Oracle(landscape.SETUPS["h100_sxm"]))
        if jobs == 1:
            for values in points:
                land.true_value(values)
        else:
            search_efficiency.warm(land, points, jobs)
        answers.append(land.oracle.answers_since(set()))
    assert len(answers[0]) == len(points)  # every launch computed, none read from a cache
    assert answers[1] == answers[0]
