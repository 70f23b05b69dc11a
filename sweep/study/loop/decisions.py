"""The decisions of a search, apart from Hydra and launching: what to skip, what to tell Optuna.

A trial's candidate (`sweep.study.trial.candidates`) is compared with what the study already knows:
- a tree SGLang verifies exactly as a smaller launch, with more draft work -> `dominated`, not
  launched (`candidates.dominating`); told to Optuna as a constraint violation (`dominated` > 0);
- the same candidate was measured (ok, oom, pruned) -> `duplicate`, not launched, same result;
- it needs at least the memory of a candidate that ran out of it -> `predicted_oom`, not
  launched (`sweep.study.trial.feasibility`); when only another memory group's OOM says so, it is
  launched once per group to check (`recheck`);
- the same candidate crashed (or timed out) the same way twice -> `known_crash`, not launched
  (`sweep.study.trial.crashes`: one failure may be flaky and gets its second chance).
OOM and predicted-OOM trials are told to Optuna as constraint violations (`oom` > 0), so the
sampler learns where memory runs out; a repeated failure and its known crashes likewise
(`crash` > 0), so it learns where SGLang refuses or faults; a measured trial over a latency
limit (search.slo) likewise (`slo_<metric>_c<level>` > 0, `Objective.constraints`). The
objective value of an infeasible trial is never used to rank it (0 tok/s is what it served).
Everything is read back from the study's trials, so a resumed sweep (or another worker) makes
the same decisions.
"""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from harness.record.results import Outcome, TrialResult
from harness.server.procs import pid_alive
from sweep.study.loop import optuna_storage
from sweep.study.loop.budget import gpu_hours
from sweep.study.model.observations import ATTR as MODEL_ATTR
from sweep.study.model.observations import SCREENED, observation_attrs
from sweep.study.trial import crashes
from sweep.study.trial.candidates import Candidate, dominating
from sweep.study.trial.feasibility import RECHECK_ATTR, Feasibility
from sweep.study.trial.objective import Objective

KNOWN = (Outcome.OK, Outcome.OOM, Outcome.PRUNED)  # outcomes worth reusing


@dataclass(frozen=True)
class Verdict:
    # "launch", "recheck", "duplicate", "dominated", "predicted_oom" or "known_crash"
    action: str
    source: FrozenTrial | None = None  # recheck: the other group's OOM it checks
    reason: str = ""  # dominated: by what, and SGLang's source

    @property
    def launch(self) -> bool:
        return self.action in ("launch", "recheck")


