"""A sweep's close: the table and verdict on the console, summary-<time>.json, the parent run.

The summary file is written before MLflow hears of it: `python -m sweep.sync` closes a parent
run that a dead tracking store left open from this file (its `mlflow_parent_run_id`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import optuna
from omegaconf import DictConfig

from harness.record.layout import ResultsLayout
from harness.record.results import Outcome, TrialResult
from harness.record.stats import objective_runs, speedup_metrics
from harness.workload import load_prompts
from sweep.config.specs import build_benchmark_spec
from sweep.readout import comparisons
from sweep.readout.banner import prompt_reuse
from sweep.readout.console import console
from sweep.readout.ranking import for_objective
from sweep.readout.trials_table import summary_table
from sweep.readout.verdict import best_of, no_recommendation, summary_lines, wall_time_line
from sweep.study.answer import levels, pooling, recommendation
from sweep.study.answer.all_sweeps import launches_spent
from sweep.study.answer.equal_caps import cap_of, caps, caps_line
from sweep.study.answer.no_speculation import deployed_baseline, deployed_line
from sweep.study.answer.parent_run import sweep_artifacts
from sweep.study.answer.signals import HeldInterrupts
from sweep.study.trial.objective import Objective, infeasible
from sweep.study.trial.unlaunched import MEASURED, NOT_LAUNCHED
from sweep.tracking.runs import Tracker
from sweep.tracking.where import where_things_are


@dataclass(frozen=True)
class SweepOutcome:
    """What a sweep did, for its summary."""

    status: str  # FINISHED | FAILED | KILLED
    # the whole study's trials (sweep.study.answer.all_sweeps), every sweep
    results: list[TrialResult]
    baseline: TrialResult | None
    recheck: TrialResult | None
    total_s: float  # the whole sweep's wall time
    trials_wall_s: float | None
    slots: int
    # the sweeper's own work per phase over this sweep's trials (sweep.study.loop.work)
    sweeper_work: dict[str, float] = field(default_factory=dict)
    # The baseline at SGLang's own running-request limit, measured only when a level is above
    # the equal cap (sweep.study.loop.baseline.needs_uncapped); the levels above it compare with it.
    uncapped: TrialResult | None = None
    # This sweep's own trials, and the baselines it measured rather than reused: its wall time
    # is theirs. None: the results are all this sweep's (a caller without a study).
    this_sweep: list[TrialResult] | None = None
    measured_here: list[TrialResult] | None = None
    unreadable: list[str] = field(default_factory=list)  # trials whose folder is elsewhere
    # The resolve phase (sweep.study.loop.resolve_rounds): this sweep's relaunches (their wall time
    # is this sweep's) and its report (the verdict's state, what the study's rounds spent, and the
    # line that says what settles an unresolved verdict).
    relaunches: list[TrialResult] = field(default_factory=list)
    resolve: dict | None = None
    moment: str = ""  # KILLED: when the Ctrl-C came ("during the baseline"), for the console

    @property
    def own(self) -> list[TrialResult]:
        return self.results if self.this_sweep is None else self.this_sweep

    @property
    def earlier(self) -> int:
        return len(self.results) - len(self.own)


def pareto_lines(study: optuna.Study, objective: Objective) -> str:
    front = [t for t in study.best_trials if t.user_attrs.get("outcome") == Outcome.OK]
    rows = [
        f"  trial_{t.number:04d}: "
        + ", ".join(f"{label} {v:.1f}" for label, v in zip(objective.labels, t.values, strict=True))
        for t in sorted(front, key=lambda t: t.values[0], reverse=True)
    ]
    return "\n[bold]Pareto front[/bold] (no trial is better on both):\n" + "\n".join(
        rows or ["  (empty)"]
    )


def sweep_metrics(done: SweepOutcome, metrics: dict[str, float]) -> dict[str, float]:
    """The parent run's metrics: the verdict's numbers and what the sweep launched."""
    results = done.results
    metrics.update(
        n_trials=float(len(results)),
        n_trials_this_sweep=float(len(done.own)),
        n_launched=float(sum(r.outcome not in NOT_LAUNCHED for r in results)),
        n_oom=float(sum(r.outcome is Outcome.OOM for r in results)),
        slots=float(done.slots),
    )
    if done.trials_wall_s is not None:
        metrics["trials_wall_s"] = done.trials_wall_s
    metrics.update(done.sweeper_work)
    return metrics


def speedups(done: SweepOutcome) -> dict[str, dict[str, float]]:
    """Each measured trial's speedup_vs_baseline with its paired 95% interval (_ci95_low/_high;
    harness.record.stats.paired_ratio): run r of a trial and of the baseline sent the same
    prompts."""
    base = done.baseline
    if base is None or base.outcome is not Outcome.OK or "tok_s" not in base.metrics:
        return {}
    found = {}
    for r in done.results:
        if r.outcome in (Outcome.OK, Outcome.PRUNED) and "tok_s" in r.metrics:
            found[r.name] = speedup_metrics(
                r.metrics["tok_s"], r.runs, base.metrics["tok_s"], objective_runs(base.runs)
            )
    return found


def scope_line(done: SweepOutcome) -> str:
    """What the table and the verdict below read: the study, every sweep of it."""
    n = len(done.results)
    line = f"[bold]The study's {n} trial{'' if n == 1 else 's'}[/bold]"
    if done.earlier:
        line += (
            f" ({done.earlier} from earlier sweeps or other workers, {len(done.own)} this sweep)"
        )
    if done.unreadable:
        line += (
            f"; {len(done.unreadable)} measured on another node are not here "
            f"({', '.join(done.unreadable[:5])}): MLflow has them"
        )
    return line + ":"


def write_summary(
    path: Path,
    cfg: DictConfig,
    done: SweepOutcome,
    parent: str | None,
    metrics: dict,
    per_level: list[levels.LevelRow] | None = None,
    objective: Objective | None = None,
    compared: comparisons.Comparisons | None = None,
    decision: recommendation.Decision | None = None,
    reuse: dict[str, dict[str, int]] | None = None,
    no_answer: str | None = None,
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "status": done.status,
        "experiment": cfg.tracking.experiment,
        "mlflow_parent_run_id": parent,  # python -m sweep.sync closes it
        "simulated": cfg.engine.name == "sim",
        "objective": cfg.search.objective,
        "baseline": done.baseline.to_dict() if done.baseline else None,
        "baseline_recheck": done.recheck.to_dict() if done.recheck else None,
        "baseline_uncapped": done.uncapped.to_dict() if done.uncapped else None,
        # {"baseline", "trials", "equal"}: the servers' max_running_requests
        # (sweep.study.answer.equal_caps)
        "max_running_requests": caps(done.results, done.baseline),
        "metrics": metrics,
        "speedups": speedups(done),
        # Without a baseline: each trial against search.reference, and the one-knob pairs
        # (sweep.readout.comparisons), run for run
        "comparisons": compared.as_dict() if compared is not None else None,
        # The load profile and latency limits the study ranked by (sweep.study.trial.objective)
        "objective_detail": objective_detail(objective) if objective else None,
        # The recommendation per concurrency level (sweep.study.answer.levels)
        "levels": levels.as_dict(per_level or []),
        # The study's one answer (sweep.study.answer.recommendation): what the console's Deploy
        # line, the report's headline, the parent run's tags and sweep.reproduce's default say
        # (or, where the sweep has none, `deploy: null` and the line that says why)
        "deploy": decision.as_dict()
        if decision is not None
        else ({"deploy": None, "line": no_answer} if no_answer else None),
        # Levels whose runs could not all have their own prompts (sweep.readout.banner)
        "prompt_reuse": reuse or {},
        # The resolve phase: whether the answer is settled, the rounds the study spent on it
        # (sweep.study.loop.resolve_rounds), and what settles it where it is not
        "resolve": _plain_resolve(done.resolve),
        "trials": [r.to_dict() for r in done.results],
    }
    path.write_text(json.dumps(data, indent=2, default=str))


def study_prompt_reuse(cfg: DictConfig) -> dict[str, dict[str, int]]:
    spec = build_benchmark_spec(cfg)
    return prompt_reuse(spec, load_prompts(spec.prompts, spec.seed, spec.categories))


def _plain_resolve(report: dict | None) -> dict | None:
    if report is None:
        return None
    return {**report, "line": recommendation.plain(report["line"]) if report.get("line") else None}


def resolve_tags(report: dict | None) -> dict[str, str]:
    """The parent run's `specsweep.resolve`: resolved, or unresolved with why."""
    if report is None:
        return {}
    why = report.get("unresolved")
    return {"specsweep.resolve": f"unresolved: {why}"[:5000] if why else "resolved"}


