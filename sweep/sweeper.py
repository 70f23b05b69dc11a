"""The project's Hydra sweeper: Optuna's ask-and-tell over the search space in conf/search/.

Hydra only loads sweepers from the `hydra_plugins` package; `hydra_plugins/specsweep_sweeper`
subclasses `SpecsweepSweeperImpl`, so the code lives here. This module checks everything before a
server starts and runs jobs through Hydra's launcher; `sweep.study_run` is the sweep itself.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from harness.errors import ConfigError, MachineNotReady, SpecsweepError
from harness.results import Outcome, TrialResult
from sweep.config import build_trial_spec, check_drafter, setup_key
from sweep.console import console
from sweep.launch_check import check_launch_flags
from sweep.search import Objective
from sweep.slots import slot_count, worker_gpus
from sweep.space import SearchSpace

log = logging.getLogger(__name__)

_BASELINE_KEYS = ("drafter", "server.speculative_")


def _override_key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def baseline_overrides(arguments: Sequence[str], name: str) -> list[str]:
    kept = [a for a in arguments if not _override_key(a).startswith(_BASELINE_KEYS)]
    return [*kept, "drafter=none", f"trial.name={name}", "trial.role=baseline"]


class SpecsweepSweeperImpl(Sweeper):
    def __init__(self) -> None:
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.launcher = None
        self._job_idx = 0
        self._compose_lock = threading.Lock()  # GPU-slot threads compose jobs concurrently

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        from sweep.study_run import StudyRun

        assert self.config is not None
        if self.config.worker.count > 1:
            from sweep.workers import launch_workers

            return launch_workers(self, arguments)
        try:
            plan = self.plan(arguments)
        except SpecsweepError as exc:
            console.print(f"[red]error:[/red] {exc}")
            raise SystemExit(2) from None
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
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            return StudyRun(self, self.config, arguments, plan).execute()
        finally:
            signal.signal(signal.SIGTERM, previous)

    def plan(self, arguments: list[str]) -> dict[str, Any]:
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
        search, benchmark = self.config.search, self.config.benchmark
        if search.n_trials < 0:
            raise ConfigError(f"search.n_trials={search.n_trials}: must be >= 0.")
        if search.sampler.name not in ("tpe", "random"):
            raise ConfigError(f"search.sampler.name={search.sampler.name!r}: tpe or random.")
        try:
            objective = Objective(search.objective, search.throughput_concurrency)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if "throughput" in search.objective and (
            search.throughput_concurrency not in benchmark.concurrency
        ):
            raise ConfigError(
                f"search.objective={search.objective} reads throughput at concurrency "
                f"{search.throughput_concurrency}, which benchmark.concurrency="
                f"{list(benchmark.concurrency)} does not measure. Add it, e.g. "
                f"benchmark.concurrency=[1,{search.throughput_concurrency}]."
            )
        if search.objective == "speedup" and not search.baseline:
            raise ConfigError(
                "search.objective=speedup needs the baseline: set search.baseline=true."
            )
        space = SearchSpace.from_config(search.space)
        # Compose and freeze a trial and the baseline now: a typo costs a second, not a load.
        trial_cfg = self.compose(arguments)
        trial_spec = build_trial_spec(trial_cfg)
        check_drafter(trial_cfg, trial_spec)
        baseline_cfg = self.compose(baseline_overrides(arguments, "baseline_check"))
        check_launch_flags([trial_spec, build_trial_spec(baseline_cfg)])
        if trial_cfg.preflight:
            self._preflight(trial_cfg)
        gpus = worker_gpus(trial_cfg.hardware.gpus)[: trial_cfg.hardware.gpus]
        slots = slot_count(gpus, trial_cfg.model.tp, trial_cfg.worker.slots)
        return {
            "space": space,
            "objective": objective,
            "setup_key": setup_key(baseline_cfg),
            "gpus": gpus,
            "slots": slots,
        }

    @staticmethod
    def _preflight(cfg: DictConfig) -> None:
        """Machine, paths, ports, stores: show what is not fine, stop on a failure."""
        from sweep import preflight

        checks = preflight.run(cfg)
        worth_showing = [c for c in checks if c.status != "pass"]
        passed = len(checks) - len(worth_showing)
        console.print(
            f"preflight: {passed}/{len(checks)} checks pass (details: python -m sweep.preflight)"
        )
        for line in preflight.render(worth_showing):
            console.print(line, soft_wrap=True)
        if any(c.status == "fail" for c in checks):
            raise ConfigError("preflight failed (set preflight=false to skip the checks)")

    def compose(self, overrides: Sequence[str]) -> DictConfig:
        assert self.config is not None and self.hydra_context is not None
        return self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))

    def launch(self, overrides: list[str]) -> TrialResult:
        """Run one job through Hydra's launcher; a job that raised becomes an `error` result."""
        assert self.launcher is not None
        returns = self.launcher.launch([overrides], initial_job_idx=self._job_idx)
        self._job_idx += 1
        try:
            return returns[0].return_value
        except (MachineNotReady, KeyboardInterrupt):
            raise
        except Exception as exc:  # a harness bug must not take the measured trials with it
            return self._error_result(overrides, exc)

    def launch_in_thread(self, overrides: list[str], reporter) -> TrialResult:
        """Run one job in this thread, for trials side by side in GPU slots.

        Hydra's BasicLauncher runs one job at a time, and the job context it sets up (HydraConfig,
        logging) is process-wide, so concurrent jobs are composed by Hydra's config loader and
        run here with their folder given explicitly; the job itself is the same `run_job`.
        """
        from sweep.app import run_job

        try:
            with self._compose_lock:
                job_cfg = self.compose(overrides)
            folder = Path(str(job_cfg.hydra.sweep.dir)) / str(job_cfg.hydra.sweep.subdir)
            task_cfg = OmegaConf.masked_copy(job_cfg, [k for k in job_cfg if k != "hydra"])
            folder.mkdir(parents=True, exist_ok=True)
            with thread_log(folder / "trial.log"):
                return run_job(task_cfg, folder.resolve(), reporter)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            log.exception("job failed")
            return self._error_result(overrides, exc)

    def _error_result(self, overrides: list[str], exc: BaseException) -> TrialResult:
        name = next((o.split("=", 1)[1] for o in overrides if o.startswith("trial.name=")), "?")
        return TrialResult(
            name=name,
            role="trial",
            outcome=Outcome.ERROR,
            engine=self.config.engine.name if self.config else "?",
            simulated=bool(self.config and self.config.engine.name == "sim"),
            clock_scale=1.0,
            params={},
            error="".join(traceback.format_exception_only(exc)).strip(),
        )


@contextlib.contextmanager
def thread_log(path: Path) -> Iterator[None]:
    """The trial's log lines (this thread's only) in its folder, as Hydra's job logging does."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    ident = threading.get_ident()
    handler.addFilter(lambda record: record.thread == ident)
    logging.getLogger().addHandler(handler)
    try:
        yield
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
