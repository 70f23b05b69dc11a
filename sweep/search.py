"""The decisions of a search, apart from Hydra and launching: what to skip, what to tell Optuna.

Before a trial is launched its *candidate* (the configuration as SGLang will run it, after its
own adjustments) is compared with what the study already knows:
- the same candidate was measured (ok, oom, pruned) -> `duplicate`, not launched, same result;
- it needs at least the memory of a candidate that ran out of it -> `predicted_oom`, not
  launched. The direction depends on how memory ran out: a GPU OOM (activations/CUDA graphs did
  not fit) repeats with the same or higher mem_fraction_static and the same or more draft tokens
  and CUDA-graph batch; "not enough memory" for the KV pool repeats with the same or lower
  fraction; the OOM killer (HiCache pool > host RAM) repeats with the same or larger pool.
OOM and predicted-OOM trials are told to Optuna as constraint violations (`oom` > 0), so the
sampler learns where memory runs out; the objective value of an infeasible trial is never used
to rank it (0 tok/s is what it served). Everything is read back from the study's trials, so a
resumed sweep (or another worker) makes the same decisions.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from dataclasses import asdict, dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from harness.procs import pid_alive
from harness.results import Outcome, TrialResult
from harness.sglang import (
    SPEC_MAX_RUNNING_REQUESTS,
    canonical_algorithm,
    captured_graph_max_bs,
    forced_draft_tokens,
)
from harness.spec import ServerSpec

KNOWN = (Outcome.OK, Outcome.OOM, Outcome.PRUNED)  # outcomes worth reusing


@dataclass(frozen=True)
class Candidate:
    """A launch as SGLang will run it. None means "SGLang's own default" (not known before)."""

    context: str  # hash of what is not searched: model, engine, hardware, benchmark, ...
    drafter: str | None
    algorithm: str | None
    steps: int | None
    topk: int | None
    draft_tokens: int | None
    mem_fraction_static: float | None
    hicache_size: int
    cuda_graph: bool
    cuda_graph_max_bs: int | None
    disable_overlap_schedule: bool
    max_running_requests: int | None

    @property
    def key(self) -> str:
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Candidate:
        return cls(**data)


def candidate_for(server: ServerSpec, context: str) -> Candidate:
    """Apply SGLang's adjustments that are known without launching (reference/sglang.md §2)."""
    algorithm = canonical_algorithm(server.speculative_algorithm)
    steps, topk, draft = (
        server.speculative_num_steps,
        server.speculative_eagle_topk,
        server.speculative_num_draft_tokens,
    )
    forced = forced_draft_tokens(steps, topk)
    if forced is not None:
        draft = forced
    max_running = server.max_running_requests
    if max_running is None and algorithm is not None:
        max_running = SPEC_MAX_RUNNING_REQUESTS  # SGLang's reset with speculation
    graph_bs = captured_graph_max_bs(server.cuda_graph_max_bs, max_running)
    return Candidate(
        context=context,
        drafter=server.speculative_draft_model_path,
        algorithm=algorithm,
        steps=steps,
        topk=topk,
        draft_tokens=draft,
        mem_fraction_static=server.mem_fraction_static,
        hicache_size=server.hicache_size,
        cuda_graph=not server.disable_cuda_graph,
        cuda_graph_max_bs=graph_bs,
        disable_overlap_schedule=server.disable_overlap_schedule,
        max_running_requests=max_running,
    )


def _at_least(value, reference) -> bool:
    """value >= reference, where None ("SGLang's default") only compares with None."""
    if value is None or reference is None:
        return value is None and reference is None
    return value >= reference


def predicts_oom(candidate: Candidate, oom: Candidate, kind: str | None) -> bool:
    """Does `candidate` need at least the memory that `oom` ran out of?"""
    same_setup = (
        candidate.context == oom.context
        and candidate.drafter == oom.drafter
        and candidate.algorithm == oom.algorithm
        and candidate.cuda_graph == oom.cuda_graph
        and candidate.max_running_requests == oom.max_running_requests
    )
    if not same_setup:
        return False
    if kind == "gpu":
        return (
            _at_least(candidate.mem_fraction_static, oom.mem_fraction_static)
            and (candidate.draft_tokens or 1) >= (oom.draft_tokens or 1)
            and _at_least(candidate.cuda_graph_max_bs, oom.cuda_graph_max_bs)
        )
    if kind == "kv_pool":
        return _at_least(oom.mem_fraction_static, candidate.mem_fraction_static)
    if kind == "host":
        return oom.hicache_size > 0 and candidate.hicache_size >= oom.hicache_size
    return False


@dataclass(frozen=True)
class Verdict:
    action: str  # "launch", "duplicate" or "predicted_oom"
    source: FrozenTrial | None = None

    @property
    def launch(self) -> bool:
        return self.action == "launch"


