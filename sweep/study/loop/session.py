"""What the steps of one sweep share: the study and its stores, the GPU slots, the results."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import optuna
from omegaconf import DictConfig

from harness.record.results import Outcome, TrialResult
from sweep.launch.jobs import Jobs
from sweep.launch.slots import SlotPool
from sweep.readout.console import expected_startup
from sweep.readout.ranking import for_objective
from sweep.readout.trial_lines import ConsoleReporter, Header, SweepConsole
from sweep.study.loop.claims import Claims
from sweep.study.loop.decisions import SearchDriver
from sweep.study.loop.plan import SweepPlan
from sweep.tracking.runs import Tracker

CLAIM_POLL_S = 0.5  # how often a worker waiting for another's evaluation looks again


@dataclass
class StudySession:
    cfg: DictConfig
    plan: SweepPlan
    jobs: Jobs
    study: optuna.Study
    driver: SearchDriver
    claims: Claims
    tracker: Tracker
    parent_run_id: str
    study_dir: Path
    pool: SlotPool | None  # None: one trial at a time
    stopping: threading.Event = field(default_factory=threading.Event)  # Ctrl-C / SIGTERM
    results: list[TrialResult] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)  # results across slot threads
    # the trial lines' shared state: verbose or one line per trial, warnings said, headers
    console: SweepConsole = field(default_factory=SweepConsole)
    _last_header: Header | None = None  # one trial at a time: the header its reporters read
    # This sweep's baseline start-ups (marks, ready wall s): no Optuna trial holds them.
    baseline_starts: list[tuple[list, float | None]] = field(default_factory=list)

    @property
    def simulated(self) -> bool:
        return self.cfg.engine.name == "sim"

    @property
    def study_name(self) -> str:
        return str(self.cfg.search.study_name)

    def reporter(self, name: str) -> ConsoleReporter:
        """Trials side by side interleave their lines: then each line names its trial."""
        prefix = name if self.pool is not None else None
        ranking = for_objective(self.plan.objective)
        header = self.console.headers.get(name) or (self._last_header if prefix is None else None)
        return ConsoleReporter(
            self.simulated, prefix, ranking, self.expected_startup(), self.console, header
        )

    def expected_startup(self) -> dict[str, float]:
        """When each start-up phase usually begins: from the study's earlier starts that got
        ready (every sweep and worker of it, through the trials' user attributes) and this
        sweep's baseline."""
        starts = [
            (t.user_attrs.get("startup_marks") or [], t.user_attrs.get("startup_wall_s"))
            for t in self.study.get_trials(deepcopy=False)
            if t.user_attrs.get("outcome") == str(Outcome.OK)
        ]
        with self.lock:
            starts += self.baseline_starts
        return expected_startup(starts)

    def header(self, label: str, name: str, description: str, eta_s: float | None = None):
        """Said before a trial starts (verbose, or redrawn in place on a terminal); its line at
        the end starts with it."""
        reporter = ConsoleReporter(self.simulated, sweep=self.console)
        header = reporter.trial_header(label, name, description, eta_s)
        with self.lock:
            if name:
                self.console.headers[name] = header
            self._last_header = header

    def launch(self, overrides: list[str], name: str, folder: Path | None = None) -> TrialResult:
        """One job, here or in a GPU slot (its GPUs, port and pid file) beside other trials;
        `folder`: where it goes instead of its own (a resolve relaunch: inside its trial's)."""
        result = self._launch(overrides, name, folder)
        if result.role == "baseline" and result.outcome is Outcome.OK and result.startup_marks:
            with self.lock:
                self.baseline_starts.append((result.startup_marks, result.startup_wall_s))
        return result

    def _launch(self, overrides: list[str], name: str, folder: Path | None) -> TrialResult:
        if self.pool is None:
            return self.jobs.run(overrides, self.reporter(name), folder)
        with self.pool.slot() as slot:
            if self.stopping.is_set():
                raise KeyboardInterrupt("the sweep is stopping")
            placed = [
                *overrides,
                f"server.port={slot.port}",
                f"trial.gpus='{slot.cuda_visible_devices}'",
                f"trial.pid_file={slot.pid_file}",
            ]
            return self.jobs.run(placed, self.reporter(name), folder)

    def keep(self, result: TrialResult) -> None:
        with self.lock:
            self.results.append(result)

    def replace(self, result: TrialResult) -> None:
        """A result of this sweep's recorded anew (its runs pooled with a resolve relaunch's)."""
        with self.lock:
            self.results[:] = [result if r.name == result.name else r for r in self.results]

    def log(
        self,
        result: TrialResult,
        baseline_tok_s: float | None,
        baseline_runs: dict[int, float] | None = None,
    ) -> str | None:
        """The trial's MLflow child run under this sweep's parent (None: MLflow is down);
        `baseline_runs` (tok/s per run number) gives its speedup a paired interval."""
        return self.tracker.log_trial(
            result,
            parent_run_id=self.parent_run_id,
            study=self.study_name,
            baseline_tok_s=baseline_tok_s,
            baseline_runs=baseline_runs,
        )

    def sleep(self, seconds: float) -> None:
        """Wait, unless the sweep is stopping: then unwind like Ctrl-C."""
        if self.stopping.wait(seconds):
            raise KeyboardInterrupt("the sweep is stopping")
