"""The project's Hydra sweeper: Optuna's ask-and-tell over the search space in conf/search/.

Hydra only loads sweepers from the `hydra_plugins` package; `hydra_plugins/specsweep_sweeper`
subclasses `SpecsweepSweeperImpl`, so the code lives here. This module checks everything before a
server starts (`plan`) and hands the sweep to `sweep.study.loop.run`; every trial runs through
`sweep.launch.jobs`. Hydra's launcher places whole workers only (`worker.count > 1`).
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig
from omegaconf.errors import InterpolationResolutionError
from rich.markup import escape

from harness.errors import ConfigError, SpecsweepError
from sweep.config.drafter_check import check_drafter
from sweep.config.fraction import baseline_mem_fraction
from sweep.config.setup_key import setup, setup_key
from sweep.config.specs import build_trial_spec
from sweep.config.study_name import derived_name, explicit_name, pinned_values
from sweep.launch import snapshot
from sweep.launch.jobs import Jobs
from sweep.launch.parse_check import check_launch_flags
from sweep.launch.slots import slot_count, worker_gpus
from sweep.readout.commands import with_overrides
from sweep.readout.comparisons import check_reference
from sweep.readout.console import console
from sweep.study.answer import unresolved
from sweep.study.loop.baseline import baseline_overrides
from sweep.study.loop.budget import Budget
from sweep.study.loop.optuna_storage import grace_period
from sweep.study.loop.plan import SweepPlan
from sweep.study.loop.run import StudyRun, leave
from sweep.study.model.sampler import EXPLORE, ModelSampler, model_refusal
from sweep.study.search import memory
from sweep.study.search.space import SearchSpace
from sweep.study.trial.objective import Objective
from sweep.tracking import provenance


class _InterruptOnce:
    """SIGTERM unwinds like Ctrl-C, once. SLURM's scancel signals every process of a job's step,
    the worker among them, and the job's own process forwards the signal too: a second
    KeyboardInterrupt landed inside the stop the first began (tests/slurm)."""

    def __init__(self) -> None:
        self.fired = False

    def __call__(self, signum, frame) -> None:
        if not self.fired:
            self.fired = True
            raise KeyboardInterrupt(f"signal {signum}")


def check_search(config: DictConfig) -> tuple[Objective, SearchSpace]:
    """The checks of `plan` that need no Hydra context: the search, sampler, objective,
    heartbeat settings and the declared space (tests call them without a sweep)."""
    search, benchmark = config.search, config.benchmark
    grace_period(config.tracking)  # heartbeat settings that would fail live trials
    if search.n_trials < 0:
        raise ConfigError(f"search.n_trials={search.n_trials}: must be >= 0.")
    if search.get("n_trials_scope", "study") not in ("study", "sweep"):
        raise ConfigError(
            f"search.n_trials_scope={search.n_trials_scope!r}: study (n_trials is the study's "
            "total; a resume runs what is left) or sweep (each sweep runs n_trials more)."
        )
    if search.sampler.name not in ("tpe", "random", "model"):
        raise ConfigError(f"search.sampler.name={search.sampler.name!r}: tpe, random or model.")
    try:  # the objective, its load profile and latency limits (sweep.study.trial.objective)
        objective = Objective.from_config(search, benchmark)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if search.objective == "speedup" and not search.baseline:
        raise ConfigError("search.objective=speedup needs the baseline: set search.baseline=true.")
    # search.memory, search.budget_gpu_hours, search.resolve (sweep/study/search/memory.py, ...)
    try:
        memory.resolve_mode(str(search.get("memory", "auto")), objective)
        Budget(search.get("budget_gpu_hours"))
        rounds = unresolved.Settings.from_config(search)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if rounds.runs > benchmark.max_runs:
        raise ConfigError(
            f"search.resolve.runs={rounds.runs}: at most benchmark.max_runs={benchmark.max_runs} "
            "runs on one server start."
        )
    space = SearchSpace.from_config(search.space)
    if search.sampler.name == "model" and model_refusal(space, objective) is None:
        try:  # its settings (sweep/study/model/sampler.py)
            ModelSampler(space, objective, explore=float(search.sampler.get("explore", EXPLORE)))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    try:  # the trial a study without a baseline is compared to (sweep/readout/comparisons.py)
        check_reference(search.get("reference"), space.params)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return objective, space


class SpecsweepSweeperImpl(Sweeper):
    def __init__(self) -> None:
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.launcher = None  # Hydra's: places sweep workers (sweep.launch.workers)
        self.jobs: Jobs | None = None  # composes and runs every trial

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )
        self.jobs = Jobs(hydra_context.config_loader, config)

    def sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None and self.jobs is not None
        if self.config.worker.count > 1:
            from sweep.launch.workers import launch_workers

            return launch_workers(self, arguments)
        snap = None
        try:
            try:
                snap = self.freeze(arguments)
                plan = self.plan(arguments)
            except BaseException:
                snapshot.discard(snap)  # a refused first sweep leaves no snapshot
                raise
        except SpecsweepError as exc:
            console.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True)
            raise SystemExit(2) from None
        except KeyboardInterrupt:  # composing, checking, preflight: nothing was started
            leave(
                tuple(arguments),
                "before the study opened (nothing was launched)",
                self.config.search,
            )
        except InterpolationResolutionError as exc:  # tracking=server without its variables
            console.print(
                f"[red]error:[/red] {str(exc).splitlines()[0]}. tracking=server reads "
                "SPECSWEEP_OPTUNA_STORAGE and SPECSWEEP_MLFLOW_URI: `source DIR/services.env` "
                "after `python -m sweep.services start --dir DIR` (docs/scale-out.md).",
                soft_wrap=True,
            )
            raise SystemExit(2) from None
        # SIGTERM (a scheduler, systemd, kill) unwinds like Ctrl-C: the server is stopped, the
        # trial recorded as interrupted and the MLflow runs closed.
        previous = signal.signal(signal.SIGTERM, _InterruptOnce())
        try:
            # The study takes a first sweep's snapshot once its stores opened (a dead tracking
            # server refuses the sweep there, and then leaves no snapshot either).
            run = StudyRun(self.config, plan, self.jobs, on_open=lambda: self._commit(snap))
            return run.execute()
        finally:
            signal.signal(signal.SIGTERM, previous)
            snapshot.discard(snap)  # the staged copy: the study's is in its folder now

    def freeze(self, arguments: list[str]) -> snapshot.Snapshot:
        """Compose everything from the study's snapshot of conf/ (sweep.launch.snapshot): made
        now by a study's first sweep, found by a resume, which is refused where files edited
        since would change what its trials measure."""
        assert self.config is not None and self.hydra_context is not None
        search_path = self.hydra_context.config_loader.get_search_path()
        study_dir = Path(str(self.config.hydra.sweep.dir)).resolve()
        snap = snapshot.take(snapshot.main_conf_dir(search_path), study_dir)
        loader = snapshot.loader_for(search_path, snap.conf)
        frozen = snapshot.recompose(loader, self.config)
        frozen_jobs = Jobs(loader, frozen)
        if snap.changed:
            differs = snapshot.setup_differs(
                self.compose(arguments), frozen_jobs.compose(arguments)
            )
            files = ", ".join(f"conf/{name}" for name in snap.changed)
            name = self.config.search.study_name
            if differs:
                raise ConfigError(
                    f"{files} changed since study {name!r} started, and the change alters its "
                    f"setup ({'; '.join(differs)}): its trials could not be compared with the "
                    f"study's. Undo the edit (the study's copy: {snap.conf}) to continue it, or "
                    f"drop search.study_name={name} to land in the edited setup's own study."
                )
            console.print(
                f"[yellow]{files} changed since the study started, in nothing a measurement "
                f"depends on; the study runs from its snapshot ({snap.conf}), so the edit is not "
                f"applied. A new study (search.study_name={name}-2) takes the edited "
                "files.[/yellow]",
                soft_wrap=True,
            )
        self.config, self.jobs = frozen, frozen_jobs
        return snap

    def _commit(self, snap: snapshot.Snapshot) -> None:
        """The checks passed: a first sweep's staged snapshot becomes the study's, and the
        trials compose from it there."""
        assert self.config is not None and self.hydra_context is not None
        if not snap.created:
            return
        conf = snapshot.commit(snap, Path(str(self.config.hydra.sweep.dir)).resolve())
        search_path = self.hydra_context.config_loader.get_search_path()
        assert self.jobs is not None
        self.jobs.retarget(snapshot.loader_for(search_path, conf))
        if self.config.get("verbose"):  # the study's folder is in the banner; conf/ is under it
            console.print(f"[dim]configuration frozen for the study: {conf}[/dim]", soft_wrap=True)

    def plan(self, arguments: list[str]) -> SweepPlan:
        """Everything that can fail before a server starts fails here, with its reason."""
        assert self.config is not None and self.hydra_context is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        for override in parser.parse_overrides(arguments):
            if override.is_sweep_override():
                raise ConfigError(
                    f"'{override.input_line}' is a Hydra sweep; specsweep searches with Optuna. "
                    "Declare ranges in search.space instead, e.g. "
                    "search.space.speculative_num_steps.high=4."
                )
        pinned = pinned_values(self.config, arguments)
        try:
            objective, space = check_search(self.config)
        except ConfigError as exc:
            if not pinned:
                raise
            held = ", ".join(f"server.{k}={v}" for k, v in pinned.items())
            raise ConfigError(
                f"{exc} ({held} on the command line is held for every server, so it left the "
                "search space: drop it to search it, or hold the others too)"
            ) from None
        # Compose and freeze a trial and the baseline now: a typo costs a second, not a load.
        trial_cfg = self.compose(arguments)
        trial_spec = build_trial_spec(trial_cfg)
        check_drafter(trial_cfg, trial_spec)
        fraction = baseline_mem_fraction(trial_cfg.search, trial_cfg.server)
        baseline_cfg = self.compose(baseline_overrides(arguments, "baseline_check", fraction))
        check_launch_flags([trial_spec, build_trial_spec(baseline_cfg)])
        if trial_cfg.preflight:
            self._preflight(trial_cfg, arguments)
        gpus = worker_gpus(trial_cfg.hardware.gpus)[: trial_cfg.hardware.gpus]
        slots = slot_count(gpus, trial_cfg.model.tp, trial_cfg.worker.slots)
        software = provenance.software(baseline_cfg)  # once per sweep; trials reuse it
        unnamed = [a for a in arguments if explicit_name([a]) is None]
        return SweepPlan(
            arguments=tuple(arguments),
            space=space,
            objective=objective,
            setup_key=setup_key(baseline_cfg, software),
            software=software,
            gpus=tuple(gpus),
            slots=slots,
            setup=setup(trial_cfg, software, drafter=True, pinned=pinned),
            pinned=pinned,
            derived_name=derived_name(trial_cfg, unnamed, software, multirun=True),
        )

    @staticmethod
    def _preflight(cfg: DictConfig, arguments: list[str]) -> None:
        """Machine, paths, ports, stores: show what is not fine, stop on a failure."""
        from sweep import preflight

        checks = preflight.run(cfg)
        worth_showing = [c for c in checks if c.status != "pass"]
        passed = len(checks) - len(worth_showing)
        console.print(
            f"preflight: {passed}/{len(checks)} checks pass (details: "
            f"{escape(with_overrides('preflight', arguments))})",
            soft_wrap=True,
        )
        for line in preflight.render(worth_showing):
            console.print(line, soft_wrap=True)
        if any(c.status == "fail" for c in checks):
            raise ConfigError("preflight failed (set preflight=false to skip the checks)")

    def compose(self, overrides: list[str]) -> DictConfig:
        assert self.jobs is not None
        return self.jobs.compose(overrides)
