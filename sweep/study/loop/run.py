"""One `python sweep.py -m`: baseline, trials, re-check, summary.

Order: open MLflow and the study (failing trials a crashed sweep left RUNNING) -> banner ->
the MLflow parent run -> the baseline, measured once per study or reused (`baseline`) -> the
trials (`trials`: ask, skip what the study knows, launch with an early-stop bound, tell) -> the
resolve phase (`resolve_phase`: more runs on the contenders while the verdict is unresolved,
within search.resolve's budget) -> the baseline re-measured for drift -> the summary
(`summary`), whatever happened.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Callable
from pathlib import Path

import optuna
from omegaconf import DictConfig, OmegaConf
from rich.markup import escape

from harness.errors import MachineNotReady
from harness.record.layout import stamp
from harness.record.results import TrialResult
from harness.workload import load_prompts
from sweep.adaptive import config_file as adaptive_config
from sweep.config.fraction import FRACTION
from sweep.config.specs import build_benchmark_spec
from sweep.launch.jobs import Jobs
from sweep.launch.slots import SlotPool
from sweep.launch.workers import shares_node
from sweep.readout.banner import runs_line, software_notice, workload_line
from sweep.readout.commands import rerun_command
from sweep.readout.console import console
from sweep.readout.trial_lines import SweepConsole
from sweep.readout.verdict import no_recommendation
from sweep.study.answer import all_sweeps
from sweep.study.answer.all_sweeps import study_results
from sweep.study.answer.summary import SweepOutcome, finish
from sweep.study.loop import opening, optuna_storage, trial_count
from sweep.study.loop.baseline import Baseline, needs_uncapped
from sweep.study.loop.decisions import SearchDriver
from sweep.study.loop.optuna_storage import redact_url
from sweep.study.loop.plan import SweepPlan
from sweep.study.loop.resolve_rounds import ResolvePhase
from sweep.study.loop.session import StudySession
from sweep.study.loop.trials import TrialLoop
from sweep.study.model import transfer
from sweep.study.model.sampler import model_sampler
from sweep.study.search import memory, priors
from sweep.study.trial.unlaunched import MEASURED
from sweep.tracking import view
from sweep.tracking.provenance import software_changes

_FINISHED = (
    optuna.trial.TrialState.COMPLETE,
    optuna.trial.TrialState.FAIL,
    optuna.trial.TrialState.PRUNED,
)


def pinned_line(search, objective, searched: set[str]) -> str | None:
    """The memory knobs search.memory holds still, why, and the override that searches them."""
    mode = memory.resolve_mode(str(search.get("memory", "auto")), objective)
    knobs = [k for k in (FRACTION, memory.HICACHE) if k in searched]
    if mode not in ("pin", "auto") or not knobs:
        return None
    if mode == "auto":
        top = max(memory.objective_levels(objective))
        return (
            f"memory knobs: held (as at concurrency 1) while the KV pool the servers report "
            f"holds what concurrency {top} keeps in flight; searched towards the OOM boundary "
            "once it does not (search.memory=auto, docs/search.md)"
        )
    first = next((dict(p) for p in search.get("enqueue") or [] if FRACTION in p), {})
    held = []
    if FRACTION in knobs:
        value = f" at {first[FRACTION]}" if FRACTION in first else ""
        held.append(f"{FRACTION}{value} (the first started trial's, moved only where it OOMs)")
    if memory.HICACHE in knobs:
        held.append(f"{memory.HICACHE} at its smallest choice (off)")
    return (
        f"held, not searched: {'; '.join(held)}. search.memory=auto holds them because the "
        "objective reads concurrency 1 only, where the memory knobs decide whether the server "
        "starts, not its speed (docs/search.md); search.memory=sample searches them"
    )


def resume_line(arguments: tuple[str, ...]) -> str:
    """The command that continues the study: the same overrides (hence the same study name)."""
    again = escape(rerun_command(arguments))  # console markup: a path reads as a closing tag
    return (
        f"[bold]To resume:[/bold] {again}   (what was measured is kept, the interrupted trial "
        "runs again, and search.n_trials counts the study's total)"
    )


def leave(arguments: tuple[str, ...], moment: str, search, study: optuna.Study | None = None):
    """A Ctrl-C outside the measured part (opening the stores, a second one while closing):
    nothing runs any more; say so, and how to go on, without a traceback."""
    spent = all_sweeps.launches_spent(study) if study is not None else None
    console.print(f"\n[bold]{no_recommendation(moment, spent, search)}[/bold]", soft_wrap=True)
    console.print(resume_line(arguments), soft_wrap=True)
    raise SystemExit(130)


class StudyRun:
    def __init__(
        self,
        cfg: DictConfig,
        plan: SweepPlan,
        jobs: Jobs,
        on_open: Callable[[], None] | None = None,
    ):
        self.cfg = cfg
        self.on_open = on_open  # once MLflow and the study opened: the snapshot becomes the study's
        self.plan = plan
        self.jobs = jobs
        self.study_dir = Path(cfg.hydra.sweep.dir).resolve()
        self.started = time.monotonic()
        self.pool: SlotPool | None = None
        # A worker a launcher placed may share its node: it locks GPUs and ports even alone.
        if plan.parallel or shares_node():
            self.pool = SlotPool(
                list(plan.gpus),
                cfg.model.tp,
                plan.slots,
                Path(cfg.worker.lock_dir),
                cfg.server.host,
                cfg.server.port,
                cfg.engine.stop_grace_s,
            )

    @property
    def simulated(self) -> bool:
        return self.cfg.engine.name == "sim"

    def execute(self) -> list[TrialResult]:
        """The sweep, from opening its stores to its summary. A Ctrl-C (or SIGTERM) at any
        moment stops the server, closes what was opened, says there is no recommendation and how
        to resume, and exits 130 without a traceback."""
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        logging.getLogger("mlflow").setLevel(logging.WARNING)  # no migration chatter
        try:
            session = self._open()
        except KeyboardInterrupt:  # nothing was launched; a parent run left open is an orphan
            leave(self.plan.arguments, "while opening the study", self.cfg.search)
        return self._run(session)

    def _open(self) -> StudySession:
        """MLflow, the study (refused where it measured another setup), the claims, the banner,
        the parent run and the study's view in MLflow's UI."""
        cfg = self.cfg
        tracker = opening.open_tracker(cfg)
        study, storage_url = opening.open_study(cfg, self.plan.objective, self.plan)
        driver = SearchDriver(study, self.plan.objective, int(cfg.model.tp))
        claims = opening.open_claims(cfg, storage_url)
        if self.on_open is not None:
            self.on_open()
        opening.close_orphans(study, driver, tracker)
        priors.enqueue(study, cfg.search, self.plan.objective)
        self._banner(study)
        self._transfer(study)
        parent = tracker.start_sweep(
            f"sweep-{stamp()}",
            tags=self._sweep_tags(storage_url),
            params=self._sweep_params(),
        )
        # The study's view in MLflow's UI (sweep.tracking.view), the same for every sweep of it
        self.shared_view = view.write_view(
            tracker.client,
            tracker.experiment_id,
            cfg.search.study_name,
            self.plan.objective.metrics,
            list(self.plan.space.params),
        )
        self.storage_url = storage_url
        return StudySession(
            cfg=cfg,
            plan=self.plan,
            jobs=self.jobs,
            study=study,
            driver=driver,
            claims=claims,
            tracker=tracker,
            parent_run_id=parent,
            study_dir=self.study_dir,
            pool=self.pool,
            console=SweepConsole(verbose=bool(cfg.get("verbose", False))),
        )

    def _run(self, session: StudySession) -> list[TrialResult]:
        cfg = self.cfg
        baseline = Baseline(session)
        uncapped = Baseline(session, uncapped=True) if needs_uncapped(cfg) else None
        trials = TrialLoop(session, baseline, uncapped)
        phase = ResolvePhase(session, baseline, uncapped)
        status, moment = "FAILED", "during the baseline"
        try:
            baseline.measure_or_reuse()
            if uncapped is not None:  # a level above the equal cap: what a deployment runs
                uncapped.measure_or_reuse()
            moment = "during the trials"
            trials.run()
            moment = "during the resolve phase"
            phase.run()  # more runs on the contenders while the verdict is unresolved
            moment = "during the baseline re-check"
            baseline.recheck()
            adaptive_config.after_sweep(
                self.study_dir,
                list(cfg.benchmark.concurrency),
                session.tracker,
                session.parent_run_id,
            )
            status, moment = "FINISHED", ""
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the summary below, then exit 130
            status = "KILLED"
            console.print(
                f"[yellow]interrupted {moment}: the server was stopped; results so far are kept.[/]"
            )
        except MachineNotReady as exc:
            console.print(f"[red]error:[/red] {exc}")
            raise SystemExit(1) from None
        finally:
            if self.pool is not None:  # a killed worker's server on a GPU nobody takes again
                self.pool.reap_leftovers()
            whole = study_results(session.study, list(session.results))
            done = SweepOutcome(
                status=status,
                results=whole.results,
                baseline=baseline.result,
                recheck=baseline.recheck_result,
                uncapped=uncapped.result if uncapped is not None else None,
                total_s=time.monotonic() - self.started,
                trials_wall_s=trials.wall_s,
                sweeper_work=trials.work.metrics(),
                slots=self.plan.slots,
                this_sweep=list(session.results),
                unreadable=whole.unreadable,
                measured_here=[
                    b.result
                    for b in (baseline, uncapped)
                    if b is not None and b.measured_here and b.result is not None
                ],
                relaunches=list(phase.relaunches),
                resolve=phase.report(),
                moment=moment,
            )
            try:
                status = finish(
                    cfg,
                    done,
                    session.study,
                    self.plan.objective,
                    session.tracker,
                    session.parent_run_id,
                    self.study_dir,
                    self.storage_url,
                    self.shared_view,
                    resume=resume_line(self.plan.arguments),
                )
            except KeyboardInterrupt:  # a second Ctrl-C while closing: leave now
                session.claims.close()
                leave(self.plan.arguments, "while closing", cfg.search, session.study)
            session.claims.close()
        if status == "KILLED":  # no traceback: what was kept is above, and how to go on
            raise SystemExit(130)
        return session.results

    def _banner(self, study: optuna.Study) -> None:
        cfg = self.cfg
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
            f"; drafter {cfg.drafter.name}; objective: {', '.join(self.plan.objective.labels)}"
        )
        spec = build_benchmark_spec(cfg)
        prompts = load_prompts(spec.prompts, spec.seed, spec.categories)
        base = " + baseline" if cfg.search.baseline else ""
        if needs_uncapped(cfg):
            base = " + baseline at equal caps and at SGLang's own running-request limit"
        trials_line = trial_count.banner_line(cfg.search, study)
        if trials_line.startswith("no trials"):
            base = ""  # the line says why no trial runs
        elif trial_count.stops_when_settled(cfg.search):
            trials_line = f"up to {trials_line}"
            base += " (the model ends the search once the answer is settled)"
        console.print(f"{trials_line}{base}; {runs_line(spec)}", soft_wrap=True)
        console.print(workload_line(spec, prompts), soft_wrap=True)
        held = pinned_line(cfg.search, self.plan.objective, set(self.plan.space.params))
        if held:
            console.print(held, soft_wrap=True)
        if self.plan.pinned:  # sweep.config.study_name: the user's value, not a searched one
            values = ", ".join(f"{k}={v}" for k, v in self.plan.pinned.items())
            console.print(
                f"held for every server (the baseline, each trial, the re-check), as the command "
                f"line sets it: {values}",
                soft_wrap=True,
            )
        if self.pool is not None:
            groups = "; ".join(",".join(g) for g in self.pool.groups)
            if self.plan.slots > 1:
                console.print(f"{self.plan.slots} GPU slots side by side (GPUs {groups})")
            else:
                console.print(f"1 GPU slot (GPUs {groups}), locked against other workers here")
        for prior in priors.left_out(cfg.search, self.plan.objective):
            console.print(f"search.enqueue: a prior left out, {prior}", soft_wrap=True)
        console.print(f"results in {self.study_dir}", soft_wrap=True)
        notice = software_notice(self._changed_software(study))
        if notice:
            console.print(f"[yellow]{notice}[/yellow]", soft_wrap=True, markup=True)

    def _transfer(self, study: optuna.Study) -> None:
        """search.sampler=model: start from earlier studies' matching trials, said once."""
        sampler = model_sampler(study.sampler)
        if sampler is None or not self.cfg.search.sampler.get("transfer", True):
            return
        line = transfer.start_from_earlier(
            sampler,
            study,
            optuna_storage.other_studies(study),
            self.plan.setup_key,
            OmegaConf.select(self.cfg, "drafter.path"),
        )
        if line:
            console.print(line, soft_wrap=True)

    def _changed_software(self, study: optuna.Study) -> dict[str, list[int]]:
        """What changed since each measured trial of the study, and for which trials."""
        changes: dict[str, list[int]] = {}
        for trial in study.get_trials(deepcopy=False, states=_FINISHED):
            if trial.user_attrs.get("outcome") not in MEASURED:
                continue
            change = software_changes(trial.user_attrs.get("software"), self.plan.software)
            if change:
                changes.setdefault(change, []).append(trial.number)
        return changes

    def _sweep_tags(self, storage_url: str) -> dict[str, str]:
        cfg = self.cfg
        return {
            "specsweep.engine": cfg.engine.name,
            "specsweep.simulated": str(self.simulated).lower(),
            "specsweep.study": cfg.search.study_name,
            "specsweep.worker_host": socket.gethostname(),
            "specsweep.worker_pid": str(SearchDriver.worker()["pid"]),
            "specsweep.optuna_storage": redact_url(storage_url),
            "specsweep.slots": str(self.plan.slots),
        }

    def _sweep_params(self) -> dict[str, object]:
        cfg = self.cfg
        return {
            "n_trials": cfg.search.n_trials,
            "sampler": cfg.search.sampler.name,
            "seed": cfg.search.seed,
            "objective": cfg.search.objective,
            "space": json.dumps(
                {k: v.__dict__ for k, v in self.plan.space.params.items()}, default=str
            ),
        }