def objective_detail(objective: Objective) -> dict:
    return {
        "name": objective.name,
        "metrics": objective.metrics,
        "levels": objective.levels,
        "weights": objective.weights,
        "slo": objective.slo,
        "slo_level": objective.slo_level,
    }


def finish(
    cfg: DictConfig,
    done: SweepOutcome,
    study: optuna.Study,
    objective: Objective,
    tracker: Tracker,
    parent: str | None,
    study_dir: Path,
    storage_url: str,
    view: str | None = None,
    resume: str = "",
) -> str:
    """The close: the table, the summary file, the report, the parent run, then the verdict and
    where everything is. Returns the sweep's status, KILLED where a Ctrl-C cut the close short.

    `view`: the key of the study's view in MLflow's UI (sweep.tracking.view), None where none was
    written. `resume`: the line that continues the study, printed right under the verdict's place
    when there is no answer (sweep.readout.verdict.no_recommendation)."""
    # The table and what the close will say are worked out with a Ctrl-C held back: one that
    # arrives meanwhile lands where the close can still record that there is no answer.
    with HeldInterrupts() as held:
        simulated = cfg.engine.name == "sim"
        console.print()
        over = infeasible(done.results, objective)
        ranking = for_objective(objective)
        compared = None
        if done.baseline is None:  # the trials are compared with each other instead
            compared = comparisons.compare(
                done.results, dict(cfg.search.get("reference") or {}), cfg.search.space, ranking
            )
        # The answer compares with the baseline a deployment runs at each level
        # (sweep.study.answer.no_speculation)
        judged = deployed_baseline(done.baseline, done.uncapped)
        table = summary_table(
            done.results,
            judged,
            simulated,
            notes=over,
            ranking=ranking,
            reference=compared.reference if compared is not None else None,
        )
        request_caps = caps(done.results, done.baseline)
        table.caption = caps_line(request_caps)  # when the caps differ
        if done.results or done.baseline is not None:
            console.print(scope_line(done))
            console.print(table)
        else:  # an empty table says less than one line
            console.print("[bold]The study has no trial and no baseline measured yet.[/bold]")
        rows = levels.per_level(
            done.results,
            done.baseline,
            objective,
            uncapped=done.uncapped,
            cap=cap_of(done.baseline) if done.baseline is not None else None,
        )
        if len(rows) > 1 or objective.slo:
            equal = request_caps["baseline"] if request_caps and request_caps["equal"] else None
            console.print(levels.table(rows, simulated, objective.slo_text(), equal))
        status = done.status
        answered = status != "KILLED" and any(r.outcome in MEASURED for r in done.results)
        lines, metrics = summary_lines(
            done.results,
            judged,
            done.recheck,
            exclude=set(over),
            ranking=ranking,
            drift_from=pooling.first_launch(done.baseline),  # runs 1-N, as the re-check sends them
            settled=answered,
        )
        if which := deployed_line(done.baseline, done.uncapped):
            lines.insert(0, which)
        if compared is not None:
            best = best_of(done.results, set(over), ranking)
            lines += comparisons.lines(compared, best, ranking)
            metrics.update(comparisons.metrics(best, compared.vs_reference))
        if over:
            lines.append(
                f"Infeasible (over the latency limits {objective.slo_text()}; never ranked best): "
                + ", ".join(sorted(over))
            )
        decision = recommendation.decide(
            done.results,
            judged,
            ranking,
            rows,
            set(over),
            str(cfg.tracking.experiment),
            str(cfg.tracking.dir),
        )
        if decision.tied_with:  # the Best line carries its caveat itself
            lines = [
                f"{line}; {recommendation.tie_text(decision.tied_with)}"
                if "Best:" in line
                else line
                for line in lines
            ]
        baselines = (
            [done.baseline, done.uncapped] if done.measured_here is None else done.measured_here
        )
        this_sweep = [
            r for r in (*baselines, *done.own, *done.relaunches, done.recheck) if r is not None
        ]
        lines.append(wall_time_line(this_sweep, done.total_s))
        if objective.multi:
            lines.append(pareto_lines(study, objective))
        metrics = sweep_metrics(done, {**metrics, **levels.metrics(rows)})
        metrics["n_infeasible"] = float(len(over))
        if done.resolve is not None:  # what the study's resolve rounds spent
            metrics.update({f"resolve_{k}": v for k, v in done.resolve["spent"].items()})
        summary = ResultsLayout.summary_file(study_dir)
        reuse = study_prompt_reuse(cfg)

    def unanswered() -> str:
        return no_recommendation(
            done.moment if status == "KILLED" else "", launches_spent(study), cfg.search
        )

    def record(report: bool) -> list:
        """What a later reader of the study finds says the answer the console is about to say,
        or that there is none: the summary file, the report (which reads it), the parent run."""
        write_summary(
            summary, cfg, replace(done, status=status), parent, metrics, rows, objective,
            compared, decision if answered else None, reuse, None if answered else unanswered(),
        )  # fmt: skip
        artifacts = []
        if report:
            artifacts = sweep_artifacts(cfg, study, objective, study_dir, summary, rows)
        tags = {**recommendation.tags(decision), **resolve_tags(done.resolve)}
        if not answered:
            tags = {"specsweep.deploy": "", "specsweep.deploy_line": unanswered()}
        artifacts = [summary, *artifacts]
        tracker.end_sweep(parent, metrics, artifacts, status, tags)
        return artifacts

    try:
        held.raise_if_caught()
        artifacts = record(report=True)
    except KeyboardInterrupt:  # the close cut short: recorded as interrupted, without an answer
        status, answered = "KILLED", False
        if not done.moment:
            done = replace(done, moment="while closing")
        console.print(
            "[yellow]interrupted while closing: the report was not finished; every "
            "measurement is in the trial folders.[/]"
        )
        artifacts = record(report=False)
    # Recorded: what follows only says it, so a Ctrl-C now waits the few lines it takes.
    with HeldInterrupts():
        _say(lines, answered, decision, done, status, unanswered, resume)
        report = next(
            (p for p, folder in artifacts_in(artifacts, "report") if p.suffix == ".html"), None
        )
        where_things_are(cfg, tracker, study_dir, summary, storage_url, report, view)
        console.print(f"[dim]sweep finished with status {status}[/dim]")
    return status


def _say(lines, answered, decision, done, status, unanswered, resume) -> None:
    """The lines under the table: the verdict, or that there is none and how to get one."""
    if not answered:
        lines = [line.replace("[bold]Best:[/bold]", "[bold]Best so far:[/bold]") for line in lines]
    for line in lines:
        console.print(line, soft_wrap=True)
    if answered:
        console.print("\n" + decision.line(), soft_wrap=True)
        if done.resolve is not None and done.resolve.get("line"):  # and what would settle it
            console.print(done.resolve["line"], soft_wrap=True)
    else:  # no verdict without an answer, and straight under it how to get one
        console.print(f"\n[bold]{unanswered()}[/bold]", soft_wrap=True)
        if status == "KILLED" and resume:
            console.print(resume, soft_wrap=True)


def artifacts_in(artifacts: list, folder: str) -> list[tuple[Path, str]]:
    return [a for a in artifacts if isinstance(a, tuple) and a[1] == folder]
