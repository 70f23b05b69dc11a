"""One `python sweep.py -m`: baseline, trials, re-check, summary.

Order: open the study and the MLflow parent run (failing trials a crashed sweep left RUNNING) ->
measure the baseline once per study (or reuse it) -> for each trial: ask, derive the candidate,
skip it if the study already knows its result (duplicate, predicted OOM), else launch with an
early-stop bound -> tell Optuna -> re-measure the baseline and report drift -> summary.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import warnings
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from datetime import datetime
from pathlib import Path
from typing import Any

import optuna
from mlflow.exceptions import MlflowException
from omegaconf import DictConfig
from sqlalchemy.exc import SQLAlchemyError

from harness.errors import ConfigError, MachineNotReady
from harness.results import Outcome, TrialResult
from harness.server import stop_all
from sweep import provenance
from sweep.claims import Claims
from sweep.config import build_trial_spec
from sweep.console import (
    ConsoleReporter,
    console,
    summary_lines,
    summary_table,
    wall_time_line,
)
from sweep.preflight import space_hash
from sweep.search import Candidate, Objective, SearchDriver, Verdict, candidate_for
from sweep.slots import SlotPool
from sweep.space import SearchSpace
from sweep.storage import (
    fail_stale,
    heartbeat,
    open_storage,
    redact_url,
    stale_callback,
    storage_url,
)
from sweep.sweeper import SpecsweepSweeperImpl, baseline_overrides
from sweep.tracking import Tracker, resolve_sqlite_uri

log = logging.getLogger(__name__)
_FINISHED = (
    optuna.trial.TrialState.COMPLETE,
    optuna.trial.TrialState.FAIL,
    optuna.trial.TrialState.PRUNED,
)
MAX_CONSECUTIVE_ERRORS = 3
CLAIM_POLL_S = 0.5  # how often a worker waiting for another's evaluation looks again
LOCAL_LEASE_S = 600.0  # claims without heartbeats (sqlite): a dead sweep's expire after this


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
        self.slots: int = plan.get("slots", 1)
        self.pool: SlotPool | None = None
        if self.slots > 1:
            self.pool = SlotPool(
                plan["gpus"],
                cfg.model.tp,
                self.slots,
                Path(cfg.worker.lock_dir),
                cfg.server.host,
                cfg.server.port,
                cfg.engine.stop_grace_s,
            )
        self.stopping = threading.Event()  # set on Ctrl-C/SIGTERM: slot threads wind down
        self._lock = threading.Lock()  # results, walls and the error count across slot threads
        self.trials_wall_s: float | None = None
        self._next_index, self._walls, self._errors = 0, [], 0
        self._ask_lock = threading.Lock()

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
            detail = str(exc).splitlines()[0] if isinstance(exc, MlflowException) else ""
            console.print(
                f"[red]error:[/red] MLflow at {redact_url(cfg.tracking.mlflow_uri)} does not "
                f"answer ({type(exc).__name__}{': ' + redact_url(detail)[:300] if detail else ''})"
                ". Start the tracking server or fix tracking.mlflow_uri.",
                soft_wrap=True,
            )
            raise SystemExit(2) from None
        try:
            storage = open_storage(cfg)
            self.storage_url = storage_url(storage)
            self.study = optuna.create_study(
                study_name=cfg.search.study_name,
                storage=storage,
                sampler=make_sampler(cfg),
                directions=self.objective.directions,
                load_if_exists=True,
            )
        except (SQLAlchemyError, ImportError, ValueError) as exc:
            reason = redact_url(str(exc).strip().splitlines()[0])
            console.print(
                f"[red]error:[/red] cannot open the Optuna storage "
                f"{redact_url(cfg.tracking.optuna_storage)}: {reason}. Start it (python -m "
                "sweep.services start) or fix tracking.optuna_storage.",
                soft_wrap=True,
            )
            raise SystemExit(2) from None
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
        interval = cfg.tracking.heartbeat_interval
        self.claims = Claims(
            storage_url(storage),
            cfg.search.study_name,
            owner=f"{socket.gethostname()}:{os.getpid()}",
            lease_s=float(cfg.tracking.grace_period or 2 * interval) if interval else LOCAL_LEASE_S,
        )
        self.claims.start(interval_s=float(interval or 30))
        orphans = self.driver.fail_orphans(stale_callback(self.study))
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
                "specsweep.optuna_storage": redact_url(self.storage_url),
                "specsweep.slots": str(self.slots),
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
            self.claims.close()
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
        if self.pool is not None:
            groups = "; ".join(",".join(g) for g in self.pool.groups)
            console.print(f"{self.slots} GPU slots side by side (GPUs {groups})")
        console.print(f"results in {self.study_dir}", soft_wrap=True)

    @property
    def baseline_tok_s(self) -> float | None:
        if self.baseline is None or self.baseline.outcome is not Outcome.OK:
            return None
        return self.baseline.metrics.get("tok_s")

    def _baseline(self) -> TrialResult | None:
        """Once per study: the worker that claims it measures, the others wait and reuse it."""
        if not self.cfg.search.baseline:
            return None
        attr = f"baseline.{self.setup_key}"
        announced = False
        while True:
            reused = self._stored_baseline(attr)
            if reused is not None:
                return reused
            if self.claims.try_claim(attr):
                try:
                    return self._reused_or_measured(attr)
                finally:
                    self.claims.release(attr)
            if not announced:
                console.print("[bold][baseline][/bold] another worker is measuring it; waiting")
                announced = True
            self._sleep(CLAIM_POLL_S)

    def _stored_baseline(self, attr: str) -> TrialResult | None:
        stored = self.study.user_attrs.get(attr)
        if not stored:
            return None
        if (Path(stored["folder"]) / "result.json").is_file():
            result = TrialResult.read(Path(stored["folder"]))
        elif "result" in stored:  # measured on another node: its folder is not here
            result = TrialResult.from_dict(stored["result"])
        else:
            return None
        console.print(
            "[bold][baseline][/bold] reusing the study's baseline: "
            f"{result.metrics['tok_s']:.1f} tok/s ({result.folder})",
            soft_wrap=True,
        )
        return result

    def _reused_or_measured(self, attr: str) -> TrialResult:
        reused = self._stored_baseline(attr)  # told just before its claim was released?
        if reused is not None:
            return reused
        self.reporter.trial_header("baseline", "", "speculation off")
        result = self._run_baseline(f"baseline_{self.setup_key}")
        if result.outcome is not Outcome.OK:
            console.print("[red]the baseline failed: trials run on, without speedups.[/red]")
            if self.objective.name == "speedup":
                raise SystemExit("search.objective=speedup cannot be computed without a baseline")
            return result
        self.study.set_user_attr(
            attr,
            {"folder": result.folder, "tok_s": result.metrics["tok_s"], "result": result.to_dict()},
        )
        return result

    def _sleep(self, seconds: float) -> None:
        if self.stopping.wait(seconds):
            raise KeyboardInterrupt("the sweep is stopping")

    def _run_baseline(self, name: str) -> TrialResult:
        result = self._launch(baseline_overrides(self.arguments, name), name)
        self.tracker.log_trial(
            result, parent_run_id=self.parent, study=self.cfg.search.study_name, baseline_tok_s=None
        )
        self._reporter(name).trial_done(result, None)
        return result

    def _reporter(self, name: str) -> ConsoleReporter:
        return ConsoleReporter(self.simulated, prefix=name if self.pool is not None else None)

    def _launch(self, overrides: list[str], name: str) -> TrialResult:
        """Through Hydra's launcher, or in a GPU slot (its GPUs and port) beside other trials."""
        if self.pool is None:
            return self.sweeper.launch(overrides)
        with self.pool.slot() as slot:
            if self.stopping.is_set():
                raise KeyboardInterrupt("the sweep is stopping")
            placed = [
                *overrides,
                f"server.port={slot.port}",
                f"trial.gpus='{slot.cuda_visible_devices}'",
                f"trial.pid_file={slot.pid_file}",
            ]
            return self.sweeper.launch_in_thread(placed, self._reporter(name))

    def _trials(self) -> None:
        started = time.monotonic()
        try:
            if self.pool is None:
                self._trial_loop()
            else:
                self._trials_side_by_side()
        finally:
            self.trials_wall_s = time.monotonic() - started

    def _trial_loop(self) -> None:
        """Take the next trial until n_trials are done; one loop per GPU slot."""
        n = self.cfg.search.n_trials
        while not self.stopping.is_set():
            with self._lock:
                self._next_index += 1
                index, walls = self._next_index, list(self._walls)
            if index > n:
                return
            eta = (sum(walls) / len(walls)) * (n - index + 1) / self.slots if walls else None
            started = time.monotonic()
            result = self._trial(index, n, eta)
            with self._lock:
                if result.outcome not in (
                    Outcome.DUPLICATE,
                    Outcome.PREDICTED_OOM,
                    Outcome.INVALID,
                ):
                    self._walls = [*walls, time.monotonic() - started]
                self._errors = self._errors + 1 if result.outcome is Outcome.ERROR else 0
            if self._errors >= MAX_CONSECUTIVE_ERRORS:
                console.print(
                    f"[red]{self._errors} trials in a row failed inside specsweep itself; "
                    f"stopping. Last error: {result.error}[/red]"
                )
                self.stopping.set()
                raise SystemExit(1)

    def _trials_side_by_side(self) -> None:
        with ThreadPoolExecutor(self.slots, thread_name_prefix="slot") as threads:
            pending = {threads.submit(self._trial_loop) for _ in range(self.slots)}
            failed: BaseException | None = None
            try:
                while pending and failed is None:
                    # Short waits: the main thread must stay free to take Ctrl-C / SIGTERM.
                    done, pending = wait(pending, timeout=0.5, return_when=FIRST_EXCEPTION)
                    failed = next((f.exception() for f in done if f.exception()), None)
            except BaseException:
                self._stop_slots(pending)
                raise
            if failed is not None:
                self._stop_slots(pending)
                raise failed

    def _stop_slots(self, pending) -> None:
        self.stopping.set()
        stop_all()  # slot threads see their servers gone and record the interruption
        wait(pending)

    def _trial(self, index: int, n: int, eta: float | None) -> TrialResult:
        # One ask at a time in this worker: sqlite has no SELECT ... FOR UPDATE, so two threads
        # could both pop the same queued trial (PostgreSQL locks the row across workers).
        with self._ask_lock:
            fail_stale(self.study)  # a dead worker's trials: failed and queued again for us
            trial = self.study.ask()
        with heartbeat(self.study, trial):
            return self._run_trial(trial, index, n, eta)

    def _run_trial(self, trial: optuna.Trial, index: int, n: int, eta: float | None):
        trial.set_user_attr("worker", SearchDriver.worker())
        values = self.space.suggest(trial)
        name = f"trial_{trial.number:04d}"
        retried = self.study._storage.get_trial(trial._trial_id).system_attrs.get("failed_trial")
        note = f"  [dim](retry of trial_{retried:04d})[/dim]" if retried is not None else ""
        self.reporter.trial_header(f"{index}/{n}", name, self.space.describe(values) + note, eta)
        overrides = [
            *self.arguments,
            *self.space.overrides(values),
            f"trial.name={name}",
            f"trial.number={trial.number}",
            "trial.role=trial",
        ]
        candidate: Candidate | None = None
        source = None
        claimed = None
        try:
            with self.sweeper._compose_lock:
                job_cfg = self.sweeper.compose(overrides)
            spec = build_trial_spec(job_cfg)
            candidate = candidate_for(spec.server, self.setup_key)
            verdict = self._verdict_or_claim(candidate, trial.number, name)
            source = verdict.source
            if verdict.launch:
                claimed = candidate.key
                result = self._launch(overrides + self._early_stop_overrides(), name)
                if self.stopping.is_set() and result.outcome is not Outcome.OK:
                    result.outcome, result.error = Outcome.INTERRUPTED, "the sweep was stopped"
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
            if claimed:
                self.claims.release(claimed)
            self._record_interrupted(name)
            raise
        result.number = trial.number
        with self._lock:
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
        # Told before the claim goes: a waiting worker then finds the result, never neither.
        self.driver.tell(trial, candidate, result, self.baseline_tok_s, source)
        if claimed:
            self.claims.release(claimed)
        self._reporter(name).trial_done(result, self.baseline_tok_s)
        if result.outcome is Outcome.INTERRUPTED:
            raise KeyboardInterrupt("the sweep was stopped")
        return result

    def _verdict_or_claim(self, candidate: Candidate, number: int, name: str) -> Verdict:
        """Skip what the study knows; launch only what this worker claimed; else wait.

        Another worker (or slot) evaluating the same candidate holds its claim: wait for its
        result, which then makes this trial a duplicate. If that evaluation fails, or its worker
        dies (the lease expires), this trial claims the candidate and launches it.
        """
        announced = False
        while True:
            verdict = self.driver.verdict(candidate)
            if not verdict.launch:
                return verdict
            if self.claims.try_claim(candidate.key, number):
                verdict = self.driver.verdict(candidate)  # told just before it was released?
                if not verdict.launch:
                    self.claims.release(candidate.key)
                return verdict
            if not announced:
                holder = self.claims.holder(candidate.key) or {}
                other = f"trial_{holder['trial']:04d}" if holder.get("trial") is not None else "?"
                console.print(
                    f"    {name}: same configuration as {other}, being evaluated "
                    f"({holder.get('owner', 'another worker')}); waiting for its result"
                )
                announced = True
            self._sleep(CLAIM_POLL_S)

    def _record_interrupted(self, name: str) -> None:
        """The trial folder says what was measured before the interruption; MLflow gets it too."""
        folder = self.study_dir / name
        if not (folder / "result.json").is_file():
            return
        result = TrialResult.read(folder)
        with self._lock:
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
            slots=float(self.slots),
        )
        if self.trials_wall_s is not None:
            metrics["trials_wall_s"] = self.trials_wall_s
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
        mlflow_uri = redact_url(resolve_sqlite_uri(self.cfg.tracking.mlflow_uri))
        if self.tracker.offline:
            console.print(
                f"[bold yellow]MLflow was unreachable from mid-sweep ({self.tracker.offline}); "
                "nothing is lost, the trial folders hold it all. Upload it with:[/] python -m "
                f"sweep.sync --tracking-dir {Path(self.cfg.tracking.dir).resolve()} "
                f"--mlflow-uri {mlflow_uri}",
                soft_wrap=True,
            )
        # soft_wrap: paths and commands stay on one line, ready to copy.
        console.print(f"\nTrial folders: {self.study_dir}", soft_wrap=True)
        console.print(f"Summary:       {summary}", soft_wrap=True)
        console.print(
            f"MLflow:        {mlflow_uri} (experiment {self.cfg.tracking.experiment!r})",
            soft_wrap=True,
        )
        if mlflow_uri.startswith(("http://", "https://")):
            console.print(f"Open the UI:   {mlflow_uri}", soft_wrap=True)
            console.print(
                f"Optuna study:  {self.cfg.search.study_name!r} in {redact_url(self.storage_url)}",
                soft_wrap=True,
            )
        else:
            console.print(
                f"Open the UI:   make ui   (or: mlflow server --backend-store-uri {mlflow_uri} "
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
