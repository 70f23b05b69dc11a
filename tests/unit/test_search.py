"""The search's decisions on an in-memory Optuna study: skips, constraints, pruning, resume."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from harness.record.results import Outcome, RunSummary, TrialResult
from harness.spec import ServerSpec
from sweep.study.loop.decisions import SearchDriver
from sweep.study.trial.candidates import Candidate, candidate_for, predicts_oom
from sweep.study.trial.objective import Objective


def server(steps=3, topk=1, draft=4, mem=0.88, hicache=0, **kw) -> ServerSpec:
    return ServerSpec(
        model_path="m",
        tp_size=8,
        speculative_algorithm="EAGLE3",
        speculative_draft_model_path="/d",
        speculative_num_steps=steps,
        speculative_eagle_topk=topk,
        speculative_num_draft_tokens=draft,
        mem_fraction_static=mem,
        hicache_size=hicache,
        **kw,
    )


def cand(**kw) -> Candidate:
    return candidate_for(server(**kw), "ctx")


def result(outcome=Outcome.OK, tok_s=90.0, ci=1.0, oom_kind=None, runs=()) -> TrialResult:
    metrics = {"tok_s": tok_s, "tok_s_ci95": ci} if outcome in (Outcome.OK, Outcome.PRUNED) else {}
    r = TrialResult(
        "t",
        "trial",
        outcome,
        "sim",
        True,
        1.0,
        {},
        metrics=metrics,
        oom_kind=oom_kind,
        runs=list(runs),
    )
    return r


def test_candidate_applies_sglangs_adjustments():
    c = cand(steps=3, topk=1, draft=2)
    assert c.draft_tokens == 4  # topk 1 forces steps + 1
    assert c.max_running_requests == 48
    assert cand(steps=3, topk=1, draft=4).key == c.key
    assert candidate_for(server(), "other-setup").key != c.key


def test_nextn_is_eagle():
    a = candidate_for(server(), "c")
    b = candidate_for(ServerSpec(**{**server().__dict__, "speculative_algorithm": "nextn"}), "c")
    assert b.algorithm == "EAGLE" and a.algorithm == "EAGLE3"


@pytest.mark.parametrize(
    ("kind", "oom", "candidate", "expected"),
    [
        ("gpu", {"mem": 0.92, "draft": 4}, {"mem": 0.93, "draft": 4}, True),
        ("gpu", {"mem": 0.92, "draft": 4}, {"mem": 0.92, "steps": 4, "draft": 5}, True),
        ("gpu", {"mem": 0.92, "draft": 4}, {"mem": 0.91, "draft": 4}, False),
        ("gpu", {"mem": 0.92, "steps": 3, "topk": 2, "draft": 6}, {"mem": 0.93, "draft": 4}, False),
        ("gpu", {"mem": 0.92}, {"mem": 0.93, "cuda_graph_max_bs": 8}, False),  # None vs 8
        ("kv_pool", {"mem": 0.75}, {"mem": 0.74}, True),
        ("kv_pool", {"mem": 0.75}, {"mem": 0.80}, False),
        ("host", {"hicache": 200}, {"hicache": 300}, True),
        ("host", {"hicache": 200}, {"hicache": 0}, False),
    ],
)
def test_memory_rule(kind, oom, candidate, expected):
    assert predicts_oom(cand(**candidate), cand(**oom), kind) is expected


def test_memory_rule_needs_the_same_setup():
    assert not predicts_oom(
        candidate_for(server(mem=0.95), "a"), candidate_for(server(), "b"), "gpu"
    )


def study() -> tuple[optuna.Study, SearchDriver]:
    s = optuna.create_study(directions=["maximize"], sampler=optuna.samplers.RandomSampler(0))
    return s, SearchDriver(s, Objective("tok_s", 64))


def test_duplicate_is_recognised_and_gets_the_same_value():
    s, driver = study()
    t = s.ask()
    c = cand()
    driver.tell(t, c, result(tok_s=91.0), None)
    verdict = driver.verdict(cand(draft=3))  # topk 1: the same effective configuration
    assert verdict.action == "duplicate" and verdict.source.number == 0
    t2 = s.ask()
    dup = result(Outcome.DUPLICATE)
    assert driver.tell(t2, c, dup, None, verdict.source) is TrialState.COMPLETE
    assert s.trials[1].values == [91.0]


def test_oom_is_a_constraint_violation_and_predicts_bigger_configs():
    s, driver = study()
    t = s.ask()
    driver.tell(t, cand(mem=0.93), result(Outcome.OOM, oom_kind="gpu"), None)
    frozen = s.trials[0]
    assert frozen.state is TrialState.COMPLETE and frozen.constraints == {"oom": 1.0}
    assert driver.verdict(cand(mem=0.94)).action == "predicted_oom"  # its own group: direct
    # A longer chain is as large in every term memory grows with: the OOM is its own, direct.
    assert driver.verdict(cand(mem=0.94, steps=4, draft=5)).action == "predicted_oom"
    # A tree with more draft tokens is another memory group and another kind (other attention
    # kernels): the OOM predicts it only indirectly, so it is launched once to check
    # (sweep.study.trial.feasibility); the check's own OOM is then direct.
    assert driver.verdict(cand(mem=0.94, steps=2, topk=2, draft=5)).action == "recheck"
    assert driver.verdict(cand(mem=0.90)).action == "launch"
    t2 = s.ask()
    driver.tell(t2, cand(mem=0.88), result(tok_s=80.0), None)
    assert s.best_trial.number == 1  # the infeasible trial never ranks


def test_failures_are_failures_not_values():
    s, driver = study()
    t = s.ask()
    assert driver.tell(t, cand(), result(Outcome.CRASH), None) is TrialState.FAIL
    assert s.trials[0].values is None


def test_prune_bound_is_the_best_lower_bound():
    s, driver = study()
    assert driver.prune_below() is None
    for tok_s, ci in ((90.0, 1.0), (95.0, 2.0), (80.0, 0.5)):
        driver.tell(s.ask(), cand(mem=tok_s / 100), result(tok_s=tok_s, ci=ci), None)
    assert driver.prune_below() == pytest.approx(93.0)


def test_pruned_trial_reports_its_runs():
    s, driver = study()
    runs = [
        RunSummary(i, 1, 3, 0, 100, v, v, v, 0.1, None, None) for i, v in ((1, 70.0), (2, 71.0))
    ]
    state = driver.tell(s.ask(), cand(), result(Outcome.PRUNED, tok_s=70.5, runs=runs), None)
    assert state is TrialState.PRUNED
    assert s.trials[0].intermediate_values == {0: 70.0, 1: 71.0}


def test_orphaned_running_trials_of_dead_workers_fail():
    s, driver = study()
    t = s.ask()
    t.set_user_attr("worker", {"host": SearchDriver.worker()["host"], "pid": 2**22 + 12345})
    alive = s.ask()
    alive.set_user_attr("worker", SearchDriver.worker())
    assert driver.fail_orphans() == [0]
    assert s.trials[0].state is TrialState.FAIL and s.trials[1].state is TrialState.RUNNING


def test_objectives():
    r = result(tok_s=90.0)
    r.metrics["output_tok_s_c64"] = 900.0
    assert Objective("tok_s", 64).values(r, None) == [90.0]
    assert Objective("speedup", 64).values(r, 80.0) == [pytest.approx(1.125)]
    assert Objective("speedup", 64).values(r, None) is None
    both = Objective("tok_s+throughput", 64)
    assert (
        both.values(r, None) == [90.0, 900.0] and both.multi and both.directions == ["maximize"] * 2
    )
    with pytest.raises(ValueError, match=r"search\.objective='latency'"):
        Objective("latency", 64)


def test_a_crash_predicts_no_oom_even_with_a_memory_kind():
    # A capture failure from an illegal memory access is a crash (harness.server.logs): nothing is
    # predicted from it, whatever memory, draft size and graph batch come next.
    s, driver = study()
    driver.tell(s.ask(), cand(mem=0.85), result(Outcome.CRASH, oom_kind="gpu"), None)
    assert driver.verdict(cand(mem=0.93, steps=4, draft=5)).action == "launch"
