"""The model under load predicts throughput through the KV pool each launch reports: two launches
apart only in the fraction are two pools, not one configuration's noise (SIMULATED: a
memory-tight member of the search family, the simulator's own engine)."""

from __future__ import annotations

import random

import numpy as np
import optuna
import pytest
from omegaconf import OmegaConf
from optuna.distributions import CategoricalDistribution

from benchmarks import _search_family
from benchmarks._search_arms import objective_for
from benchmarks._search_landscape import Landscape, Oracle, server_for
from benchmarks._search_sim import Simulation
from harness.record.results import Outcome, TrialResult
from sweep.study.loop.decisions import SearchDriver
from sweep.study.model.knowledge import Knowledge
from sweep.study.model.predict import Config
from sweep.study.model.sampler import ModelSampler
from sweep.study.model.watch import beside_oom_line
from sweep.study.search.space import SearchSpace
from sweep.study.trial.candidates import candidate_for

SPACE = "conf/search/eagle3_five.yaml"


def values(steps, topk, draft, fraction):
    return {
        "speculative_num_steps": steps,
        "speculative_eagle_topk": topk,
        "speculative_num_draft_tokens": draft,
        "mem_fraction_static": fraction,
        "hicache_size": 0,
    }


@pytest.fixture(scope="module")
def tight():
    """The first memory-tight member (weights 0.88 of an 85 GB card: 0.89 and 0.90 start a
    chain, their pools 7.4k and 19.9k tokens) and a study that measured 3/1/4 at both, and
    three more configurations at 0.90, under the load profile."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    tables = [_search_family.profiles.HARDWARE, _search_family.profiles.TARGETS]
    tables.append(_search_family.profiles.DRAFTERS)
    before = [set(t) for t in tables]
    ((setup, _constants),) = _search_family.family(1, 0, tight=True)
    land = Landscape("multi", Oracle(setup))
    objective = objective_for("multi")
    space = SearchSpace.from_config(OmegaConf.load(SPACE).space)
    model = ModelSampler(space, objective, seed=0)
    study = optuna.create_study(sampler=model, directions=objective.directions)
    driver = SearchDriver(study, objective, gpus_per_trial=8)
    sim = Simulation(land, optimum=1e9, rng=random.Random(0))
    for vals in (
        values(3, 1, 4, 0.89),
        values(3, 1, 4, 0.90),
        values(1, 1, 2, 0.90),
        values(5, 1, 6, 0.90),
        values(2, 2, 3, 0.90),
    ):
        trial = study.ask(fixed_distributions={})
        driver.tell(trial, candidate_for(land.server(vals), "ctx"), sim.launch(vals), None)
    yield land, Knowledge(study.get_trials(), ("hicache_size",), -1, model), (study, driver)
    for table, names in zip(tables, before, strict=True):  # the member's profiles, unregistered
        for name in set(table) - names:
            del table[name]


def test_the_pool_line_is_what_sglangs_accounting_implies(tight):
    land, knowledge, _ = tight
    admission = knowledge.predictor.admission
    hardware = land.oracle.setup.hardware
    card = _search_family.profiles.HARDWARE[hardware].gpu_memory_mib
    cell = 70_272 + 1_152  # Kimi-K2.5's and the drafter's KV bytes per token per GPU
    assert admission.slope == pytest.approx(card * 2**20 / cell, rel=1e-3)
    assert admission.pool(0.89) == pytest.approx(7_413, abs=2)
    # at 64 in flight the 0.89 pool runs 14 requests, the 0.90 pool 38 (the cap is 48)
    assert admission.admitted(64, 0.89) == pytest.approx(14, abs=0.5)
    assert admission.admitted(64, 0.90) == pytest.approx(38, abs=0.5)


def test_two_launches_apart_only_in_the_fraction_are_predicted_apart_by_their_pools(tight):
    land, knowledge, _ = tight
    config = Config((3, 1, 4), (("hicache_size", 0),))
    predicted = {
        f: float(np.median(knowledge.predictor.samples([config], fractions=[f])))
        for f in (0.89, 0.90)
    }
    true = {f: land.true_value(values(3, 1, 4, f)) for f in (0.89, 0.90)}
    # the truth: 1.77x from one step of the fraction; a model that cannot see the fraction
    # predicts one value for both (1.0x) and reads the difference as noise
    assert true[0.90] / true[0.89] > 1.7
    ratio = predicted[0.90] / predicted[0.89]
    assert ratio == pytest.approx(true[0.90] / true[0.89], rel=0.15)
    # an unmeasured configuration is predicted at the fraction it would run at, the largest
    # below every GPU OOM (none here): the top of the space, its pool on the line
    assert knowledge.fraction(Config((4, 1, 5), (("hicache_size", 0),))) == 0.94


def test_a_proposal_as_large_as_an_oom_runs_below_it_and_the_console_says_why(tight):
    land, _, (study, driver) = tight
    model = study.sampler
    oom = TrialResult("t", "trial", Outcome.OOM, "sim", True, 1.0, {}, oom_kind="gpu")
    oom.wall_s = oom.startup_s = oom.startup_wall_s = 100.0
    tree = values(3, 4, 12, 0.92)
    driver.tell(
        study.ask(fixed_distributions={}), candidate_for(land.server(tree), "ctx"), oom, None
    )
    number = study.trials[-1].number
    knowledge = Knowledge(study.get_trials(), ("hicache_size",), -1, model)
    bigger, smaller = (
        Config((5, 4, 16), (("hicache_size", 0),)),
        Config((2, 2, 3), (("hicache_size", 0),)),
    )
    assert knowledge.oom_beside(bigger) == (number, (3, 4, 12), 0.92)
    assert knowledge.oom_beside(smaller) is None
    assert knowledge.fraction(bigger) == 0.91  # predicted where it may start, below the OOM
    assert knowledge.fraction(smaller) == 0.94
    line = beside_oom_line(bigger, knowledge.oom_beside(bigger), 0.91)
    assert line == (
        f"model: 5/4/16 is at least as large as trial_{number:04d} (3/4/12), which ran out of "
        "GPU memory at 0.92; launched at 0.91, below it"
    )
    # with the KV pool too small at 0.91, nothing is left between the floor and the OOM: the
    # configurations that need at least 3/4/12's memory are not proposed at all
    floor = TrialResult("t", "trial", Outcome.OOM, "sim", True, 1.0, {}, oom_kind="kv_pool")
    floor.wall_s = floor.startup_s = floor.startup_wall_s = 70.0
    chain = values(1, 1, 2, 0.91)
    driver.tell(
        study.ask(fixed_distributions={}), candidate_for(land.server(chain), "ctx"), floor, None
    )
    knowledge = Knowledge(study.get_trials(), ("hicache_size",), -1, model)
    assert knowledge.fraction(bigger) is None and bigger not in knowledge.candidates
    assert smaller in knowledge.candidates
    assert all(c.shape[2] < 12 for c in knowledge.candidates)


def _opening_after(launches):
    """The model's opening proposal after `launches` ((steps, fraction, outcome, kind), chains),
    each told as the sweep tells it."""
    objective = objective_for("multi")
    space = SearchSpace.from_config(OmegaConf.load(SPACE).space)
    model = ModelSampler(space, objective, seed=0)
    study = optuna.create_study(sampler=model, directions=objective.directions)
    driver = SearchDriver(study, objective, gpus_per_trial=8)
    for steps, fraction, outcome, kind in launches:
        vals = values(steps, 1, steps + 1, fraction)
        r = TrialResult("t", "trial", outcome, "sim", True, 1.0, vals, oom_kind=kind)
        r.wall_s = r.startup_s = r.startup_wall_s = 100.0
        if outcome is Outcome.PRUNED:  # a screened chain: one run per level
            r.metrics = {f"output_tok_s_c{c}": 100.0 * c for c in (1, 8, 32, 64)}
            r.metrics |= {f"accept_len_c{c}": 2.0 for c in (1, 8, 32, 64)}
        study.enqueue_trial({"hicache_size": 0})  # the trial's params, as the space suggests them
        trial = study.ask(fixed_distributions={"hicache_size": CategoricalDistribution([0, 48])})
        driver.tell(trial, candidate_for(server_for(vals), "ctx"), r, None)
    opening = Knowledge(study.get_trials(), ("hicache_size",), -1, model).opening()
    return opening.shape if opening is not None else None


def test_an_opening_chain_that_never_started_is_tried_again_then_replaced_from_its_side():
    kv, gpu = (Outcome.OOM, "kv_pool"), (Outcome.OOM, "gpu")
    ok = (Outcome.PRUNED, None)
    # the longest chain ran out where the fraction was still being found: tried again
    assert _opening_after([(5, 0.85, *kv)]) == (5, 1, 6)
    # measured, then the one-step chain twice out of memory: the next-shortest stands in
    assert _opening_after([(5, 0.85, *kv), (5, 0.90, *ok), (1, 0.93, *gpu), (1, 0.92, *gpu)]) == (
        2,
        1,
        3,
    )
    # the one-step chain measured, the longest twice out of memory: the next-longest
    assert _opening_after([(5, 0.93, *gpu), (5, 0.92, *gpu), (1, 0.90, *ok)]) == (4, 1, 5)
    # neither end started: from the short end, which needs the least memory
    both = [(5, 0.85, *kv), (5, 0.90, *kv), (1, 0.93, *gpu), (1, 0.92, *gpu)]
    assert _opening_after(both) == (2, 1, 3)
    assert _opening_after([(5, 0.90, *ok), (1, 0.90, *ok)]) is None  # two measured: done


def test_once_a_launch_ran_out_of_memory_a_screen_goes_only_where_one_as_large_started():
    """On a card the weights fill, the knowledge gradient would spend screens on wide trees that
    tell most if they start: once a tree has run out of GPU memory, an informative screen is
    spent only where a launch at least as large has started at the fraction it would run at."""
    objective = objective_for("multi")
    space = SearchSpace.from_config(OmegaConf.load(SPACE).space)
    model = ModelSampler(space, objective, seed=0)
    study = optuna.create_study(sampler=model, directions=objective.directions)
    driver = SearchDriver(study, objective, gpus_per_trial=8)
    others = ("hicache_size",)

    def launch(steps, topk, draft, outcome, kind=None, speed=100.0):
        vals = values(steps, topk, draft, 0.94)
        r = TrialResult("t", "trial", outcome, "sim", True, 1.0, vals, oom_kind=kind)
        r.wall_s = r.startup_s = r.startup_wall_s = 100.0
        if outcome is Outcome.PRUNED:  # screened: one run per level
            r.metrics = {f"output_tok_s_c{c}": speed * c for c in (1, 8, 32, 64)}
            r.metrics |= {f"accept_len_c{c}": 1.0 + draft / 4 for c in (1, 8, 32, 64)}
        study.enqueue_trial({"hicache_size": 0})
        trial = study.ask(fixed_distributions={"hicache_size": CategoricalDistribution([0, 48])})
        driver.tell(trial, candidate_for(server_for(vals), "ctx"), r, None)

    def config(steps, topk, draft):
        return Config((steps, topk, draft), (("hicache_size", 0),))

    for shape, speed in (((5, 1, 6), 120.0), ((1, 1, 2), 90.0), ((4, 2, 8), 130.0)):
        launch(*shape, Outcome.PRUNED, speed=speed)
    before = Knowledge(study.get_trials(), others, -1, model)
    assert before.known_to_start(config(5, 4, 16))  # no OOM yet: nothing is ruled out
    launch(4, 4, 16, Outcome.OOM, "gpu")
    after = Knowledge(study.get_trials(), others, -1, model)
    # no larger than 4/2/8 (8 branches, 8 draft tokens), which started at 0.94, where these run
    assert after.fraction(config(3, 2, 6)) == 0.94
    assert after.known_to_start(config(3, 2, 6)) and after.known_to_start(config(2, 4, 8))
    # more branches or more draft tokens than anything that started
    assert not after.known_to_start(config(3, 4, 12))
    assert not after.known_to_start(config(4, 2, 9))
    assert not after.known_to_start(config(5, 4, 15))
    informative = [
        p
        for n in range(study.trials[-1].number + 1, study.trials[-1].number + 21)
        if (p := model.propose(study, n, others)) is not None and p.reason == "informative"
    ]
    assert informative, "the knowledge gradient moved no screen in 20 proposals"
    assert all(after.known_to_start(p.config) for p in informative)
    assert all("a launch as large has started" in p.why_screened for p in informative)
