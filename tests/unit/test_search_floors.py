"""The search benchmark's reference arms: floors that know the landscape. `clairvoyant` launches
the cheapest configuration within 2% once, in full; `opening+clairvoyant` does so after the model
sampler's own first two launches. They bound what any search (or any proposer that opens as the
model sampler does) can spend, and are never the "best other arm" a search is judged against."""

from __future__ import annotations

import random
import statistics

import pytest
from omegaconf import OmegaConf

from benchmarks._search_arms import (
    BY_NAME,
    cheapest_within,
    effective_points,
    run_arm,
    screen_price,
)
from benchmarks._search_landscape import SETUPS, Landscape, Oracle
from benchmarks._search_report import summarize_landscape
from benchmarks._search_sim import Simulation
from sweep.study.answer import pooling
from sweep.study.search.space import TOPK, SearchSpace

BASE = OmegaConf.to_container(OmegaConf.load("conf/search/eagle3_five.yaml"), resolve=True)
SPACE = SearchSpace.from_config(OmegaConf.create(BASE["space"]))
PINNED = {"mem_fraction_static": 0.85, "hicache_size": 0}


class Recorder(Simulation):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.launched: list[tuple[dict, int]] = []
        self.numbered: list[tuple[bool, int]] = []  # (screened, its first run's number)

    def launch(self, values, early_stop=None, runs=5, screen=False, first_run=1):
        self.launched.append((dict(values), runs))
        self.numbered.append((screen, first_run))
        return super().launch(values, early_stop, runs, screen, first_run)


@pytest.fixture(scope="module")
def landscape():
    """H100 single-stream at the pinned fraction: few configurations within 2% (2.8%), so the
    cheapest one is a real choice among several."""
    land = Landscape("single", Oracle(SETUPS["h100_sxm"]))
    points = [p | PINNED for p in effective_points(SPACE)]
    truths = {i: land.true_value(p) for i, p in enumerate(points)}
    optimum = max(t for t in truths.values() if t is not None)
    return land, optimum, points


def _cost(land, optimum, values, seed: int = 7) -> float:
    sim = Simulation(land, optimum, random.Random(seed))
    sim.launch(values)
    return sim.gpu_hours


def _run(arm: str, land, optimum, answer, seed: int = 0) -> Recorder:
    sim = Recorder(land, optimum, random.Random(seed))
    run_arm(BY_NAME[arm], sim, {**BASE, "memory": "auto"}, seed, 60, [], answer)
    return sim


def test_the_clairvoyant_launches_the_cheapest_answer_once_in_full(landscape):
    land, optimum, points = landscape
    answer = cheapest_within(land, optimum, points)
    within = [p for p in points if (land.true_value(p) or 0) >= 0.98 * optimum]
    assert answer in within and len(within) > 1
    assert _cost(land, optimum, answer) == min(_cost(land, optimum, p) for p in within)
    # the price does not depend on the noise: any seed pays the same for the same launch
    assert _cost(land, optimum, answer, seed=1) == _cost(land, optimum, answer, seed=2)
    sim = _run("clairvoyant", land, optimum, answer)
    assert sim.launched == [(answer, 5)]
    assert sim.reached == (1, pytest.approx(_cost(land, optimum, answer)))


def test_a_screen_of_the_answer_is_priced_as_the_model_screens_it(landscape):
    """One run per level, recorded as the model's screen is: its start-up and one run, set by
    the true rates (any seed pays the same), less than the answer in full."""
    land, optimum, points = landscape
    answer = cheapest_within(land, optimum, points)
    screened = Recorder(land, optimum, random.Random(5))
    screened.launch(answer, runs=1, screen=True)
    assert screen_price(land, optimum, answer) == pytest.approx(screened.gpu_hours)
    assert screened.reached is None  # a screen is never an answer
    assert 0 < screen_price(land, optimum, answer) < _cost(land, optimum, answer)


def test_the_opening_floor_is_the_model_samplers_own_opening_then_the_answer(landscape):
    land, optimum, points = landscape
    answer = cheapest_within(land, optimum, points)
    for seed in (0, 3):
        floor = _run("opening+clairvoyant", land, optimum, answer, seed)
        model = _run("model", land, optimum, answer, seed)
        assert floor.launched[:2] == model.launched[:2]  # the model's launches, as it made them
        assert [runs for _, runs in floor.launched] == [1, 1, 5]  # two screened, then in full
        assert floor.launched[2] == (answer, 5)
        # no search of the model's reaches 2% for less than its opening and the answer
        assert floor.reached is not None and model.reached is not None
        assert floor.reached[1] <= model.reached[1] + 1e-9
        assert floor.reached[1] > _run("clairvoyant", land, optimum, answer).reached[1]


