"""One `python sweep.py -m`: baseline, trials, re-check, summary.

Order: open the study and the MLflow parent run (failing trials a crashed sweep left RUNNING) ->
measure the baseline once per study (or reuse it) -> for each trial: ask, derive the candidate,
skip it if the study already knows its result (duplicate, predicted OOM), else launch with an
early-stop bound -> tell Optuna -> re-measure the baseline and report drift -> summary.
"""

from __future__ import annotations

import json
import logging
import socket
import time
import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

import optuna
from omegaconf import DictConfig

from harness.command import redact_url_passwords
from harness.errors import ConfigError, MachineNotReady
from harness.results import Outcome, TrialResult
from sweep import provenance
from sweep.config import build_trial_spec
from sweep.console import (
    ConsoleReporter,
    console,
    summary_lines,
    summary_table,
    wall_time_line,
)
from sweep.preflight import space_hash
from sweep.search import Candidate, Objective, SearchDriver, candidate_for
from sweep.space import SearchSpace
from sweep.sweeper import SpecsweepSweeperImpl, baseline_overrides
from sweep.tracking import Tracker, resolve_sqlite_uri

log = logging.getLogger(__name__)
_FINISHED = (
    optuna.trial.TrialState.COMPLETE,
    optuna.trial.TrialState.FAIL,
    optuna.trial.TrialState.PRUNED,
)
MAX_CONSECUTIVE_ERRORS = 3


def make_sampler(cfg: DictConfig) -> optuna.samplers.BaseSampler:
    sampler = cfg.search.sampler
    if sampler.name == "random":
        return optuna.samplers.RandomSampler(seed=cfg.search.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            seed=cfg.search.seed,
            n_startup_trials=sampler.n_startup_trials,
            multivariate=True,
            group=True,  # draft tokens exist only when topk > 1: a conditional space
            constant_liar=True,
        )


