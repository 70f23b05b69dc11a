"""search.sampler=model through the sweeper's own loop (benchmarks/_search_arms' copy of it, on
the simulator's model of the H100 box): the opening, what it never proposes, the stopping rule,
the console's line, and the refusals."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import optuna
import pytest
from omegaconf import OmegaConf

from benchmarks._search_arms import BY_NAME, run_arm
from benchmarks._search_landscape import SETUPS, Landscape, Oracle
from benchmarks._search_sim import Simulation
from harness.errors import ConfigError
from harness.record.results import Outcome, RunSummary, TrialResult
from sweep.study.model import stopping
from sweep.study.model.knowledge import Knowledge, anchored
from sweep.study.model.observations import UNKNOWN_NOISE
from sweep.study.model.predict import Config, configurations
from sweep.study.model.sampler import ModelSampler, model_sampler
from sweep.study.model.screening import knowledge_gradient, most_informative, worth_screening
from sweep.study.model.watch import Forecast, ModelWatch
from sweep.study.search.space import DRAFT, STEPS, TOPK, SearchSpace
from sweep.study.trial.candidates import Candidate
from sweep.study.trial.objective import Objective
from sweep.sweeper import check_search

BASE = OmegaConf.to_container(OmegaConf.load("conf/search/eagle3_five.yaml"), resolve=True)
SPACE = SearchSpace.from_config(OmegaConf.create(BASE["space"]))


class Recorder(Simulation):
    """The simulation, remembering what it launched."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.launched: list[dict] = []

    def launch(self, values, early_stop=None, runs=5, screen=False, first_run=1):
        self.launched.append(dict(values) | {"runs": runs})
        return super().launch(values, early_stop, runs, screen, first_run)


def _search(optimum: float, seed: int = 0, budget: int = 60, arm: str = "model"):
    land = Landscape("single", Oracle(SETUPS["h100_sxm"]))
    sim = Recorder(land, optimum, random.Random(seed))
    cfg = {**BASE, "memory": "auto"}
    captured = {}
    original = optuna.create_study

    def create_study(**kwargs):
        captured["study"] = original(**kwargs)
        return captured["study"]

    optuna.create_study = create_study
    try:
        run_arm(BY_NAME[arm], sim, cfg, seed, budget, [])
    finally:
        optuna.create_study = original
    return sim, captured["study"]


@pytest.fixture(scope="module")
def unreachable():
    """A search whose target nobody reaches: it runs until the model's stopping rule ends it."""
    return _search(optimum=1e9)


def test_the_opening_is_the_longest_chain_then_the_one_step_chain(unreachable):
    sim, _ = unreachable
    first = [(v["speculative_num_steps"], v["speculative_eagle_topk"]) for v in sim.launched[:2]]
    assert first == [(5, 1), (1, 1)]


def test_the_opening_is_screened_and_nothing_is_launched_in_full_twice(unreachable):
    sim, study = unreachable
    assert [v["runs"] for v in sim.launched[:2]] == [1, 1]
    screened = [t for t in study.trials if t.user_attrs.get("screened")]
    assert [t.number for t in screened[:2]] == [0, 1]
    assert all(t.state.name == "PRUNED" for t in screened)
    keys = [t.user_attrs["candidate_key"] for t in screened]
    assert len(keys) == len(set(keys))  # screened once at most: the next time in full
    full = []
    for v in sim.launched:
        s, k = v["speculative_num_steps"], v["speculative_eagle_topk"]
        shape = (s, k, s + 1 if k == 1 else v["speculative_num_draft_tokens"])
        if v["runs"] > 1:
            full.append(shape)
    assert len(full) == len(set(full)) and full


