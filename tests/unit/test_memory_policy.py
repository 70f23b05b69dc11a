"""search.memory=auto by capacity: the fraction is searched only where the KV pool the servers
report binds at the objective's highest level, and a prior whose fraction ran out of GPU memory
is not launched there again (sweep.study.search.memory, sweep.study.trial.capacity,
sweep.study.search.priors)."""

from __future__ import annotations

import optuna
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from harness.record.results import Outcome, TrialResult
from sweep.launch.app import CONF_DIR
from sweep.study.loop.decisions import SearchDriver
from sweep.study.search import priors
from sweep.study.search.memory import PRIOR_FRACTION, MemorySampler, resolve_mode, wrap
from sweep.study.search.space import SearchSpace
from sweep.study.trial.candidates import candidate_for
from sweep.study.trial.capacity import Demand, binds, demand_for
from sweep.study.trial.objective import Objective
from sweep.study.trial.screened import SCREENED
from tests.unit.test_feasibility import SPACE, server, values

LOAD = Objective("throughput", 64)  # reads concurrency 64 only
DEMAND = Demand(prompt_tokens=100, output_tokens=512)  # 666 tokens a request, with 4 drafts
NEED_64 = 48 * DEMAND.tokens(4)  # SGLang's speculative running cap holds 48 of the 64
SEARCH = {
    "memory": "auto",
    "enqueue": [values(mem=0.85)],
    "enqueue_under_load": [values(steps=1, topk=1, draft=2, mem=0.85)],
}


def told(study, driver, vals, outcome, pool=None, kind=None, effective=None):
    """A launch of `vals` told as the sweep tells it, its server reporting `pool` KV tokens."""
    t = study.ask(fixed_distributions={})
    r = TrialResult("t", "trial", outcome, "sim", True, 1.0, vals, oom_kind=kind)
    r.wall_s, r.startup_s, r.startup_wall_s = 900.0, 600.0, 600.0
    if outcome is Outcome.OK:
        r.metrics = {"output_tok_s_c64": 1000.0}
        r.effective = {"max_total_num_tokens": pool, **(effective or {})}
    c = candidate_for(server(vals), "ctx")
    driver.tell(t, c, r, None)
    return c


def auto_study(storage=None):
    sampler = MemorySampler(optuna.samplers.RandomSampler(seed=0), "auto", 64, DEMAND)
    study = optuna.create_study(sampler=sampler, directions=["maximize"], storage=storage)
    return study, sampler, SearchDriver(study, LOAD, gpus_per_trial=8)


def test_auto_pins_while_no_trial_has_started():
    study, sampler, driver = auto_study()
    assert sampler.policy(study) == "pin"
    told(study, driver, values(mem=0.85), Outcome.OOM, kind="gpu")  # an OOM started nothing
    assert sampler.policy(study) == "pin"
    assert resolve_mode("auto", LOAD) == "auto"  # decided per study, not per objective
    assert resolve_mode("auto", Objective("tok_s", 64)) == "pin"


def test_auto_pins_where_the_reported_pool_holds_the_highest_level():
    study, sampler, driver = auto_study()
    told(study, driver, values(mem=0.85), Outcome.OK, pool=116_000)  # the PCIe box at 0.85
    assert sampler.policy(study) == "pin"
    trial = study.ask()
    assert SearchSpace.from_config(OmegaConf.create(SPACE)).suggest(trial)["hicache_size"] == 0


def test_auto_takes_the_ceiling_where_the_pool_binds():
    study, sampler, driver = auto_study()
    told(study, driver, values(mem=0.85), Outcome.OK, pool=NEED_64 + 10)
    assert sampler.policy(study) == "pin"  # holds the need
    short = 48 * DEMAND.tokens(5) - 10
    told(study, driver, values(steps=4, draft=5, mem=0.84), Outcome.OK, pool=short)
    assert sampler.policy(study) == "ceiling"  # this one does not: the fraction can pay
    space = sampler.infer_relative_search_space(study, study.trials[-1])
    assert "mem_fraction_static" not in space  # the sampler never models the fraction


def test_the_running_cap_the_server_reports_bounds_the_need():
    study, sampler, driver = auto_study()
    # 16 running x 666 tokens = 10.7k: an 11k pool holds them, where 48 would not fit.
    told(study, driver, values(), Outcome.OK, pool=11_000, effective={"max_running_requests": 16})
    assert sampler.policy(study) == "pin"
    assert binds(study.trials, 64, DEMAND) is False
    assert binds(study.trials, 8, DEMAND) is False
    other, other_sampler, other_driver = auto_study()
    told(other, other_driver, values(), Outcome.OK, pool=11_000)  # SGLang's 48: it binds
    assert other_sampler.policy(other) == "ceiling"


def test_a_server_that_reports_no_pool_leaves_auto_at_the_ceiling():
    study, sampler, driver = auto_study()
    told(study, driver, values(), Outcome.OK, pool=None)
    assert sampler.policy(study) == "ceiling"
    assert wrap(optuna.samplers.RandomSampler(), "auto", LOAD).policy(study) == "ceiling"


