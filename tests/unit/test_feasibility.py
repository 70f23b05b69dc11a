"""The OOM-boundary model and the memory policy: a group's mem_fraction_static ceiling learned
from few launches, an indirect predicted OOM launched once to check, the fraction held where it
cannot change a single-stream objective."""

from __future__ import annotations

import optuna
import pytest
from omegaconf import OmegaConf

from harness.record.results import Outcome, TrialResult
from harness.spec import ServerSpec
from sweep.study.loop.decisions import SearchDriver
from sweep.study.search.memory import MemorySampler, objective_levels, resolve_mode
from sweep.study.search.space import SearchSpace
from sweep.study.trial.candidates import candidate_for
from sweep.study.trial.feasibility import Feasibility
from sweep.study.trial.objective import Objective

SPACE = {
    "speculative_num_steps": {"type": "int", "low": 1, "high": 5},
    "speculative_eagle_topk": {"type": "categorical", "choices": [1, 2, 4]},
    "speculative_num_draft_tokens": {"type": "int", "low": 2, "high": 16},
    "mem_fraction_static": {"type": "float", "low": 0.82, "high": 0.94, "step": 0.01},
    "hicache_size": {"type": "categorical", "choices": [0, 48]},
}


def server(values: dict) -> ServerSpec:
    return ServerSpec(
        model_path="m",
        tp_size=8,
        speculative_algorithm="EAGLE3",
        speculative_draft_model_path="/d",
        speculative_num_steps=values["speculative_num_steps"],
        speculative_eagle_topk=values["speculative_eagle_topk"],
        speculative_num_draft_tokens=values["speculative_num_draft_tokens"],
        mem_fraction_static=values["mem_fraction_static"],
        hicache_size=values["hicache_size"],
    )


