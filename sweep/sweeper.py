"""The project's Hydra sweeper: Optuna's ask-and-tell over the search space in conf/search/.

Order of a sweep: validate everything (no server yet) -> open the study and the MLflow parent
run -> measure the baseline once per study (or reuse it) -> ask / launch / record / tell for
`search.n_trials` trials -> print the summary and say where the results are.
Hydra only loads sweepers from the `hydra_plugins` package; `hydra_plugins/specsweep_sweeper`
subclasses `SpecsweepSweeperImpl` so that the code lives here.
"""

from __future__ import annotations

import json
import logging
import socket
import time
import traceback
import warnings
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import optuna
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from harness.errors import ConfigError, PortInUse, SpecsweepError
from harness.results import Outcome, TrialResult
from sweep.config import baseline_key, build_trial_spec
from sweep.console import ConsoleReporter, console, fmt_duration, summary_table
from sweep.space import SearchSpace
from sweep.tracking import Tracker, resolve_sqlite_uri

log = logging.getLogger(__name__)

MAX_CONSECUTIVE_ERRORS = 3
_FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL)
_BASELINE_KEYS = ("drafter", "server.speculative_")


def _override_key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


class SpecsweepSweeperImpl(Sweeper):
    def __init__(self) -> None:
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.launcher = None
        self._job_idx = 0

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    # -- the sweep -----------------------------------------------------------------------------
    def sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None and self.hydra_context is not None
        cfg = self.config
        try:
            plan = self._plan(arguments)
        except SpecsweepError as exc:
            console.print(f"[red]error:[/red] {exc}")
            raise SystemExit(2) from None
        return _SweepRun(self, cfg, arguments, plan).execute()

    def _plan(self, arguments: list[str]) -> dict[str, Any]:
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
        search = self.config.search
        if search.n_trials < 0:
            raise ConfigError(f"search.n_trials={search.n_trials}: must be >= 0.")
        if search.direction not in ("maximize", "minimize"):
            raise ConfigError(f"search.direction={search.direction!r}: maximize or minimize.")
        if search.objective != "tok_s":
            raise ConfigError(
                f"search.objective={search.objective!r}: only tok_s (single-stream decode "
                "tokens/s) is available so far."
            )
        if search.sampler.name not in ("tpe", "random"):
            raise ConfigError(f"search.sampler.name={search.sampler.name!r}: tpe or random.")
        space = SearchSpace.from_config(search.space)
        # Compose and freeze a trial and the baseline now: a typo costs a second, not a load.
        trial_cfg = self.compose(arguments)
        build_trial_spec(trial_cfg)
        baseline_cfg = self.compose(baseline_overrides(arguments, "baseline_check"))
        build_trial_spec(baseline_cfg)
        return {"space": space, "baseline_key": baseline_key(baseline_cfg), "trial_cfg": trial_cfg}

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
        except (PortInUse, KeyboardInterrupt):
            raise
        except Exception as exc:  # a harness bug must not take the measured trials with it
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


def baseline_overrides(arguments: Sequence[str], name: str) -> list[str]:
    kept = [a for a in arguments if not _override_key(a).startswith(_BASELINE_KEYS)]
    return [*kept, "drafter=none", f"trial.name={name}", "trial.role=baseline"]


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


