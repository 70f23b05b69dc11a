"""The trials of a sweep: ask Optuna, skip what the study knows, launch, tell.

One trial: ask -> suggest the values -> compose the job and derive its candidate -> verdict (a
duplicate or predicted OOM is recorded, not launched; a candidate another worker is evaluating is
waited for) -> launch with an early-stop bound -> log to MLflow -> tell Optuna -> release the
claim. One loop takes trials until `search.n_trials` servers were started (proposals that launch
nothing are not counted), or, with
`search.budget_gpu_hours`, until the study has spent it (`sweep.study.loop.budget`); with GPU slots
one loop runs per slot, side by side, each asking for its own trials.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path

import optuna

from harness.errors import ConfigError
from harness.measure import lossless
from harness.record.results import Outcome, TrialResult
from harness.server.process import stop_all
from sweep.config.specs import build_trial_spec
from sweep.readout.console import console
from sweep.study.answer import pooling
from sweep.study.answer.all_sweeps import study_results
from sweep.study.answer.equal_caps import cap_of
from sweep.study.answer.settled import slower_best, slower_per_level
from sweep.study.loop import optuna_storage, screens
from sweep.study.loop.baseline import Baseline
from sweep.study.loop.budget import MAX_IDLE_PROPOSALS, Budget, spent
from sweep.study.loop.decisions import SearchDriver, Verdict
from sweep.study.loop.session import CLAIM_POLL_S, StudySession
from sweep.study.loop.trial_count import trials_to_run
from sweep.study.loop.work import SweeperWork
from sweep.study.model.observations import POOLED, SCREENED
from sweep.study.model.stopping import Below
from sweep.study.model.watch import Forecast, ModelWatch
from sweep.study.trial import unlaunched
from sweep.study.trial.candidates import Candidate, candidate_for

MAX_CONSECUTIVE_ERRORS = 3


class TrialLoop:
    def __init__(self, session: StudySession, baseline: Baseline, uncapped: Baseline | None = None):
        self.session = session
        self.baseline = baseline
        self.uncapped = uncapped  # above the equal cap, what the per-level answer compares with
        self.wall_s: float | None = None  # the trials' wall time, once they ran
        self._lock = threading.Lock()  # the index, the walls and the error count across slots
        self._ask_lock = threading.Lock()
        self._next_index, self._walls, self._errors = 0, [], 0
        # Server starts this sweep has made or is making: n_trials counts these, so a proposal
        # that launches nothing (a duplicate, a predicted OOM, a known crash) is not a trial spent.
        self._starts = 0
        self._proposals: dict[int, int] = {}  # start number -> proposals made for it
        self.budget = Budget(session.cfg.search.get("budget_gpu_hours"))
        # Server starts this sweep makes: n_trials, less what the study spent before it when
        # n_trials is the study's total (search.n_trials_scope; sweep.study.answer.all_sweeps).
        self.spent_before, self.target = trials_to_run(session.cfg.search, session.study)
        # The model beside each measurement, and its stopping rule under search.sampler=model
        stop = bool(session.cfg.search.sampler.get("stop", True))
        self.watch = ModelWatch(session.plan.space, session.plan.objective, stop)
        self.stopped_by_model = False
        self.work = SweeperWork()  # what each trial costs this process besides its server

    def run(self) -> None:
        started = time.monotonic()
        if self.budget.active:
            trials = self.session.study.get_trials(deepcopy=False)
            console.print(
                f"GPU-hour budget: {spent(trials):.2f} of {self.budget.total:g} spent by "
                f"this study so far; {self.budget.remaining(trials):.2f} left"
            )
        try:
            if self.session.pool is None:
                self._loop()
            else:
                self._side_by_side()
        finally:
            self.wall_s = time.monotonic() - started

    # -- the loops -----------------------------------------------------------------------------
    def _loop(self) -> None:
        """Take the next trial until n_trials servers were started (or the GPU-hour budget is
        spent); one loop per GPU slot. A proposal that launches nothing does not count, and
        MAX_IDLE_PROPOSALS of them in a row end the sweep (the space holds nothing new)."""
        session = self.session
        slots = session.plan.slots
        n = self.spent_before + self.target  # what the counter counts to
        budget = self.budget
        while not session.stopping.is_set():
            with self._lock:
                if budget.active and budget.exhausted(session.study.get_trials(deepcopy=False)):
                    return
                if not budget.active and (
                    self._starts >= self.target or budget.idle >= MAX_IDLE_PROPOSALS
                ):
                    return
                with self.work.phase("stop"):
                    if self.stopped_by_model or self._model_stops():
                        return
                self._next_index += 1
                self._starts += 1  # until it turns out to launch nothing
                start, walls = self.spent_before + self._starts, list(self._walls)
            eta = (sum(walls) / len(walls)) * (n - start + 1) / slots if walls else None
            if budget.active:
                left = budget.remaining(session.study.get_trials(deepcopy=False)) or 0.0
                label, eta = f"{self._next_index} ({left:.2f} GPU-h left)", None
            else:
                # The same start number again after a proposal that launched nothing (a
                # duplicate, a predicted OOM): said as another proposal, not a repeated counter.
                with self._lock:
                    self._proposals[start] = self._proposals.get(start, 0) + 1
                    tries = self._proposals[start]
                label = f"{start}/{n}" + (f", proposal {tries}" if tries > 1 else "")
            started = time.monotonic()
            result = self._trial(label, eta)
            with self._lock:
                budget.note(result)
                if result.outcome in unlaunched.NOT_LAUNCHED:
                    self._starts -= 1
                else:
                    self._walls = [*walls, time.monotonic() - started]
                self._errors = self._errors + 1 if result.outcome is Outcome.ERROR else 0
            if self._errors >= MAX_CONSECUTIVE_ERRORS:
                console.print(
                    f"[red]{self._errors} trials in a row failed inside specsweep itself; "
                    f"stopping. Last error: {result.error}[/red]"
                )
                session.stopping.set()
                raise SystemExit(1)

    def _model_stops(self) -> bool:
        """search.sampler=model: the stopping rules (sweep.study.model.stopping), said once."""
        per_level = self._below_per_level()  # a load profile's rules read each level alone
        line = self.watch.stop_line(
            self.session.study,
            self.budget,
            max(self.target - self._starts, 0),
            self._below() if per_level is None else None,
            per_level,
        )
        if line is None:
            return False
        self.stopped_by_model = True
        console.print(f"[bold]{line}[/bold]", soft_wrap=True)
        return True

    def _below(self) -> Below | None:
        """The study's best measured trial when it is slower than the baseline beyond the Deploy
        line's interval (every sweep's trials, as the close reads them): what arms the model's
        speculation-off rule."""
        if not self.watch.stop or self.baseline.tok_s is None:
            return None
        with self.session.lock:
            mine = list(self.session.results)
        results = study_results(self.session.study, mine).results
        slower = slower_best(results, self.baseline.result, self.session.plan.objective)
        if slower is None:
            return None
        return Below(slower.best, slower.speedup, slower.baseline_lower)

    def _below_per_level(self) -> dict[int, Below] | None:
        """Under a load profile: each level where the best measured trial is slower than the
        baseline beyond the interval, in the speed the model predicts there (what arms each
        level's speculation-off rule); None for a single-level objective."""
        target = self.watch.target
        if not self.watch.stop or target is None or len(target.levels) < 2:
            return None
        with self.session.lock:
            mine = list(self.session.results)
        results = study_results(self.session.study, mine).results
        uncapped = self.uncapped.result if self.uncapped is not None else None
        base = self.baseline.result
        cap = cap_of(base) if base is not None else None
        found = slower_per_level(
            results, base, self.session.plan.objective, target.speed, uncapped, cap
        )
        return {c: Below(s.best, s.speedup, s.baseline_lower) for c, s in found.items()}

    def _side_by_side(self) -> None:
        slots = self.session.plan.slots
        with ThreadPoolExecutor(slots, thread_name_prefix="slot") as threads:
            pending = {threads.submit(self._loop) for _ in range(slots)}
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
        self.session.stopping.set()
        stop_all()  # slot threads see their servers gone and record the interruption
        wait(pending)

    # -- one trial -----------------------------------------------------------------------------
    def _trial(self, label: str, eta: float | None) -> TrialResult:
        study = self.session.study
        # One ask at a time in this worker: sqlite has no SELECT ... FOR UPDATE, so two threads
        # could both pop the same queued trial (PostgreSQL locks the row across workers).
        with self._ask_lock, self.work.phase("ask"):
            # a dead worker's trials: failed and queued again for us
            optuna_storage.fail_stale(study)
            trial = study.ask()
        with optuna_storage.heartbeat(study, trial):
            return self._run_trial(trial, label, eta)

    def _run_trial(self, trial: optuna.Trial, label: str, eta: float | None):
        session, space = self.session, self.session.plan.space
        trial.set_user_attr("worker", SearchDriver.worker())
        trial.set_user_attr("software", dict(session.plan.software))
        values = space.suggest(trial)
        name = f"trial_{trial.number:04d}"
        folder = session.study_dir / name
        retried = optuna_storage.retried_from(session.study, trial)
        note = f"  [dim](retry of trial_{retried:04d})[/dim]" if retried is not None else ""
        session.header(label, name, space.describe(values) + note, eta)
        overrides = [
            *session.plan.arguments,
            *space.overrides(values),
            f"trial.name={name}",
            f"trial.number={trial.number}",
            "trial.role=trial",
            *self._lossless_overrides(),
        ]
        candidate: Candidate | None = None
        source = job_cfg = claimed = None
        forecast: Forecast | None = None
        try:
            with self.work.phase("decide"):
                job_cfg = session.jobs.compose(overrides)
                spec = build_trial_spec(job_cfg)
                candidate = candidate_for(spec.server, session.plan.setup_key)
                verdict = self._verdict_or_claim(candidate, trial.number, name)
            source = verdict.source
            if verdict.launch:
                claimed = candidate.key
                session.driver.begin(trial, verdict)
                if verdict.action == "recheck" and source is not None:
                    console.print(
                        f"    re-checking a predicted OOM: only trial_{source.number:04d} "
                        "(another memory group) says this one runs out"
                    )
                with self.work.phase("forecast"):
                    forecast = self.watch.forecast(session.study, trial, candidate)
                    screen = self.watch.screens(session.study, trial)
                if forecast is not None and forecast.beside_oom:  # beside an OOM: say why
                    console.print(f"    {forecast.beside_oom}", soft_wrap=True)
                extra = ["benchmark.runs=1", "benchmark.adaptive=false"] if screen else []
                # in full after a screen: the runs it did not measure, its run pooled in after
                earlier = None if screen else screens.screen_of(session.study, candidate.key)
                if earlier is not None:
                    extra = screens.after_screen(earlier, int(job_cfg.benchmark.runs))
                result = session.launch(overrides + self._early_stop_overrides() + extra, name)
                if screen and result.outcome is Outcome.OK:  # one run: never an answer
                    result.outcome = Outcome.PRUNED
                    result.warnings.append(SCREENED)
                    result.write(Path(result.folder))
                if earlier is not None and result.outcome in (Outcome.OK, Outcome.PRUNED):
                    level = spec.benchmark.objective_concurrency
                    result = pooling.pool_screen(result, earlier, level)
                    pooling.write(result)
                    trial.set_user_attr(POOLED, earlier.number)
                if session.stopping.is_set() and result.outcome is not Outcome.OK:
                    result.outcome, result.error = Outcome.INTERRUPTED, "the sweep was stopped"
                    # the folder too: the harness wrote "crash" for a server the sweep stopped
                    result.write(Path(result.folder))
            elif verdict.action == "dominated":
                engine = str(session.cfg.engine.name)
                result = unlaunched.dominated_result(
                    folder, job_cfg, engine, spec.params, verdict.reason
                )
            else:
                assert source is not None
                result = unlaunched.known_result(
                    folder, job_cfg, spec.params, verdict.action, source
                )
        except ConfigError as exc:
            engine = str(session.cfg.engine.name)
            result = unlaunched.invalid_result(folder, job_cfg, engine, dict(values), str(exc))
        except BaseException:
            trial.set_user_attr("outcome", str(Outcome.INTERRUPTED))
            session.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            optuna_storage.queue_again(session.study, trial)
            if claimed:
                session.claims.release(claimed)
            self._record_interrupted(folder)
            raise
        result.number = trial.number
        session.keep(result)
        with self.work.phase("log"):
            run_id = session.log(result, self.baseline.tok_s, self.baseline.runs)
        with self.work.phase("tell"):
            trial.set_user_attr("folder", result.folder)
            trial.set_user_attr("mlflow_run_id", run_id)
            # Told before the claim goes: a waiting worker then finds the result, never neither.
            session.driver.tell(trial, candidate, result, self.baseline.tok_s, source)
            if claimed:
                session.claims.release(claimed)
            session.reporter(name).trial_done(result, self.baseline.result)
            line = self.watch.line(forecast, result)
        if line is not None and (session.console.verbose or self.watch.missed(forecast, result)):
            console.print(f"    [dim]{line}[/dim]", soft_wrap=True)
        if result.outcome is Outcome.INTERRUPTED:
            # for the next worker, or this one resumed
            optuna_storage.queue_again(session.study, trial)
            raise KeyboardInterrupt("the sweep was stopped")
        return result

    def _verdict_or_claim(self, candidate: Candidate, number: int, name: str) -> Verdict:
        """Skip what the study knows; launch only what this worker claimed; else wait.

        Another worker (or slot) evaluating the same candidate holds its claim: wait for its
        result, which then makes this trial a duplicate. If that evaluation fails, or its worker
        dies (the lease expires), this trial claims the candidate and launches it.
        """
        driver, claims = self.session.driver, self.session.claims
        announced = False
        while True:
            verdict = driver.verdict(candidate)
            if not verdict.launch:
                return verdict
            if claims.try_claim(candidate.key, number):
                verdict = driver.verdict(candidate)  # told just before it was released?
                if not verdict.launch:
                    claims.release(candidate.key)
                return verdict
            if not announced:
                holder = claims.holder(candidate.key) or {}
                other = f"trial_{holder['trial']:04d}" if holder.get("trial") is not None else "?"
                console.print(
                    f"    {name}: same configuration as {other}, being evaluated "
                    f"({holder.get('owner', 'another worker')}); waiting for its result"
                )
                announced = True
            self.session.sleep(CLAIM_POLL_S)

    def _record_interrupted(self, folder) -> None:
        """The trial folder says what was measured before the interruption; MLflow gets it too."""
        result = unlaunched.interrupted_result(folder)
        if result is None:
            return
        self.session.keep(result)
        self.session.log(result, self.baseline.tok_s, self.baseline.runs)

    def _lossless_overrides(self) -> list[str]:
        """The baseline's greedy outputs, for the trial's lossless check (harness.measure.lossless);
        none when its folder is not on this node (measured elsewhere) or it wrote none."""
        baseline = self.baseline.result
        if baseline is None or baseline.outcome is not Outcome.OK:
            return []
        reference = Path(baseline.folder) / lossless.FILE
        if not reference.is_file():
            return []
        return [f"trial.lossless_reference='{reference}'"]

    def _early_stop_overrides(self) -> list[str]:
        cfg = self.session.cfg
        if not cfg.search.prune:
            return []
        below = self.session.driver.prune_below()
        if below is None:
            return []
        metric, level = self.session.plan.objective.run_metric()
        if level is None:
            levels = list(cfg.benchmark.concurrency)
            level = 1 if 1 in levels else levels[0]
        return [
            f"trial.prune_below={below:.4f}",
            f"trial.prune_metric={metric}",
            f"trial.prune_concurrency={level}",
        ]