class SearchDriver:
    def __init__(self, study: optuna.Study, objective: Objective, gpus_per_trial: int = 1):
        self.study = study
        self.objective = objective
        self.gpus_per_trial = gpus_per_trial  # a trial's GPU-hours: its server's time x these

    # -- what the study knows ----------------------------------------------------------------
    def _trials(self) -> list[FrozenTrial]:
        return self.study.get_trials(deepcopy=False)

    def verdict(self, candidate: Candidate) -> Verdict:
        dominated = dominating(candidate)
        if dominated is not None:
            return Verdict("dominated", reason=dominated[1])
        known = [
            t
            for t in self._trials()
            if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
            and t.user_attrs.get("candidate_key") == candidate.key
            and t.user_attrs.get("outcome") in {*KNOWN, Outcome.DUPLICATE, Outcome.PREDICTED_OOM}
            and not t.user_attrs.get(SCREENED)  # one run: it may be measured in full
        ]
        if known:
            return Verdict("duplicate", known[0])
        crashed = crashes.repeated_crash(self._trials(), candidate.key)
        if crashed is not None:
            return Verdict("known_crash", crashed)
        feasibility = Feasibility(self._trials())
        predicted = feasibility.predicted_oom(candidate)
        if predicted is not None:
            if predicted.direct or feasibility.rechecked(candidate):
                return Verdict("predicted_oom", predicted.source)
            # Only another group's OOM says so: launch it once to check (feasibility.py).
            return Verdict("recheck", predicted.source)
        return Verdict("launch")

    def begin(self, trial: optuna.Trial, verdict: Verdict) -> None:
        """Before launching: a recheck says which OOM it checks (feasibility.RECHECK_ATTR)."""
        if verdict.action == "recheck" and verdict.source is not None:
            trial.set_user_attr(RECHECK_ATTR, verdict.source.number)

    def prune_below(self) -> float | None:
        """The best trial's lower 95% bound on the watched metric (single objective only)."""
        if not self.objective.prunable:
            return None
        metric = self.objective.metrics[0]
        bounds = [
            t.user_attrs["metric"] - t.user_attrs.get("metric_ci95", float("inf"))
            for t in self._trials()
            if t.state == TrialState.COMPLETE
            and t.user_attrs.get("outcome") == Outcome.OK
            and t.user_attrs.get("metric_name") == metric
            and "metric" in t.user_attrs
        ]
        best = max(bounds, default=None)
        return best if best is not None and best > 0 else None

    # -- telling Optuna ------------------------------------------------------------------------
    def tell(
        self,
        trial: optuna.Trial,
        candidate: Candidate | None,
        result: TrialResult,
        baseline_tok_s: float | None,
        source: FrozenTrial | None = None,
    ) -> TrialState:
        attrs: dict[str, Any] = {
            "outcome": str(result.outcome),
            "gpu_hours": gpu_hours(result, self.gpus_per_trial),
        }
        # What the server says it runs (its KV pool, its running cap): the memory policy reads
        # the pool back from here (sweep.study.trial.capacity), in the sweep and the
        # benchmark alike.
        if result.effective:
            attrs["effective"] = result.effective
        if candidate is not None:
            attrs["candidate"] = asdict(candidate)
            attrs["candidate_key"] = candidate.key
        if result.oom_kind:
            attrs["oom_kind"] = result.oom_kind
        if result.outcome is Outcome.OK and result.startup_marks:  # what later starts expect
            attrs["startup_marks"] = result.startup_marks
            attrs["startup_wall_s"] = result.startup_wall_s
        if result.related:
            attrs["related"] = result.related
        if (observed := observation_attrs(result)) is not None:  # what the model fits
            attrs[MODEL_ATTR] = observed
        if SCREENED in result.warnings:
            attrs[SCREENED] = True
        failure = crashes.failure_signature(result)
        # Counted before this trial's own attribute is set: is this the failure's repeat?
        repeated = (
            failure is not None
            and candidate is not None
            and crashes.repeats_of(self._trials(), candidate.key, failure) + 1 >= crashes.REPEATS
        )
        if failure is not None:
            attrs["failure"] = failure
        metric = self.objective.metrics[0]
        metrics = {**result.metrics, **self.objective.derived(result)}  # weighted aggregates
        if metric in metrics:
            attrs["metric_name"] = metric
            attrs["metric"] = metrics[metric]
            if f"{metric}_ci95" in metrics:
                attrs["metric_ci95"] = metrics[f"{metric}_ci95"]
        for key, value in attrs.items():
            trial.set_user_attr(key, value)

        outcome = result.outcome
        if outcome is Outcome.DUPLICATE and source is not None:
            return self._tell_like(trial, source)
        if outcome is Outcome.DOMINATED:  # never better than what dominates it: infeasible
            trial.set_constraint("dominated", 1.0)
            self.study.tell(trial, [0.0] * len(self.objective.metrics))
            return TrialState.COMPLETE
        if outcome in (Outcome.OOM, Outcome.PREDICTED_OOM):
            trial.set_constraint("oom", 1.0)
            self.study.tell(trial, [0.0] * len(self.objective.metrics))
            return TrialState.COMPLETE
        if outcome is Outcome.KNOWN_CRASH or repeated:
            # Deterministic: infeasible, so the sampler moves away (the value never ranks it).
            trial.set_constraint("crash", 1.0)
            self.study.tell(trial, [0.0] * len(self.objective.metrics))
            return TrialState.COMPLETE
        values = self.objective.values(result, baseline_tok_s)
        if outcome is Outcome.PRUNED and not self.objective.multi:
            self._report_runs(trial, result)
            self.study.tell(trial, state=TrialState.PRUNED)
            return TrialState.PRUNED
        if outcome is Outcome.OK and values is not None:
            trial.set_constraint("oom", 0.0)
            # Latency limits (search.slo): > 0 makes the trial infeasible, not a penalty value.
            for key, excess in self.objective.constraints(result).items():
                trial.set_constraint(key, excess)
            if any(v > 0 for v in self.objective.constraints(result).values()):
                trial.set_user_attr("slo_violations", self.objective.violations(result))
            self.study.tell(trial, values)
            return TrialState.COMPLETE
        # a first crash or timeout, invalid, error, interrupted: a failure, not a penalty value
        self.study.tell(trial, state=TrialState.FAIL)
        return TrialState.FAIL

    def _report_runs(self, trial: optuna.Trial, result: TrialResult) -> None:
        field, level = self.objective.run_metric()
        level = level or next(iter({r.concurrency for r in result.runs}), 1)
        values = [getattr(r, field) for r in result.runs if r.concurrency == level]
        for step, value in enumerate(v for v in values if v is not None):
            trial.report(value, step)

    def _tell_like(self, trial: optuna.Trial, source: FrozenTrial) -> TrialState:
        """A duplicate gets exactly what its source got."""
        for key, value in source.constraints.items():
            trial.set_constraint(key, value)
        if source.state == TrialState.PRUNED:
            for step, value in sorted(source.intermediate_values.items()):
                trial.report(value, step)
            self.study.tell(trial, state=TrialState.PRUNED)
            return TrialState.PRUNED
        self.study.tell(trial, list(source.values))
        return TrialState.COMPLETE

    # -- resume ------------------------------------------------------------------------------
    @staticmethod
    def worker() -> dict[str, Any]:
        return {"host": socket.gethostname(), "pid": os.getpid()}

    def fail_orphans(self, retry=None) -> list[int]:
        """Trials left RUNNING by a sweep on this host that no longer exists -> FAIL (and, with
        heartbeats, queued again by `retry` as Optuna's stale-trial check would)."""
        host = socket.gethostname()
        failed = []
        for trial in self._trials():
            worker = trial.user_attrs.get("worker") or {}
            if trial.state != TrialState.RUNNING or worker.get("host") != host:
                continue
            if worker.get("pid") and pid_alive(int(worker["pid"])):
                continue
            try:
                self.study.tell(trial.number, state=TrialState.FAIL)
            except (ValueError, RuntimeError):  # another worker failed it first
                continue
            if retry is not None:
                retry(self.study, optuna_storage.stored_trial(self.study, trial))
            failed.append(trial.number)
        return failed