def test_the_opening_floor_finishes_a_screened_chain_where_that_costs_less(landscape):
    """Judged against the longest chain's own value, the opening's 5/1/6 is within 2%: its
    screen finished in full (the four runs left, no second warm-up of a fresh answer) is the
    cheapest way on, and the floor takes it over a costlier answer."""
    land, _, points = landscape
    chain = next(p for p in points if p["speculative_num_steps"] == 5 and p.get(TOPK) == 1)
    optimum = land.true_value(chain)
    costlier = max(
        (p for p in points if (land.true_value(p) or 0) >= 0.98 * optimum),
        key=lambda p: _cost(land, optimum, p),
    )
    floor = _run("opening+clairvoyant", land, optimum, costlier)
    opening = floor.launched[0][0]
    assert (opening["speculative_num_steps"], opening[TOPK]) == (5, 1)
    assert floor.launched[0][1] == 1 and floor.numbered[0] == (True, 1)
    assert floor.launched[2] == (opening, 4) and floor.numbered[2] == (False, 2)
    assert floor.reached is not None and floor.reached[0] == 3
    model = _run("model", land, optimum, None)
    assert model.reached is not None and floor.reached[1] <= model.reached[1] + 1e-9


def test_the_priors_floor_is_the_priors_in_full_then_the_answer(landscape):
    land, optimum, points = landscape
    answer = cheapest_within(land, optimum, points)
    for seed in (0, 3):
        floor = _run("priors+clairvoyant", land, optimum, answer, seed)
        with_priors = _run("model+priors", land, optimum, answer, seed)
        prior, runs = floor.launched[0]
        assert (prior["speculative_num_steps"], prior["speculative_eagle_topk"], runs) == (3, 1, 5)
        assert floor.launched[0] == with_priors.launched[0]  # as model+priors launches it
        assert floor.launched[1:] == [(answer, 5)]
        assert floor.reached is not None and with_priors.reached is not None
        assert floor.reached[1] <= with_priors.reached[1] + 1e-9


def test_a_screened_configuration_in_full_measures_the_runs_its_screen_did_not(
    landscape, monkeypatch
):
    """As the sweeper does (sweep.study.loop.screens): the full launch runs benchmark.runs - 1
    runs numbered after the screen's, and its record pools the screen's run."""
    land, optimum, _ = landscape
    pooled = []
    pool = pooling.pool_screen

    def recording(full, screen, level):
        out = pool(full, screen, level)
        pooled.append(([r.run for r in screen.runs], [r.run for r in out.runs]))
        return out

    monkeypatch.setattr(pooling, "pool_screen", recording)
    relaunched = 0
    for seed in range(6):
        sim = _run("model", land, optimum, None, seed)
        for i, ((values, runs), (screened, first)) in enumerate(
            zip(sim.launched, sim.numbered, strict=True)
        ):
            if not screened or values not in [v for v, _ in sim.launched[i + 1 :]]:
                continue
            j = i + 1 + [v for v, _ in sim.launched[i + 1 :]].index(values)
            assert (runs, first) == (1, 1)
            assert sim.launched[j][1] == 4 and sim.numbered[j] == (False, 2)
            relaunched += 1
    assert relaunched and len(pooled) == relaunched
    assert all(screen == [1] and full == [1, 2, 3, 4, 5] for screen, full in pooled)


def test_a_floor_is_never_the_arm_a_search_is_judged_against():
    runs = {
        "model": [(3, 3.0)] * 10,
        "random": [(4, 4.0)] * 10,
        "clairvoyant": [(1, 1.0)] * 10,
        "opening+clairvoyant": [(3, 2.0)] * 10,
    }
    verdict = summarize_landscape("x", 100.0, runs)["verdict"]
    assert verdict["model"]["best_other"] == "random"
    assert verdict["clairvoyant"] == {
        "best_other": "random",
        "gpu_hours_ratio": pytest.approx(0.25),
        "ci95": (pytest.approx(0.25), pytest.approx(0.25)),
    }
    assert verdict["opening+clairvoyant"]["gpu_hours_ratio"] == pytest.approx(0.5)


def test_run_r_sends_the_same_prompts_in_every_trial_of_a_search(landscape):
    """The harness sends run r's prompts in every trial (harness.measure.prompt_plan), and most
    of a run's acceptance spread is its prompts': two configurations' run r read their true
    accept lengths off by one factor, give or take the token sampling (1% each), where one
    launch's runs differ by the prompts' 2.8%. Another search has other prompts."""
    land, optimum, points = landscape
    chain, tree = [p for p in points if p["speculative_num_steps"] == 5][:2]

    def factors(sim: Simulation, values: dict) -> list[float]:
        tau = 1 + sum(land.oracle.at_least(values, 2048))
        return [r.accept_len / tau for r in sim.launch(values, runs=20).runs]

    sim = Simulation(land, optimum, random.Random(3), drift_sigma=0.0)
    a, b = factors(sim, chain), factors(sim, tree)
    paired = statistics.stdev(x / y for x, y in zip(a, b, strict=True))
    assert paired < 0.02 < statistics.stdev(a)  # about 1.4% against about 2.8%
    other = factors(Simulation(land, optimum, random.Random(4), drift_sigma=0.0), chain)
    assert statistics.stdev(x / y for x, y in zip(a, other, strict=True)) > 0.02