def test_a_proposal_of_a_topk_never_launched_is_screened(unreachable):
    _, study = unreachable
    proposals = model_sampler(study.sampler).proposals
    seen, checked = set(), 0
    for t in sorted(study.trials, key=lambda t: t.number):
        topk = t.params["speculative_eagle_topk"]
        proposal = proposals.get(t.number)
        searched = proposal is not None and proposal.reason in ("model", "informative")
        if searched and topk not in seen:
            assert proposal.screen, f"trial {t.number}: topk {topk}'s first launch in full"
            if proposal.reason == "model":  # the model's own pick, screened for itself
                assert proposal.why_screened == "extrapolated past what is measured"
            checked += 1
        if t.user_attrs.get("candidate"):
            seen.add(topk)
    assert checked  # the search did propose a tree before any tree was measured


def test_a_prior_chain_is_measured_in_full_and_stands_in_for_an_opening_end():
    sim, study = _search(optimum=1e9, budget=6, arm="model+priors")
    first = [
        (v["speculative_num_steps"], v["speculative_eagle_topk"], v["runs"]) for v in sim.launched
    ]
    assert first[:2] == [(3, 1, 5), (5, 1, 1)]  # the prior in full, then the longest, screened
    reasons = [model_sampler(study.sampler).proposals[n].reason for n in range(len(first))]
    assert reasons[:2] == ["prior", "opening"] and "opening" not in reasons[2:]


def test_a_screened_configuration_is_predicted_from_its_own_run_too():
    rng = np.random.default_rng(0)
    configs = [Config((2, 2, 4), ()), Config((3, 1, 4), ())]
    unsure = rng.normal(100.0, 10.0, size=(4096, 2))
    out = anchored(unsure, configs, {configs[0]: 130.0}, 0.05)
    # model N(100, 10^2) and one run N(130, 6.5^2): the combined mean ~121, its spread ~5.4
    assert out[:, 0].mean() == pytest.approx(121.1, abs=0.5)
    assert out[:, 0].std() == pytest.approx(5.45, abs=0.3)
    assert np.array_equal(out[:, 1], unsure[:, 1])  # not screened: the model's draws
    sure = rng.normal(100.0, 0.5, size=(4096, 2))
    moved = anchored(sure, configs, {configs[0]: 130.0}, 0.05)[:, 0].mean() - sure[:, 0].mean()
    assert 0 < moved < 0.5  # a model sure of itself barely moves for one noisy run
    quiet = anchored(unsure, configs, {configs[0]: 130.0}, 0.02)[:, 0].mean()
    assert quiet == pytest.approx(128.1, abs=0.5)  # on a quiet box (2%: 2.6) the run decides


def test_a_screen_is_spent_only_where_one_run_tells_more_than_the_model():
    rng = np.random.default_rng(0)
    assert worth_screening(rng.normal(100.0, 10.0, 4096), 0.05)  # spread 10% > a run's 5%
    assert not worth_screening(rng.normal(100.0, 2.0, 4096), 0.05)  # the model is surer
    assert worth_screening(rng.normal(100.0, 3.0, 4096), 0.02)  # not than a run on a quiet box


def test_a_screen_goes_where_its_run_tells_most_about_the_best():
    # One shared unknown (theta: a tree's sibling factor, say) sets the tree that may be best
    # (column 1) and a slow tree (column 0) alike; column 2 is a sure chain; column 3 is as
    # unsure as the slow tree but shares nothing. The slow tree can never be the answer, yet its
    # run tells where the fast one lies; the unrelated one tells only about itself.
    rng = np.random.default_rng(1)
    theta, own = rng.normal(size=256), rng.normal(size=256)
    draws = np.column_stack(
        [80.0 + 10 * theta, 100.0 + 8 * theta, 101.0 + 0.2 * own, 80.0 + 10 * own]
    )
    gains = knowledge_gradient(draws, 0.03, [0, 1, 2, 3], random.Random(0))
    assert gains[0] > 1.0 and gains[1] > 1.0  # either run settles theta: worth ~3 tok/s
    assert abs(gains[2]) < 0.3  # the sure chain: its run moves nothing
    assert abs(gains[3]) < 0.3  # unrelated, and never the best: nothing to learn
    assert most_informative(draws, 0.03, [0, 2, 3], random.Random(0)) == 0