class StudyRun:
    def __init__(self, sweeper: SpecsweepSweeperImpl, cfg: DictConfig, arguments, plan):
        self.sweeper = sweeper
        self.cfg = cfg
        self.arguments = list(arguments)
        self.space: SearchSpace = plan["space"]
        self.objective: Objective = plan["objective"]
        self.setup_key: str = plan["setup_key"]
        self.simulated = cfg.engine.name == "sim"
        self.reporter = ConsoleReporter(self.simulated)
        self.results: list[TrialResult] = []
        self.baseline: TrialResult | None = None
        self.baseline_check: TrialResult | None = None
        self.study_dir = Path(cfg.hydra.sweep.dir).resolve()
        self.started = time.monotonic()

    # -- the sweep -----------------------------------------------------------------------------
    def execute(self) -> list[TrialResult]:
        cfg = self.cfg
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        logging.getLogger("mlflow").setLevel(logging.WARNING)  # no migration chatter
        try:
            self.tracker = Tracker(
                resolve_sqlite_uri(cfg.tracking.mlflow_uri),
                cfg.tracking.experiment,
                Path(cfg.tracking.dir).resolve() / "mlartifacts",
            )
        except Exception as exc:  # before any launch: refuse rather than sweep untracked
            console.print(
                f"[red]error:[/red] MLflow at {redact_url_passwords(cfg.tracking.mlflow_uri)} "
                f"does not answer ({type(exc).__name__}). Start it or fix tracking.mlflow_uri.",
                soft_wrap=True,
            )
            raise SystemExit(2) from None
        self.study = optuna.create_study(
            study_name=cfg.search.study_name,
            storage=resolve_sqlite_uri(cfg.tracking.optuna_storage),
            sampler=make_sampler(cfg),
            directions=self.objective.directions,
            load_if_exists=True,
        )
        recorded = self.study.user_attrs.get("objective", cfg.search.objective)
        if recorded != cfg.search.objective or len(self.study.directions) != len(
            self.objective.directions
        ):
            console.print(
                f"[red]error:[/red] study {cfg.search.study_name!r} optimises {recorded}; its "
                f"values cannot mix with {cfg.search.objective}. Choose a new search.study_name."
            )
            raise SystemExit(2)
        self.study.set_user_attr("objective", cfg.search.objective)
        self.driver = SearchDriver(self.study, self.objective)
        if "space_hash" not in self.study.user_attrs:  # preflight warns when a later sweep differs
            self.study.set_user_attr("space_hash", space_hash(cfg.search.space))
        orphans = self.driver.fail_orphans()
        killed = self.tracker.close_orphan_sweeps()
        if orphans or killed:
            console.print(
                f"[yellow]a crashed sweep left {len(orphans)} trial(s) running "
                f"({', '.join(f'#{n}' for n in orphans) or '-'}): marked failed.[/yellow]"
            )
        for params in cfg.search.enqueue:
            self.study.enqueue_trial(dict(params), skip_if_exists=True)
        self._banner()
        self.parent = self.tracker.start_sweep(
            f"sweep-{datetime.now():%Y%m%d-%H%M%S}",
            tags={
                "specsweep.engine": cfg.engine.name,
                "specsweep.simulated": str(self.simulated).lower(),
                "specsweep.study": cfg.search.study_name,
                "specsweep.worker_host": socket.gethostname(),
                "specsweep.worker_pid": str(SearchDriver.worker()["pid"]),
            },
            params={
                "n_trials": cfg.search.n_trials,
                "sampler": cfg.search.sampler.name,
                "seed": cfg.search.seed,
                "objective": cfg.search.objective,
                "space": json.dumps(
                    {k: v.__dict__ for k, v in self.space.params.items()}, default=str
                ),
            },
        )
        status = "FAILED"
        try:
            self.baseline = self._baseline()
            self._trials()
            self._recheck_baseline()
            status = "FINISHED"
        except KeyboardInterrupt:
            status = "KILLED"
            console.print(
                "[yellow]interrupted: the server was stopped; results so far are kept.[/]"
            )
            raise
        except MachineNotReady as exc:
            console.print(f"[red]error:[/red] {exc}")
            raise SystemExit(1) from None
        finally:
            self._finish(status)
        return self.results

    # -- steps ---------------------------------------------------------------------------------
    def _banner(self) -> None:
        cfg = self.cfg
        done = len(self.study.get_trials(deepcopy=False, states=_FINISHED))
        console.rule(f"specsweep · study {cfg.search.study_name}")
        if self.simulated:
            console.print(
                "[bold yellow]SIMULATED[/] (engine=sim: numbers come from a performance model, "
                "not hardware)"
            )
        else:
            console.print(f"engine={cfg.engine.name}")
        console.print(
            f"model {cfg.model.name} (TP {cfg.model.tp}) on {cfg.hardware.gpus}x {cfg.hardware.gpu}"
            f"; drafter {cfg.drafter.name}; objective: {', '.join(self.objective.labels)}"
        )
        console.print(
            f"{cfg.search.n_trials} trials + baseline; {cfg.benchmark.warmup} warm-up + "
            f"{cfg.benchmark.runs} runs x {cfg.benchmark.requests_per_run} requests of up to "
            f"{cfg.benchmark.max_tokens} tokens"
            + (f"; the study already has {done} trials" if done else "")
        )
        console.print(f"results in {self.study_dir}", soft_wrap=True)

    @property
    def baseline_tok_s(self) -> float | None:
        if self.baseline is None or self.baseline.outcome is not Outcome.OK:
            return None
        return self.baseline.metrics.get("tok_s")

    def _baseline(self) -> TrialResult | None:
        if not self.cfg.search.baseline:
            return None
        attr = f"baseline.{self.setup_key}"
        stored = self.study.user_attrs.get(attr)
        if stored and (Path(stored["folder"]) / "result.json").is_file():
            result = TrialResult.read(Path(stored["folder"]))
            console.print(
                "[bold][baseline][/bold] reusing the study's baseline: "
                f"{result.metrics['tok_s']:.1f} tok/s ({result.folder})",
                soft_wrap=True,
            )
            return result
        self.reporter.trial_header("baseline", "", "speculation off")
        result = self._run_baseline(f"baseline_{self.setup_key}")
        if result.outcome is not Outcome.OK:
            console.print("[red]the baseline failed: trials run on, without speedups.[/red]")
            if self.objective.name == "speedup":
                raise SystemExit("search.objective=speedup cannot be computed without a baseline")
            return result
        self.study.set_user_attr(attr, {"folder": result.folder, "tok_s": result.metrics["tok_s"]})
        return result

    def _run_baseline(self, name: str) -> TrialResult:
        result = self.sweeper.launch(baseline_overrides(self.arguments, name))
        self.tracker.log_trial(
            result, parent_run_id=self.parent, study=self.cfg.search.study_name, baseline_tok_s=None
        )
        self.reporter.trial_done(result, None)
        return result

    def _trials(self) -> None:
        n, errors_in_a_row, walls = self.cfg.search.n_trials, 0, []
        for index in range(1, n + 1):
            started = time.monotonic()
            eta = (sum(walls) / len(walls)) * (n - index + 1) if walls else None
            result = self._trial(index, n, eta)
            if result.outcome not in (Outcome.DUPLICATE, Outcome.PREDICTED_OOM, Outcome.INVALID):
                walls.append(time.monotonic() - started)
            errors_in_a_row = errors_in_a_row + 1 if result.outcome is Outcome.ERROR else 0
            if errors_in_a_row >= MAX_CONSECUTIVE_ERRORS:
                console.print(
                    f"[red]{errors_in_a_row} trials in a row failed inside specsweep itself; "
                    f"stopping. Last error: {result.error}[/red]"
                )
                raise SystemExit(1)

    def _trial(self, index: int, n: int, eta: float | None) -> TrialResult:
        trial = self.study.ask()
        trial.set_user_attr("worker", SearchDriver.worker())
        values = self.space.suggest(trial)
        name = f"trial_{trial.number:04d}"
        self.reporter.trial_header(f"{index}/{n}", name, self.space.describe(values), eta)
        overrides = [
            *self.arguments,
            *self.space.overrides(values),
            f"trial.name={name}",
            f"trial.number={trial.number}",
            "trial.role=trial",
        ]
        candidate: Candidate | None = None
        source = None
        try:
            job_cfg = self.sweeper.compose(overrides)
            spec = build_trial_spec(job_cfg)
            candidate = candidate_for(spec.server, self.setup_key)
            verdict = self.driver.verdict(candidate)
            source = verdict.source
            if verdict.launch:
                result = self.sweeper.launch(overrides + self._early_stop_overrides())
            else:
                result = self._known_result(name, job_cfg, spec.params, verdict.action, source)
        except ConfigError as exc:
            result = TrialResult(
                name=name,
                role="trial",
                outcome=Outcome.INVALID,
                engine=self.cfg.engine.name,
                simulated=self.simulated,
                clock_scale=1.0,
                params=dict(values),
                error=str(exc),
            )
        except BaseException:
            trial.set_user_attr("outcome", str(Outcome.INTERRUPTED))
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            self._record_interrupted(name)
            raise
        result.number = trial.number
        self.results.append(result)
        run_id = self.tracker.log_trial(
            result,
            parent_run_id=self.parent,
            study=self.cfg.search.study_name,
            baseline_tok_s=self.baseline_tok_s,
        )
        trial.set_user_attr("folder", result.folder)
        trial.set_user_attr("mlflow_run_id", run_id)
        trial.set_user_attr("effective", result.effective)
        self.driver.tell(trial, candidate, result, self.baseline_tok_s, source)
        self.reporter.trial_done(result, self.baseline_tok_s)
        return result

    def _record_interrupted(self, name: str) -> None:
        """The trial folder says what was measured before the interruption; MLflow gets it too."""
        folder = self.study_dir / name
        if not (folder / "result.json").is_file():
            return
        result = TrialResult.read(folder)
        self.results.append(result)
        self.tracker.log_trial(
            result,
            parent_run_id=self.parent,
            study=self.cfg.search.study_name,
            baseline_tok_s=self.baseline_tok_s,
        )

    def _early_stop_overrides(self) -> list[str]:
        if not self.cfg.search.prune:
            return []
        below = self.driver.prune_below()
        if below is None:
            return []
        metric, level = self.objective.run_metric()
        if level is None:
            levels = list(self.cfg.benchmark.concurrency)
            level = 1 if 1 in levels else levels[0]
        return [
            f"trial.prune_below={below:.4f}",
            f"trial.prune_metric={metric}",
            f"trial.prune_concurrency={level}",
        ]

    def _known_result(
        self, name: str, job_cfg: DictConfig, params: dict[str, Any], action: str, source
    ) -> TrialResult:
        """A trial the study already knows the answer to: recorded, not launched."""
        folder = self.study_dir / name
        folder.mkdir(parents=True, exist_ok=True)
        # The job's own keys only: Hydra's runtime section exists only inside a launched job.
        (folder / "config.yaml").write_text(provenance.config_yaml(job_cfg))
        source_name = f"trial_{source.number:04d}"
        earlier = None
        if (
            source.user_attrs.get("folder")
            and (Path(source.user_attrs["folder"]) / "result.json").is_file()
        ):
            earlier = TrialResult.read(Path(source.user_attrs["folder"]))
        if action == "duplicate":
            outcome = Outcome.DUPLICATE
            error = f"same effective configuration as {source_name}: its result, not relaunched"
        else:
            outcome = Outcome.PREDICTED_OOM
            error = (
                f"needs at least the memory {source_name} ran out of "
                f"({source.user_attrs.get('oom_kind')} OOM): not launched"
            )
        result = TrialResult(
            name=name,
            role="trial",
            outcome=outcome,
            engine=self.cfg.engine.name,
            simulated=self.simulated,
            clock_scale=earlier.clock_scale if earlier else 1.0,
            params=dict(params),
            effective=dict(earlier.effective) if earlier else {},
            metrics=dict(earlier.metrics) if earlier and outcome is Outcome.DUPLICATE else {},
            folder=str(folder),
            error=error,
            related=source_name,
            oom_kind=source.user_attrs.get("oom_kind"),
        )
        result.write(folder)
        return result

    def _recheck_baseline(self) -> None:
        if not (self.cfg.search.remeasure_baseline and self.baseline_tok_s and self.results):
            return
        self.reporter.trial_header("baseline re-check", "", "speculation off, to detect drift")
        name = f"baseline_{self.setup_key}_recheck_{datetime.now():%Y%m%d-%H%M%S}"
        self.baseline_check = self._run_baseline(name)

    def _finish(self, status: str) -> None:
        console.print()
        console.print(summary_table(self.results, self.baseline, self.simulated))
        lines, metrics = summary_lines(self.results, self.baseline, self.baseline_check)
        everything = [
            r for r in (self.baseline, *self.results, self.baseline_check) if r is not None
        ]
        lines.append(wall_time_line(everything, time.monotonic() - self.started))
        if self.objective.multi:
            lines.append(self._pareto())
        for line in lines:
            console.print(line)
        metrics.update(
            n_trials=float(len(self.results)),
            n_launched=float(
                sum(
                    r.outcome not in (Outcome.DUPLICATE, Outcome.PREDICTED_OOM, Outcome.INVALID)
                    for r in self.results
                )
            ),
            n_oom=float(sum(r.outcome is Outcome.OOM for r in self.results)),
        )
        summary = self.study_dir / f"summary-{datetime.now():%Y%m%d-%H%M%S}.json"
        summary.parent.mkdir(parents=True, exist_ok=True)
        summary.write_text(
            json.dumps(
                {
                    "status": status,
                    "experiment": self.cfg.tracking.experiment,
                    "mlflow_parent_run_id": self.parent,  # python -m sweep.sync closes it
                    "simulated": self.simulated,
                    "objective": self.objective.name,
                    "baseline": self.baseline.to_dict() if self.baseline else None,
                    "baseline_recheck": self.baseline_check.to_dict()
                    if self.baseline_check
                    else None,
                    "metrics": metrics,
                    "trials": [r.to_dict() for r in self.results],
                },
                indent=2,
                default=str,
            )
        )
        self.tracker.end_sweep(self.parent, metrics, [summary], status)
        mlflow_db = redact_url_passwords(resolve_sqlite_uri(self.cfg.tracking.mlflow_uri))
        if self.tracker.offline:
            console.print(
                f"[bold yellow]MLflow was unreachable from mid-sweep ({self.tracker.offline}); "
                "nothing is lost, the trial folders hold it all. Upload it with:[/] python -m "
                f"sweep.sync --tracking-dir {Path(self.cfg.tracking.dir).resolve()} "
                f"--mlflow-uri {mlflow_db}",
                soft_wrap=True,
            )
        # soft_wrap: paths and commands stay on one line, ready to copy.
        console.print(f"\nTrial folders: {self.study_dir}", soft_wrap=True)
        console.print(f"Summary:       {summary}", soft_wrap=True)
        console.print(
            f"MLflow:        {mlflow_db} (experiment {self.cfg.tracking.experiment!r})",
            soft_wrap=True,
        )
        console.print(
            f"Open the UI:   make ui   (or: mlflow server --backend-store-uri {mlflow_db} "
            "--workers 1), then http://127.0.0.1:5000",
            soft_wrap=True,
        )
        if self.simulated:
            console.print("[yellow]All numbers above are SIMULATED (engine=sim).[/yellow]")
        console.print(f"[dim]sweep finished with status {status}[/dim]")

    def _pareto(self) -> str:
        front = [t for t in self.study.best_trials if t.user_attrs.get("outcome") == Outcome.OK]
        rows = [
            f"  trial_{t.number:04d}: "
            + ", ".join(
                f"{label} {v:.1f}" for label, v in zip(self.objective.labels, t.values, strict=True)
            )
            for t in sorted(front, key=lambda t: t.values[0], reverse=True)
        ]
        return "\n[bold]Pareto front[/bold] (no trial is better on both):\n" + "\n".join(
            rows or ["  (empty)"]
        )