def ceiling(draft: int) -> float:
    """A made-up GPU: more draft tokens leave less room under the static pool."""
    return round(0.93 - 0.01 * ((draft - 2) // 3), 2)


def launch(values: dict, draft: int) -> TrialResult:
    r = TrialResult("t", "trial", Outcome.OK, "sim", True, 1.0, dict(values))
    r.startup_s = r.startup_wall_s = 600.0
    if values["mem_fraction_static"] > ceiling(draft):
        r.outcome, r.oom_kind, r.wall_s = Outcome.OOM, "gpu", 600.0
        return r
    r.wall_s = 900.0
    r.metrics = {"output_tok_s_c64": 1000 * values["mem_fraction_static"], "tok_s": 100.0}
    return r


def sweep(objective: Objective, mode: str, n: int, enqueue=()):
    """The sweeper's loop (ask, suggest, verdict, launch, tell) on the made-up GPU."""
    base = optuna.samplers.TPESampler(seed=0, n_startup_trials=3)
    study = optuna.create_study(sampler=MemorySampler(base, mode), directions=objective.directions)
    for params in enqueue:
        study.enqueue_trial(params)
    space = SearchSpace.from_config(OmegaConf.create(SPACE))
    driver = SearchDriver(study, objective, gpus_per_trial=8)
    launched = []
    for _ in range(n):
        trial = study.ask()
        values = space.suggest(trial)
        candidate = candidate_for(server(values), "ctx")
        verdict = driver.verdict(candidate)
        if verdict.launch:
            driver.begin(trial, verdict)
            result = launch(values, candidate.draft_tokens)
            launched.append((candidate, result.outcome))
        else:
            result = TrialResult("t", "trial", Outcome.DUPLICATE, "sim", True, 1.0, values)
            if verdict.action == "predicted_oom":
                result.outcome = Outcome.PREDICTED_OOM
            elif verdict.action == "dominated":
                result.outcome = Outcome.DOMINATED
        driver.tell(trial, candidate, result, None, verdict.source)
    return study, launched


def told(study, driver, values, outcome, kind=None):
    t = study.ask(fixed_distributions={})
    r = TrialResult("t", "trial", outcome, "sim", True, 1.0, values, oom_kind=kind)
    r.wall_s, r.startup_s, r.startup_wall_s = 900.0, 600.0, 600.0
    if outcome is Outcome.OK:
        r.metrics = {"tok_s": 90.0}
    c = candidate_for(server(values), "ctx")
    driver.begin(t, driver.verdict(c))
    driver.tell(t, c, r, None)
    return c


def values(steps=3, topk=1, draft=4, mem=0.85, hicache=0) -> dict:
    return {
        "speculative_num_steps": steps,
        "speculative_eagle_topk": topk,
        "speculative_num_draft_tokens": draft,
        "mem_fraction_static": mem,
        "hicache_size": hicache,
    }


def test_the_boundary_is_bracketed_by_the_largest_start_and_the_smallest_oom():
    study = optuna.create_study(directions=["maximize"])
    driver = SearchDriver(study, Objective("tok_s", 64))
    told(study, driver, values(mem=0.85), Outcome.OK)
    told(study, driver, values(mem=0.90), Outcome.OK)
    told(study, driver, values(mem=0.93), Outcome.OOM, "gpu")
    told(study, driver, values(steps=2, topk=4, draft=8, mem=0.91), Outcome.OOM, "gpu")
    feasibility = Feasibility(study.get_trials())
    own = feasibility.boundary(candidate_for(server(values(mem=0.5)), "ctx"))
    assert (own.fits, own.fits_direct, own.ooms, own.ooms_direct) == (0.90, True, 0.93, True)
    # draft 6 needs more than draft 4 (which OOMed at 0.93) and less than draft 8 (0.91)
    other = feasibility.boundary(candidate_for(server(values(2, 4, 6, 0.5)), "ctx"))
    assert (other.fits, other.fits_direct, other.ooms, other.ooms_direct) == (
        None,
        False,
        0.93,
        False,
    )


def test_an_indirect_predicted_oom_is_launched_once_to_check_it():
    study = optuna.create_study(directions=["maximize"])
    driver = SearchDriver(study, Objective("tok_s", 64))
    told(study, driver, values(mem=0.92), Outcome.OOM, "gpu")  # draft 4
    bigger = values(steps=2, topk=4, draft=8, mem=0.93)
    assert driver.verdict(candidate_for(server(bigger), "ctx")).action == "recheck"
    told(study, driver, bigger, Outcome.OK)  # the rule was wrong for this group: it started
    assert study.trials[-1].user_attrs["recheck_of"] == 0
    # A start of the group at 0.93 contradicts the indirect OOM at 0.92 below it.
    same_group = values(steps=3, topk=4, draft=8, mem=0.92)
    assert driver.verdict(candidate_for(server(same_group), "ctx")).action == "launch"
    # Another group, once re-checked, trusts the indirect evidence after that.
    other = values(steps=3, topk=2, draft=6, mem=0.93)
    assert driver.verdict(candidate_for(server(other), "ctx")).action == "recheck"
    told(study, driver, other, Outcome.OOM, "gpu")
    again = values(steps=4, topk=2, draft=6, mem=0.94)
    assert driver.verdict(candidate_for(server(again), "ctx")).action == "predicted_oom"


def test_capacity_objectives_find_each_groups_ceiling_in_a_few_launches():
    objective = Objective("throughput", 64)
    study, launched = sweep(objective, "ceiling", 30, enqueue=[values(mem=0.85)])
    by_group: dict[int, list] = {}
    for c, outcome in launched:
        by_group.setdefault(c.draft_tokens, []).append((c.mem_fraction_static, outcome))
    feasibility = Feasibility(study.get_trials())
    settled = 0
    for draft, _tries in by_group.items():
        # the group's boundary (a 5-step tree holds every draft-token count of the space)
        b = feasibility.boundary(candidate_for(server(values(5, 4, draft, 0.5)), "ctx"))
        assert b.fits is None or b.fits <= ceiling(draft) < (b.ooms or 1.0)
        if b.settled and round(b.ooms - b.fits, 2) <= 0.01:  # closed: the ceiling itself
            settled += 1
            assert b.fits == ceiling(draft)
    assert settled >= 3
    ooms = sum(o is Outcome.OOM for _, o in launched)
    assert ooms <= len(by_group) + 2  # about one OOM per group, not a grid's worth
    best = study.best_trial.params["mem_fraction_static"]
    assert best >= 0.92  # the best throughput sits at the ceiling


def test_single_stream_objectives_hold_memory_at_a_known_feasible_value():
    _study, launched = sweep(Objective("tok_s", 64), "pin", 25, enqueue=[values(mem=0.90)])
    assert all(c.hicache_size == 0 for c, _ in launched[1:])
    per_group: dict[int, list] = {}
    for c, outcome in launched:
        per_group.setdefault(c.draft_tokens, []).append((c.mem_fraction_static, outcome))
    for draft, tries in per_group.items():
        # held at the first start's 0.90; where that does not fit, just under the boundary
        assert {m for m, o in tries if o is Outcome.OK} <= {min(0.90, ceiling(draft))}
        assert sum(o is Outcome.OOM for _, o in tries) <= 1, (draft, tries)
    assert any(ceiling(d) < 0.90 for d in per_group)  # the test reached a group that needs it


def test_the_memory_mode_follows_the_objectives_levels():
    assert objective_levels(Objective("tok_s", 64)) == {1}
    assert objective_levels(Objective("tok_s+throughput", 32)) == {1, 32}
    profile = Objective("weighted_throughput", 64, levels=[1, 8, 64])
    assert resolve_mode("auto", profile) == "auto"  # decided per study (test_memory_policy.py)
    assert resolve_mode("auto", Objective("speedup", 64)) == "pin"
    assert resolve_mode("sample", profile) == "sample"
    with pytest.raises(ValueError, match=r"search\.memory"):
        resolve_mode("max", profile)


def test_an_oom_of_a_smaller_launch_of_the_same_kind_is_not_checked_again():
    # A tree at least as large in every memory term as a tree that ran out (draft tokens, steps
    # x topk branches, graph batch) runs out too: predicted, not launched to check. A
    # chain's OOM still says nothing sure of a tree (another attention backend, other kernels).
    study = optuna.create_study(directions=["maximize"])
    driver = SearchDriver(study, Objective("tok_s", 64))
    told(study, driver, values(steps=3, topk=2, draft=4, mem=0.92), Outcome.OOM, "gpu")
    bigger = candidate_for(server(values(steps=3, topk=4, draft=8, mem=0.92)), "ctx")
    verdict = driver.verdict(bigger)
    assert (verdict.action, verdict.source.number) == ("predicted_oom", 0)
    fewer_branches = candidate_for(server(values(steps=1, topk=4, draft=5, mem=0.92)), "ctx")
    assert driver.verdict(fewer_branches).action == "recheck"  # 4 branches against 6
    assert Feasibility(study.get_trials()).boundary(bigger).ooms_direct
    chain = optuna.create_study(directions=["maximize"])
    chain_driver = SearchDriver(chain, Objective("tok_s", 64))
    told(chain, chain_driver, values(steps=5, topk=1, draft=6, mem=0.92), Outcome.OOM, "gpu")
    tree = candidate_for(server(values(steps=5, topk=2, draft=8, mem=0.92)), "ctx")
    assert chain_driver.verdict(tree).action == "recheck"


def test_a_gpu_oom_stands_for_every_hicache_size():
    """HiCache's tier is host memory (SGLang 0.5.23 pins its pool on the host): a GPU OOM with
    HiCache off is the same OOM with HiCache on, and the other way round, so neither is launched
    to check it; a start with HiCache on says the group fits there with it off."""
    study = optuna.create_study(directions=["maximize"])
    driver = SearchDriver(study, Objective("throughput", 64))
    told(study, driver, values(steps=2, topk=1, draft=3, mem=0.91), Outcome.OOM, "gpu")
    with_hicache = candidate_for(
        server(values(steps=2, topk=1, draft=3, mem=0.91, hicache=48)), "ctx"
    )
    verdict = driver.verdict(with_hicache)
    assert (verdict.action, verdict.source.number) == ("predicted_oom", 0)
    told(study, driver, values(steps=1, topk=1, draft=2, mem=0.90, hicache=48), Outcome.OK)
    off = Feasibility(study.get_trials()).boundary(
        candidate_for(server(values(1, 1, 2, 0.5)), "ctx")
    )
    assert (off.fits, off.fits_direct) == (0.90, True)