def test_a_run_is_worth_what_the_box_measures_not_a_constant(unreachable):
    """The study's full launches carry their runs' spread: the simulated box's runs stray about
    3.3% (3% sampling, the drift's run mean), and a search that has measured several launches in
    full weighs a screened run by that, not by the 5% it assumes before any."""
    _, study = unreachable
    sampler = model_sampler(study.sampler)
    space = sampler.infer_relative_search_space(study, study.trials[0])
    others = tuple(sorted(n for n in space if n not in (STEPS, TOPK, DRAFT)))
    knows = Knowledge(study.get_trials(deepcopy=False), others, -1, sampler)
    full = [t for t in study.trials if t.state.name == "COMPLETE" and "metric" in t.user_attrs]
    assert len(full) >= 4
    assert 0.025 < knows.noise < 0.045  # pooled with the 5% assumed, worth one launch
    first = Knowledge(study.get_trials(deepcopy=False)[:2], others, 2, sampler)
    assert first.noise == UNKNOWN_NOISE  # the opening's screened runs have no interval


def test_the_gain_a_proposal_promises_is_over_the_best_screen_too(unreachable):
    """A screen above every full launch is the value a proposal has to beat: scored against the
    full launches alone, the screen would promise its own lead again as gain."""
    _, study = unreachable
    sampler = model_sampler(study.sampler)
    space = sampler.infer_relative_search_space(study, study.trials[0])
    others = tuple(sorted(n for n in space if n not in (STEPS, TOPK, DRAFT)))
    trials = study.get_trials(deepcopy=False)
    screened = [t for t in trials if t.user_attrs.get("screened") and "metric" in t.user_attrs]
    top = max(screened, key=lambda t: float(t.user_attrs["metric"]))
    full = [t for t in trials if t.state.name == "COMPLETE" and "metric" in t.user_attrs]
    below = [t for t in full if float(t.user_attrs["metric"]) < float(top.user_attrs["metric"])]
    assert below  # full launches slower than the best screen
    knows = Knowledge([*below, top], others, -1, sampler)
    assert knows.best_value() == float(top.user_attrs["metric"])
    assert Knowledge(below, others, -1, sampler).best_value() == max(
        float(t.user_attrs["metric"]) for t in below
    )


def test_a_doubtful_proposal_the_model_is_sure_of_is_launched_in_full(unreachable):
    _, study = unreachable
    proposals = model_sampler(study.sampler).proposals
    trials = sorted(study.trials, key=lambda t: t.number)
    in_full = []
    for t in trials:
        p = proposals.get(t.number)
        if p is None or p.reason != "model" or p.screen or p.mean is None:
            continue
        before = [u for u in trials[: t.number] if "metric" in u.user_attrs]
        screened = {u.user_attrs["candidate_key"] for u in before if u.user_attrs.get("screened")}
        best = max(float(u.user_attrs["metric"]) for u in before)  # in full or screened
        if p.mean < best and t.user_attrs.get("candidate_key") not in screened:
            in_full.append(t.number)  # probably not the answer, yet no screen first
    assert in_full  # the old rule screened every one of them


def test_the_stopping_rule_ends_the_search_before_the_space_is_spent(unreachable):
    sim, study = unreachable
    decision = stopping.decide(model_sampler(study.sampler), study)
    assert decision is not None and decision.ruled_out > 0
    assert sim.starts < 60
    best = max(
        t.user_attrs["metric"] - t.user_attrs["metric_ci95"]
        for t in study.trials
        if t.user_attrs.get("outcome") == "ok"
    )
    assert decision.lower_bound == pytest.approx(best)
    assert decision.highest_upper < decision.lower_bound


