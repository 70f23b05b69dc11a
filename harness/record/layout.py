"""Where a sweep's results live under `tracking.dir`: the one description of the folder.

    <root>/mlflow.db                       MLflow's local store (tracking=local)
    <root>/optuna.db                       Optuna's local storage
    <root>/mlartifacts/                    MLflow's artifact copies of the trial folders
    <root>/servers/port-<N>.pid            the live server on port N (a crashed sweep's leftover)
    <root>/drafter-checks/                 cached drafter verdicts, per checkpoint
    <root>/<study>/<trial>/                one self-describing trial folder (result.json, ...)
    <root>/<study>/summary-<time>.json     one per sweep (`python -m sweep.sync` closes its run)
    <root>/reports/<experiment>/           `python -m analysis.report`
    <root>/reproduce/<trial>-<time>/       `python -m sweep.reproduce`

Every reader and writer asks this object instead of joining the names itself, so the layout can
change in one place. Plain paths only: nothing here knows Hydra, Optuna or MLflow.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

STAMP = "%Y%m%d-%H%M%S"  # the time in summary, recheck and reproduce names


def stamp(when: datetime | None = None) -> str:
    return (when or datetime.now()).strftime(STAMP)


def sqlite_uri(path: Path) -> str:
    return f"sqlite:///{path}"


@dataclass(frozen=True)
class ResultsLayout:
    root: Path  # tracking.dir, resolved

    @classmethod
    def at(cls, tracking_dir: str | Path) -> ResultsLayout:
        return cls(Path(tracking_dir).expanduser().resolve())

    # -- the stores --------------------------------------------------------------------------
    @property
    def mlflow_db(self) -> Path:
        return self.root / "mlflow.db"

    @property
    def mlflow_uri(self) -> str:
        return sqlite_uri(self.mlflow_db)

    @property
    def optuna_db(self) -> Path:
        return self.root / "optuna.db"

    @property
    def optuna_uri(self) -> str:
        return sqlite_uri(self.optuna_db)

    @property
    def artifacts(self) -> Path:
        return self.root / "mlartifacts"

    # -- bookkeeping -------------------------------------------------------------------------
    @property
    def servers(self) -> Path:
        return self.root / "servers"

    def server_pid_file(self, port: int) -> Path:
        """Where a live server is recorded, so a crashed sweep's leftover can be found."""
        return self.servers / f"port-{port}.pid"

    @property
    def drafter_checks(self) -> Path:
        return self.root / "drafter-checks"

    # -- studies and trials ------------------------------------------------------------------
    def study(self, name: str) -> Path:
        return self.root / name

    def trial_folders(self) -> list[Path]:
        """Every <study>/<trial>/ folder that holds a result."""
        return sorted(p.parent for p in self.root.glob("*/*/result.json"))

    def summaries(self) -> list[Path]:
        return sorted(self.root.glob("*/summary-*.json"))

    def latest_study(self) -> str | None:
        """The study swept last here (its newest summary), which `specsweep report` and
        `specsweep reproduce` read when no study is named; None before any sweep closed."""
        found = self.summaries()
        newest = max(found, key=lambda p: (p.name, p.stat().st_mtime), default=None)
        return newest.parent.name if newest is not None else None

    @staticmethod
    def summary_file(study_dir: Path, when: datetime | None = None) -> Path:
        """A sweep's summary, in its study folder (which Hydra's sweep dir may place elsewhere)."""
        return study_dir / f"summary-{stamp(when)}.json"

    # -- what other commands write -----------------------------------------------------------
    def report(self, experiment: str) -> Path:
        return self.root / "reports" / experiment

    def reproduction(self, trial: str, at: str) -> Path:
        """`at`: the stamp the reproduction's trial name carries too."""
        return self.root / "reproduce" / f"{trial}-{at}"
