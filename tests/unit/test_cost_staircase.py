"""The model's cost part at the CUDA-graph batch a launch's steps replayed (sweep/study/model/
cost.py, predict.py): where launches of one level ran different padded batches, the form
carries the staircase between them; where they all ran one, it is the line it was."""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf

from harness.sglang.graphs import decode_batch_sizes, padded_batch
from sweep.study.model.cost import LINE_TERMS, WORK_TERMS, CostModel, CostPoint, features
from sweep.study.model.observations import Level, Observation
from sweep.study.model.predict import Config, Load, Predictor, Target
from sweep.study.search.space import SearchSpace

SPACE = SearchSpace.from_config(OmegaConf.load("conf/search/eagle3_five.yaml").space)
CAPTURED = tuple(decode_batch_sizes(512, True, request_pool=48))  # SGLang 0.5.23, speculative
C = 64
TARGET = Target((C,), (1.0,), "output")


def step_s(shape, requests: int) -> float:
    """A step cost with SGLang's staircase: a fixed part, then work per row of the graph the
    requests pad to (a real row and a padding row alike)."""
    s, k, d = shape
    rows = padded_batch(requests, CAPTURED)
    assert rows is not None
    return 0.020 + 0.002 * s + 0.0005 * s * k + rows * (0.0004 + 0.00015 * (d - 1))


def launch(number: int, shape, requests: int, graph_bs=CAPTURED) -> Observation:
    """What a launch at C in flight reports when the KV pool admitted `requests` of them."""
    tau = 1.0 + 0.5 * (shape[2] - 1) ** 0.5
    output = requests * tau / step_s(shape, requests)
    level = Level(tau, None, None, output, 0.01 * output, runs=3, running=float(requests))
    s, k, d = shape
    return Observation(number, s, k, d, (), None, {C: level}, graph_bs=graph_bs, max_running=48)


SHAPES = [(5, 1, 6), (1, 1, 2), (3, 1, 4), (2, 2, 4), (3, 4, 8), (4, 2, 7), (2, 4, 6), (4, 4, 12)]


def t_true(shape, requests: int) -> float:
    return step_s(shape, requests) / requests


def test_launches_that_ran_different_padded_batches_fit_the_staircase():
    # the pool admitted 35 (pads to 40), 42 (to 44) or 48: the launches sit on three steps
    admitted = [35, 42, 48]
    obs = [launch(i, sh, admitted[i % 3]) for i, sh in enumerate(SHAPES)]
    predictor = Predictor(obs, TARGET, SPACE, seed=0)
    assert predictor.staircase == {C}
    assert predictor.cost[C].bounded == WORK_TERMS
    for shape, requests in [((3, 2, 6), 33), ((3, 2, 6), 39), ((3, 2, 6), 46), ((5, 1, 6), 41)]:
        held = launch(99, shape, requests)
        t = predictor.cost_samples(C, [Config(shape)], [Load.of(held, C)]).mean()
        assert t == pytest.approx(t_true(shape, requests), rel=0.03)


def test_33_and_39_requests_cost_the_same_step_as_sglang_pads_both_to_40():
    obs = [launch(i, sh, [35, 42, 48][i % 3]) for i, sh in enumerate(SHAPES)]
    predictor = Predictor(obs, TARGET, SPACE, seed=0)
    shape, requests = (3, 2, 6), (33, 39, 40, 41)
    loads = [Load.of(launch(99, shape, r), C) for r in requests]
    t = predictor.cost_samples(C, [Config(shape)] * 4, loads, n=4096).mean(axis=0)
    steps = t * np.array(requests)  # one set of coefficient draws for the four
    assert steps[0] == pytest.approx(steps[1], rel=0.005)
    assert steps[1] == pytest.approx(steps[2], rel=0.005)
    assert steps[3] > steps[2] * 1.02  # 41 requests replay the graph of 44


def test_a_level_that_ran_one_padded_batch_is_fitted_with_the_line():
    obs = [launch(i, sh, 48) for i, sh in enumerate(SHAPES)]
    predictor = Predictor(obs, TARGET, SPACE, seed=0)
    assert predictor.staircase == set()
    assert predictor.cost[C].bounded == LINE_TERMS and predictor.cost[C].p == LINE_TERMS
    t = predictor.cost_samples(C, [Config((3, 2, 6))]).mean()
    assert t == pytest.approx(t_true((3, 2, 6), 48), rel=0.03)


def test_without_reported_graphs_the_requests_stand_for_the_batch():
    held = launch(0, (3, 1, 4), 35, graph_bs=())
    assert Load.of(held, C) == Load(35.0, 35.0)
    assert Load.of(launch(0, (3, 1, 4), 35), C) == Load(35.0, 40.0)
    # nothing waited: every request in flight ran, the mean's dips between requests aside
    level = Level(2.0, None, None, 900.0, 9.0, runs=3, running=7.4, queue=0.0)
    calm = Observation(1, 3, 1, 4, (), None, {8: level}, CAPTURED, max_running=48)
    assert Load.of(calm, 8) == Load(8.0, 8.0)
    # a level without decode lines: the concurrency under the request cap
    quiet = Observation(
        1, 3, 1, 4, (), None, {C: Level(2.0, None, None, 900.0, 9.0)}, CAPTURED, max_running=48
    )
    assert Load.of(quiet, C) == Load(48.0, 48.0)


def test_the_line_misses_what_the_staircase_carries():
    """The same launches fitted by the line alone (t, no load): a held-out launch that ran 33
    requests is mispredicted by more than the staircase's tolerance above."""
    obs = [launch(i, sh, [35, 42, 48][i % 3]) for i, sh in enumerate(SHAPES)]
    points = [
        CostPoint(features(o.shape, (), []), o.levels[C].tau / o.levels[C].output, 0.01)
        for o in obs
    ]
    line = CostModel(points, np.random.default_rng(0))
    t = line.samples(np.array([features((3, 2, 6), (), [])]), 512).mean()
    assert abs(t / t_true((3, 2, 6), 33) - 1) > 0.05