class Objective:
    """What the study optimises: `tok_s`, `speedup`, `throughput` or `tok_s+throughput`."""

    CHOICES = ("tok_s", "speedup", "throughput", "tok_s+throughput")

    def __init__(self, name: str, throughput_concurrency: int):
        if name not in self.CHOICES:
            raise ValueError(f"search.objective={name!r}: use one of {', '.join(self.CHOICES)}")
        self.name = name
        self.concurrency = throughput_concurrency
        throughput = f"output_tok_s_c{throughput_concurrency}"
        self.metrics = {
            "tok_s": ["tok_s"],
            "speedup": ["tok_s"],
            "throughput": [throughput],
            "tok_s+throughput": ["tok_s", throughput],
        }[name]
        self.labels = {
            "tok_s": ["single-stream tok/s"],
            "speedup": ["speedup vs baseline"],
            "throughput": [f"throughput tok/s @ {throughput_concurrency}"],
            "tok_s+throughput": [
                "single-stream tok/s",
                f"throughput tok/s @ {throughput_concurrency}",
            ],
        }[name]

    @property
    def multi(self) -> bool:
        return len(self.metrics) > 1

    @property
    def directions(self) -> list[str]:
        return ["maximize"] * len(self.metrics)

    def values(self, result: TrialResult, baseline_tok_s: float | None) -> list[float] | None:
        values = [result.metrics.get(m) for m in self.metrics]
        if any(v is None for v in values):
            return None
        if self.name == "speedup":
            if not baseline_tok_s:
                return None
            values = [values[0] / baseline_tok_s]
        return [float(v) for v in values]  # type: ignore[arg-type]

    def run_metric(self) -> tuple[str, int | None]:
        """The per-run value early stopping watches (RunSummary field, concurrency level)."""
        if self.metrics[0] == "tok_s":
            return "decode_tok_s", None
        return "output_tok_s", self.concurrency


class SearchDriver:
    def __init__(self, study: optuna.Study, objective: Objective):
        self.study = study
        self.objective = objective

    # -- what the study knows ----------------------------------------------------------------
    def _trials(self) -> list[FrozenTrial]:
        return self.study.get_trials(deepcopy=False)

    def verdict(self, candidate: Candidate) -> Verdict:
        known = [
            t
            for t in self._trials()
            if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
            and t.user_attrs.get("candidate_key") == candidate.key
            and t.user_attrs.get("outcome") in {*KNOWN, Outcome.DUPLICATE, Outcome.PREDICTED_OOM}
        ]
        if known:
            return Verdict("duplicate", known[0])
        for trial in self._trials():
            attrs = trial.user_attrs
            if attrs.get("outcome") != Outcome.OOM or "candidate" not in attrs:
                continue
            oom = Candidate.from_dict(trial.user_attrs["candidate"])
            if predicts_oom(candidate, oom, trial.user_attrs.get("oom_kind")):
                return Verdict("predicted_oom", trial)
        return Verdict("launch")

    def prune_below(self) -> float | None:
        """The best trial's lower 95% bound on the watched metric (single objective only)."""
        if self.objective.multi:
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
        attrs: dict[str, Any] = {"outcome": str(result.outcome)}
        if candidate is not None:
            attrs["candidate"] = asdict(candidate)
            attrs["candidate_key"] = candidate.key
        if result.oom_kind:
            attrs["oom_kind"] = result.oom_kind
        if result.related:
            attrs["related"] = result.related
        metric = self.objective.metrics[0]
        if metric in result.metrics:
            attrs["metric_name"] = metric
            attrs["metric"] = result.metrics[metric]
            if f"{metric}_ci95" in result.metrics:
                attrs["metric_ci95"] = result.metrics[f"{metric}_ci95"]
        for key, value in attrs.items():
            trial.set_user_attr(key, value)

        outcome = result.outcome
        if outcome is Outcome.DUPLICATE and source is not None:
            return self._tell_like(trial, source)
        if outcome in (Outcome.OOM, Outcome.PREDICTED_OOM):
            trial.set_constraint("oom", 1.0)
            self.study.tell(trial, [0.0] * len(self.objective.metrics))
            return TrialState.COMPLETE
        values = self.objective.values(result, baseline_tok_s)
        if outcome is Outcome.PRUNED and not self.objective.multi:
            self._report_runs(trial, result)
            self.study.tell(trial, state=TrialState.PRUNED)
            return TrialState.PRUNED
        if outcome is Outcome.OK and values is not None:
            trial.set_constraint("oom", 0.0)
            self.study.tell(trial, values)
            return TrialState.COMPLETE
        # crash, timeout, invalid, error, interrupted: a failure, not a penalty value
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
                retry(self.study, self.study._storage.get_trial(trial._trial_id))
            failed.append(trial.number)
        return failed