def test_the_model_finds_the_h100_optimum_within_a_handful_of_launches():
    land = Landscape("single", Oracle(SETUPS["h100_sxm"]))
    optimum = max(
        v
        for v in (
            land.true_value(c.values() | {"mem_fraction_static": 0.85, "hicache_size": 0})
            for c in configurations(SPACE, ())
        )
        if v is not None
    )
    reached = [_search(optimum, seed)[0].reached for seed in range(3)]
    assert all(r is not None and r[0] <= 10 for r in reached)


def test_pareto_objectives_and_spaces_without_the_chain_knobs_are_refused():
    with pytest.raises(ValueError, match="Pareto front"):
        ModelSampler(SPACE, Objective("tok_s+throughput", 64))
    memory_only = SearchSpace.from_config(
        OmegaConf.create({"mem_fraction_static": {"type": "float", "low": 0.8, "high": 0.9}})
    )
    with pytest.raises(ValueError, match="speculative_num_steps"):
        ModelSampler(memory_only, Objective("tok_s", 64))
    from hydra import compose, initialize_config_dir

    from sweep.launch.app import CONF_DIR
    from sweep.study.loop.opening import make_sampler

    overrides = [
        "search.sampler.name=model",
        "search.objective=tok_s+throughput",
        "benchmark.concurrency=[1,64]",
    ]
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    objective, _ = check_search(cfg)  # not refused: the study samples with TPE instead
    sampler = make_sampler(cfg, objective)
    assert model_sampler(sampler) is None
    assert isinstance(sampler.base, optuna.samplers.TPESampler)
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        bad = compose(config_name="config", overrides=["search.sampler.explore=1.5"])
    with pytest.raises(ConfigError, match=r"search\.sampler\.explore=1\.5"):
        check_search(bad)


def test_the_console_puts_the_prediction_beside_the_measurement():
    watch = ModelWatch(SPACE, Objective("tok_s", 64))
    result = TrialResult("t", "trial", Outcome.OK, "sim", True, 1.0, {}, metrics={"tok_s": 83.0})
    line = watch.line(Forecast(84.1, 80.2, 88.0, 3, "model"), result)
    assert line == (
        "model predicted 84.1 [80.2, 88.0] tok/s from 3 trials (proposed: the most expected "
        "gain per GPU-hour); measured 83.0, inside"
    )
    result.metrics["tok_s"] = 90.0
    assert line is not None and watch.line(Forecast(84.1, 80.2, 88.0, 1), result).endswith(
        "from 1 trial; measured 90.0, outside the band"
    )
    why = "extrapolated past what is measured"
    screened = watch.line(Forecast(84.1, 80.2, 88.0, 3, "model", why_screened=why), result)
    assert screened is not None and (
        "(proposed: the most expected gain per GPU-hour; screened: extrapolated past what is "
        "measured)" in screened
    )
    why = "3/4/12, the most expected gain per GPU-hour, probably not the answer"
    elsewhere = watch.line(Forecast(84.1, 80.2, 88.0, 3, "informative", why_screened=why), result)
    assert elsewhere is not None and (
        "(proposed: the screen that tells most about the best; screened: 3/4/12, the most "
        "expected gain per GPU-hour, probably not the answer)" in elsewhere
    )


def _before(study, number: int, sampler) -> optuna.Study:
    """A study holding `study`'s trials before `number`, sampled by `sampler`."""
    copy = optuna.create_study(sampler=sampler, directions=study.directions)
    copy.add_trials([t for t in study.get_trials(deepcopy=True) if t.number < number])
    return copy