class _SweepRun:
    """State of one `python sweep.py -m` invocation."""

    def __init__(self, sweeper: SpecsweepSweeperImpl, cfg: DictConfig, arguments, plan):
        self.sweeper = sweeper
        self.cfg = cfg
        self.arguments = list(arguments)
        self.space: SearchSpace = plan["space"]
        self.baseline_key: str = plan["baseline_key"]
        self.simulated = cfg.engine.name == "sim"
        self.reporter = ConsoleReporter(self.simulated)
        self.results: list[TrialResult] = []
        self.baseline: TrialResult | None = None
        self.results_dir = Path(cfg.tracking.dir).resolve()
        self.study_dir = Path(cfg.hydra.sweep.dir).resolve()

    def execute(self) -> list[TrialResult]:
        cfg = self.cfg
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        logging.getLogger("mlflow").setLevel(logging.WARNING)  # no migration chatter
        storage = resolve_sqlite_uri(cfg.tracking.optuna_storage)
        tracker = Tracker(
            resolve_sqlite_uri(cfg.tracking.mlflow_uri),
            cfg.tracking.experiment,
            self.results_dir / "mlartifacts",
        )
        study = optuna.create_study(
            study_name=cfg.search.study_name,
            storage=storage,
            sampler=make_sampler(cfg),
            direction=cfg.search.direction,
            load_if_exists=True,
        )
        for params in cfg.search.enqueue:
            study.enqueue_trial(dict(params), skip_if_exists=True)
        self._banner(study, storage, tracker)
        parent = tracker.start_sweep(
            f"sweep-{datetime.now():%Y%m%d-%H%M%S}",
            tags={
                "specsweep.engine": cfg.engine.name,
                "specsweep.simulated": str(self.simulated).lower(),
                "specsweep.study": cfg.search.study_name,
                "specsweep.host": socket.gethostname(),
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
            self.baseline = self._baseline(study, tracker, parent)
            self._trials(study, tracker, parent)
            status = "FINISHED"
        except KeyboardInterrupt:
            status = "KILLED"
            console.print(
                "[yellow]interrupted: the server was stopped; results so far are kept.[/]"
            )
            raise
        except PortInUse as exc:
            console.print(f"[red]error:[/red] {exc}")
            raise SystemExit(1) from None
        finally:
            self._finish(tracker, parent, status)
        return self.results

    # -- steps ---------------------------------------------------------------------------------
    def _banner(self, study: optuna.Study, storage: str, tracker: Tracker) -> None:
        cfg = self.cfg
        done = len(study.get_trials(deepcopy=False, states=_FINISHED))
        label = (
            "[bold yellow]SIMULATED[/] (engine=sim: numbers come from a performance model, "
            "not hardware)"
            if self.simulated
            else f"engine={cfg.engine.name}"
        )
        console.rule(f"specsweep · study {cfg.search.study_name}")
        console.print(f"{label}")
        console.print(
            f"model {cfg.model.name} (TP {cfg.model.tp}) on {cfg.hardware.gpus}x {cfg.hardware.gpu}"
            f"; drafter {cfg.drafter.name}"
        )
        console.print(
            f"{cfg.search.n_trials} trials + baseline; {cfg.benchmark.warmup} warm-up + "
            f"{cfg.benchmark.runs} runs x {cfg.benchmark.requests_per_run} requests of up to "
            f"{cfg.benchmark.max_tokens} tokens"
            + (f"; study already has {done} trials" if done else "")
        )
        console.print(f"results in {self.study_dir}")

    def _baseline(self, study: optuna.Study, tracker: Tracker, parent: str) -> TrialResult | None:
        if not self.cfg.search.baseline:
            return None
        attr = f"baseline.{self.baseline_key}"
        stored = study.user_attrs.get(attr)
        if stored and (Path(stored["folder"]) / "result.json").is_file():
            result = TrialResult.read(Path(stored["folder"]))
            console.print(
                "[bold][baseline][/bold] reusing the study's baseline: "
                f"{result.metrics['tok_s']:.1f} tok/s ({result.folder})"
            )
            return result
        self.reporter.trial_header(0, self.cfg.search.n_trials, "baseline", "speculation off", None)
        name = f"baseline_{self.baseline_key}"
        result = self.sweeper.launch(baseline_overrides(self.arguments, name))
        tracker.log_trial(
            result, parent_run_id=parent, study=self.cfg.search.study_name, baseline_tok_s=None
        )
        self.reporter.trial_done(result, None)
        if result.outcome is not Outcome.OK:
            console.print("[red]the baseline failed: trials run on, without speedups.[/red]")
            return result
        study.set_user_attr(attr, {"folder": result.folder, "tok_s": result.metrics["tok_s"]})
        return result

    @property
    def baseline_tok_s(self) -> float | None:
        if self.baseline is None or self.baseline.outcome is not Outcome.OK:
            return None
        return self.baseline.metrics.get("tok_s")

    def _trials(self, study: optuna.Study, tracker: Tracker, parent: str) -> None:
        n, errors_in_a_row, walls = self.cfg.search.n_trials, 0, []
        for index in range(1, n + 1):
            trial = study.ask()
            try:
                values = self.space.suggest(trial)
            except (ValueError, SpecsweepError) as exc:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                console.print(f"[red]search space error:[/red] {exc}")
                raise SystemExit(2) from None
            name = f"trial_{trial.number:04d}"
            eta = (sum(walls) / len(walls)) * (n - index + 1) if walls else None
            self.reporter.trial_header(index, n, name, self.space.describe(values), eta)
            started = time.monotonic()
            try:
                result = self.sweeper.launch(
                    [
                        *self.arguments,
                        *self.space.overrides(values),
                        f"trial.name={name}",
                        f"trial.number={trial.number}",
                        "trial.role=trial",
                    ]
                )
            except BaseException:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                raise
            walls.append(time.monotonic() - started)
            result.number = trial.number
            self.results.append(result)
            run_id = tracker.log_trial(
                result,
                parent_run_id=parent,
                study=self.cfg.search.study_name,
                baseline_tok_s=self.baseline_tok_s,
            )
            self._tell(study, trial, result, run_id)
            self.reporter.trial_done(result, self.baseline_tok_s)
            errors_in_a_row = errors_in_a_row + 1 if result.outcome is Outcome.ERROR else 0
            if errors_in_a_row >= MAX_CONSECUTIVE_ERRORS:
                console.print(
                    f"[red]{errors_in_a_row} trials in a row failed inside specsweep itself; "
                    f"stopping. Last error: {result.error}[/red]"
                )
                raise SystemExit(1)

    def _tell(self, study: optuna.Study, trial: optuna.Trial, result: TrialResult, run_id: str):
        for key, value in (
            ("outcome", str(result.outcome)),
            ("folder", result.folder),
            ("mlflow_run_id", run_id),
            ("effective", result.effective),
        ):
            trial.set_user_attr(key, value)
        value = result.metrics.get(self.cfg.search.objective)
        if result.outcome is Outcome.OK and value is not None:
            study.tell(trial, value)
        else:
            # A failure is a failure, not a penalty value that would mislead the sampler.
            study.tell(trial, state=optuna.trial.TrialState.FAIL)

    def _finish(self, tracker: Tracker, parent: str, status: str) -> None:
        table = summary_table(self.results, self.baseline, self.simulated)
        console.print()
        console.print(table)
        ok = [r for r in self.results if r.outcome is Outcome.OK and "tok_s" in r.metrics]
        best = max(ok, key=lambda r: r.metrics["tok_s"], default=None)
        metrics: dict[str, float] = {
            "n_trials": float(len(self.results)),
            "n_ok": float(len(ok)),
            "n_oom": float(sum(r.outcome is Outcome.OOM for r in self.results)),
        }
        if self.baseline_tok_s:
            metrics["baseline_tok_s"] = self.baseline_tok_s
        if best:
            metrics["best_tok_s"] = best.metrics["tok_s"]
            console.print(_best_line(best, self.baseline if self.baseline_tok_s else None))
            if self.baseline_tok_s:
                metrics["best_speedup_vs_baseline"] = best.metrics["tok_s"] / self.baseline_tok_s
        summary = self.study_dir / f"summary-{datetime.now():%Y%m%d-%H%M%S}.json"
        summary.parent.mkdir(parents=True, exist_ok=True)
        summary.write_text(
            json.dumps(
                {
                    "status": status,
                    "simulated": self.simulated,
                    "baseline": self.baseline.to_dict() if self.baseline else None,
                    "best": best.name if best else None,
                    "trials": [r.to_dict() for r in self.results],
                },
                indent=2,
                default=str,
            )
        )
        tracker.end_sweep(parent, metrics, [summary], status)
        mlflow_db = resolve_sqlite_uri(self.cfg.tracking.mlflow_uri)
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


def _best_line(best: TrialResult, baseline: TrialResult | None) -> str:
    p = best.effective or best.params
    config = (
        f"steps={p.get('speculative_num_steps')} topk={p.get('speculative_eagle_topk')} "
        f"draft={p.get('speculative_num_draft_tokens')} mem={p.get('mem_fraction_static')} "
        f"hicache={p.get('hicache_size')}"
    )
    tok, ci = best.metrics["tok_s"], best.metrics.get("tok_s_ci95", float("nan"))
    line = f"\n[bold]Best:[/bold] {best.name} ({config}): {tok:.1f} ± {ci:.1f} tok/s"
    if baseline is None:
        return line
    base, base_ci = baseline.metrics["tok_s"], baseline.metrics.get("tok_s_ci95", float("nan"))
    line += f", {tok / base:.2f}× the baseline ({base:.1f} ± {base_ci:.1f} tok/s)"
    if tok - ci > base + base_ci:
        line += " — faster beyond the 95% intervals"
    elif tok + ci < base - base_ci:
        line += " — [red]slower than the baseline[/red]: speculation does not pay here"
    else:
        line += " — the intervals overlap: not distinguishable from the baseline"
    return line


__all__ = ["SpecsweepSweeperImpl", "fmt_duration"]