def test_explicit_policies_keep_their_behaviour():
    study, _sampler, driver = auto_study()
    told(study, driver, values(mem=0.85), Outcome.OK, pool=1_000_000)
    base = optuna.samplers.RandomSampler(seed=0)
    assert MemorySampler(base, "ceiling", 64, DEMAND).policy(study) == "ceiling"
    assert MemorySampler(base, "pin", 64, DEMAND).policy(study) == "pin"
    assert wrap(base, "sample", LOAD) is base


def test_resume_reads_the_same_decision_back_from_the_study(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study, sampler, driver = auto_study(url)
    told(study, driver, values(mem=0.85), Outcome.OK, pool=116_000)
    told(study, driver, values(steps=4, draft=5, mem=0.85), Outcome.OK, pool=20_000)
    fresh = MemorySampler(optuna.samplers.RandomSampler(seed=1), "auto", 64, DEMAND)
    resumed = optuna.load_study(study_name=study.study_name, storage=url, sampler=fresh)
    assert resumed.trials[1].user_attrs["effective"]["max_total_num_tokens"] == 20_000
    assert fresh.policy(resumed) == sampler.policy(study) == "ceiling"


# -- a prior whose fraction does not start on this box ----------------------------------------
def run(mode: str, starts_up_to: float, n: int = 6, starts_from: float = 0.0):
    """The sweeper's loop on a card where nothing starts above `starts_up_to` (a GPU OOM) or
    below `starts_from` (the weights leave the KV pool too little: SGLang's "not enough
    memory"), priors first."""
    sampler = MemorySampler(optuna.samplers.RandomSampler(seed=0), mode, 64, DEMAND)
    study = optuna.create_study(sampler=sampler, directions=["maximize"])
    priors.enqueue(study, OmegaConf.create(SEARCH), LOAD)
    space = SearchSpace.from_config(OmegaConf.create(SPACE))
    driver = SearchDriver(study, LOAD, gpus_per_trial=8)
    launched = []
    for _ in range(n):
        trial = study.ask()
        vals = space.suggest(trial)
        c = candidate_for(server(vals), "ctx")
        verdict = driver.verdict(c)
        r = TrialResult("t", "trial", Outcome.DUPLICATE, "sim", True, 1.0, vals)
        if verdict.launch:
            r.wall_s, r.startup_s, r.startup_wall_s = 900.0, 600.0, 600.0
            m = vals["mem_fraction_static"]
            r.outcome = Outcome.OK if starts_from <= m <= starts_up_to else Outcome.OOM
            if r.outcome is Outcome.OOM:
                r.oom_kind = "gpu" if m > starts_up_to else "kv_pool"
            else:
                r.metrics, r.effective = {"output_tok_s_c64": 900.0}, {"max_total_num_tokens": 9e4}
            launched.append((trial.user_attrs.get(PRIOR_FRACTION), c, r.outcome))
        elif verdict.action == "predicted_oom":
            r.outcome = Outcome.PREDICTED_OOM
        driver.tell(trial, c, r, None, verdict.source)
    return study, launched


def test_a_prior_is_not_launched_again_at_a_fraction_that_ran_out():
    for mode in ("auto", "pin", "ceiling"):
        _study, launched = run(mode, starts_up_to=0.83)
        (p1, first, o1), (p2, second, o2) = launched[:2]
        assert (p1, first.draft_tokens, first.mem_fraction_static, o1) == (
            0.85,
            4,
            0.85,
            Outcome.OOM,
        )
        # the one-step prior: halfway down the grid below the OOM (0.82-0.84), not at 0.85
        assert (p2, second.draft_tokens, second.mem_fraction_static) == (0.85, 2, 0.83), mode
        assert o2 is Outcome.OK
        if mode != "ceiling":  # held at the fraction known to start from there on
            assert {c.mem_fraction_static for _, c, _ in launched[1:]} == {0.83}, mode


def test_the_fraction_is_bisected_up_from_a_pool_too_small_not_stepped():
    # A memory-tight card: the weights leave the KV pool too little below 0.93, and the priors
    # ask for 0.85. Stepping 0.01 per failure took 8 failed launches to reach 0.93; bisecting
    # (0.85, 0.94] takes two: 0.90, then (0.90, 0.94] -> 0.93 (ceiling, searching upwards from
    # there, may take 0.94).
    for mode in ("auto", "pin", "ceiling"):
        _study, launched = run(mode, starts_up_to=0.94, starts_from=0.93)
        fractions = [c.mem_fraction_static for _, c, _ in launched]
        outcomes = [o for _, _, o in launched]
        assert fractions[:2] == [0.85, 0.90], mode
        assert fractions[2] == (0.94 if mode == "ceiling" else 0.93), mode
        assert outcomes[:3] == [Outcome.OOM, Outcome.OOM, Outcome.OK], mode
        assert all(o is Outcome.OK for o in outcomes[3:]), mode  # nothing below it again


def test_a_group_that_ran_out_where_the_others_start_is_bisected_down():
    # A start at 0.85 (3/1/4), then a tree with more draft tokens runs out of GPU memory at
    # 0.85: its group is bisected in the floor..OOM bracket (0.82-0.84), not stepped from 0.85.
    study = optuna.create_study(
        sampler=MemorySampler(optuna.samplers.RandomSampler(seed=0), "pin", 64, DEMAND),
        directions=["maximize"],
    )
    driver = SearchDriver(study, LOAD, gpus_per_trial=8)
    told(study, driver, values(mem=0.85), Outcome.OK, pool=NEED_64 * 2)
    told(study, driver, values(steps=3, topk=4, draft=12, mem=0.85), Outcome.OOM, kind="gpu")
    tree = values(steps=3, topk=4, draft=12)
    del tree["mem_fraction_static"]  # the policy's
    study.enqueue_trial(tree)
    vals = SearchSpace.from_config(OmegaConf.create(SPACE)).suggest(study.ask())
    assert vals["speculative_num_draft_tokens"] == 12
    assert vals["mem_fraction_static"] == 0.83  # the middle of 0.82-0.84


def test_a_prior_runs_at_its_fraction_where_it_starts():
    _study, launched = run("ceiling", starts_up_to=0.90, n=2)
    assert [(c.draft_tokens, c.mem_fraction_static) for _, c, _ in launched] == [
        (4, 0.85),
        (2, 0.85),
    ]


def test_priors_carry_their_fraction_as_an_attribute_and_are_enqueued_once():
    study = optuna.create_study()
    priors.enqueue(study, OmegaConf.create(SEARCH), LOAD)
    priors.enqueue(study, OmegaConf.create(SEARCH), LOAD)  # a resumed sweep enqueues again
    waiting = study.get_trials(deepcopy=False)
    assert len(waiting) == 2
    assert all("mem_fraction_static" not in t.system_attrs["fixed_params"] for t in waiting)
    assert [t.user_attrs[PRIOR_FRACTION] for t in waiting] == [0.85, 0.85]
    sampled = optuna.create_study()
    priors.enqueue(sampled, OmegaConf.create({**SEARCH, "memory": "sample"}), LOAD)
    fixed = [t.system_attrs["fixed_params"] for t in sampled.get_trials(deepcopy=False)]
    assert [f["mem_fraction_static"] for f in fixed] == [0.85, 0.85]  # sample: Optuna's own


def test_the_benchmark_says_what_a_request_holds():
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        profile = compose(config_name="config", overrides=["experiment=load_profile"])
        chat = compose(config_name="config", overrides=["experiment=multi_turn_chat"])
    demand = demand_for(profile)
    assert demand is not None and demand.output_tokens == 2048 and demand.rounds == 1
    assert 17 <= demand.prompt_tokens <= 91  # the reasoning prompts (conf/benchmark/workload)
    # The PCIe box at 0.85 reports 116k tokens: 48 running x (prompt + 2048 + 4) fit in it.
    study, sampler, driver = auto_study()
    sampler.demand = demand
    told(study, driver, values(mem=0.85), Outcome.OK, pool=116_000)
    assert sampler.policy(study) == "pin"
    # Returning users over several rounds: every open conversation is kept, not the running.
    turns = demand_for(chat)
    assert turns is not None and (turns.rounds, turns.users) == (4, 96)
    assert binds(study.trials, 64, Demand(0, 400, rounds=4, users=96)) is True
    assert binds(study.trials, 64, Demand(0, 400, rounds=4, users=48)) is False


# -- a screened configuration launched in full -------------------------------------------------
def test_a_screened_configuration_runs_in_full_at_its_screens_fraction():
    # Under `ceiling` the fraction climbs towards the OOM boundary trial by trial; a screen of
    # 2/2/3 at 0.88 relaunched in full at the next bisection point would pool two servers whose
    # pools admit different numbers of requests. Its full launch runs at 0.88; another
    # configuration goes on bisecting.
    study = optuna.create_study(
        sampler=MemorySampler(optuna.samplers.RandomSampler(seed=0), "ceiling", 64, DEMAND),
        directions=["maximize"],
    )
    driver = SearchDriver(study, LOAD, gpus_per_trial=8)
    told(study, driver, values(mem=0.85), Outcome.OK, pool=NEED_64 // 2)
    t = study.ask(fixed_distributions={})
    screen = TrialResult("t", "trial", Outcome.PRUNED, "sim", True, 1.0, {}, warnings=[SCREENED])
    screen.wall_s, screen.startup_s, screen.startup_wall_s = 700.0, 600.0, 600.0
    screen.metrics = {"output_tok_s_c64": 1000.0}
    screen.effective = {"max_total_num_tokens": NEED_64 // 2}
    tree = values(steps=2, topk=2, draft=3, mem=0.88)
    driver.tell(t, candidate_for(server(tree), "ctx"), screen, None)
    assert study.trials[-1].user_attrs[SCREENED]
    space = SearchSpace.from_config(OmegaConf.create(SPACE))

    def full(vals: dict) -> float:
        vals = {k: v for k, v in vals.items() if k != "mem_fraction_static"}
        study.enqueue_trial(vals)
        return space.suggest(study.ask())["mem_fraction_static"]

    assert full(tree) == 0.88
    assert full(values(steps=2, topk=2, draft=4)) == 0.90  # bisecting (0.85, 0.94]