def test_the_console_forecasts_what_the_model_knows_whatever_the_sampler():
    """The line beside each measurement reads the study as the model sampler would (its
    observations, run noise and screened runs: `Knowledge`), so a TPE sweep's console shows the
    same prediction a model-sampled sweep's would for the same trials, fitted to each measured
    trial before the launch."""
    _, study = _search(optimum=1e9, arm="specsweep", budget=8)
    last = study.get_trials(deepcopy=False)[-1]
    candidate = Candidate.from_dict(last.user_attrs["candidate"])
    objective = Objective("tok_s", 64)
    watch = ModelWatch(SPACE, objective)
    tpe = watch.forecast(_before(study, last.number, optuna.samplers.TPESampler()), last, candidate)
    model = ModelSampler(SPACE, objective, seed=0)
    own = watch.forecast(_before(study, last.number, model), last, candidate)
    assert tpe is not None and own is not None
    assert (tpe.mean, tpe.low, tpe.high) == (own.mean, own.low, own.high)
    assert tpe.low < tpe.mean < tpe.high
    measured = [t for t in study.trials[:-1] if t.user_attrs.get("model_obs")]
    assert tpe.trials == len(measured) >= 5 and tpe.reason is None


def test_transfer_starts_a_new_study_from_an_earlier_one_with_the_same_setup(unreachable):
    from sweep.study.loop import optuna_storage
    from sweep.study.model import transfer
    from sweep.study.search import memory

    _, earlier = unreachable
    objective = Objective("tok_s", 64)
    sampler = ModelSampler(SPACE, objective)
    study = optuna.create_study(
        storage=earlier._storage, sampler=memory.wrap(sampler, "pin", objective)
    )
    others = optuna_storage.other_studies(study)
    assert transfer.start_from_earlier(sampler, study, others, "another setup", None) is None
    line = transfer.start_from_earlier(sampler, study, others, "bench", "/models/drafter")
    measured = [t for t in earlier.trials if t.user_attrs.get("model_obs")]
    assert line is not None and line.startswith(f"model: starts from {len(measured)} measured")
    proposal = sampler.propose(study, 0)
    assert proposal is not None and proposal.reason == "model"  # no opening: chains known
    assert not proposal.screen and proposal.gain is None  # nothing of this study's to beat
    state = sampler.state(study.get_trials(), (), 0)
    assert len(state.candidates) == len(configurations(SPACE, ()))  # nothing measured here
    assert stopping.decide(sampler, study) is None  # no answer of its own yet


def test_a_screened_trial_is_not_a_duplicate_and_keeps_what_the_model_fits():
    from harness.record.results import StepHistogram
    from sweep.study.loop.decisions import SearchDriver
    from sweep.study.trial.candidates import candidate_for

    objective = Objective("tok_s", 64)
    study = optuna.create_study(direction="maximize")
    driver = SearchDriver(study, objective, gpus_per_trial=8)
    values = {"speculative_num_steps": 3, "speculative_eagle_topk": 1}
    values |= {"speculative_num_draft_tokens": 4, "mem_fraction_static": 0.85, "hicache_size": 0}
    land = Landscape("single", Oracle(SETUPS["h100_sxm"]))
    candidate = candidate_for(land.server(values), "bench")

    def told(warnings: list[str]) -> optuna.trial.FrozenTrial:
        trial = study.ask()
        result = TrialResult("t", "trial", Outcome.PRUNED, "sim", True, 1.0, dict(values))
        result.metrics = {"tok_s": 80.0, "accept_len_c1": 2.1, "decode_tok_s_c1": 80.0}
        result.step_histograms = [StepHistogram(1, [0.6, 0.35, 0.2], 900, source="server")]
        result.runs = [RunSummary(1, 1, 3, 0, 6144, 80.0, 79.0, 80.0, 0.1, 2.1, "server")]
        result.runs.append(replace(result.runs[0], run=2, incomplete=True))  # not counted
        result.warnings = warnings
        driver.tell(trial, candidate, result, None)
        return study.trials[-1]

    screened = told(["screened"])
    assert screened.user_attrs["screened"] is True
    assert screened.user_attrs["model_obs"]["levels"]["1"]["at_least"] == [0.6, 0.35, 0.2]
    assert screened.user_attrs["model_obs"]["levels"]["1"]["runs"] == 1
    assert driver.verdict(candidate).action == "launch"  # may be measured in full
    told([])  # stopped early by the prune bound: the study knows it
    assert driver.verdict(candidate).action == "duplicate"
