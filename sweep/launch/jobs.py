"""One job path for every trial of a sweep: compose its config, run it in its folder.

Serial trials and trials side by side in GPU slots both go through `Jobs.run`: Hydra's config
loader composes the job (the composition Hydra's launcher would make), and
`sweep.launch.app.run_job` runs it in this thread with its folder given and its log lines in the
folder's `trial.log`. Hydra's launcher is not used for trials: its BasicLauncher runs one job at a
time, and the job context it sets up (HydraConfig, logging) is process-wide, so it cannot serve
threads. It still places whole sweep workers (`worker.count > 1`, `sweep.launch.workers`).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import logging.config
import threading
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType
from omegaconf import DictConfig, OmegaConf, read_write

from harness.errors import MachineNotReady
from harness.record.results import Outcome, TrialResult
from sweep.launch.app import run_job
from sweep.readout.trial_lines import ConsoleReporter

log = logging.getLogger(__name__)
LOG_FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"  # conf/hydra/job_logging
COMPOSED_KEPT = 64  # compositions remembered (a config is ~100 KB)


class Jobs:
    """Composes and runs the sweep's jobs; safe to call from several GPU-slot threads."""

    def __init__(self, config_loader: Any, config: DictConfig):
        self._loader = config_loader
        self._config = config  # the sweep's config: the user's overrides applied
        self._lock = threading.Lock()  # Hydra's config loader is not made for threads
        self._composed: dict[tuple[str, ...], DictConfig] = {}  # by non-trial overrides
        self._parser = OverridesParser.create()
        self._logging_ready = False

    def retarget(self, config_loader: Any) -> None:
        """Compose from another loader from now on (the study's snapshot, once it took it): the
        same files at another place, so what was composed stays valid and is forgotten anyway."""
        with self._lock:
            self._loader = config_loader
            self._composed.clear()

    def compose(self, overrides: Sequence[str]) -> DictConfig:
        """The job's full config (its `hydra` node included), as Hydra's launcher composes it.

        A composition costs Hydra ~0.4 s of CPU (the defaults tree and every file merged again),
        under this lock and the GIL: with GPU slots every trial's composition waits for the
        others'. Hydra composes a job in two steps: the defaults tree from the overrides that
        select files (config groups: `drafter=...`, `experiment=...`), then every other
        override applied over it in order (`ConfigLoaderImpl._apply_overrides_to_config`). So
        the first step is remembered by its group overrides, which differ between trials only
        where a searched knob selects a file, and each job gets a copy with its value overrides
        (the searched values, its `trial.*` values, a slot's port) applied by Hydra's own second
        step, checked by the schema as Hydra checks them. Overrides Hydra treats otherwise
        (`+`, `++`, `~`, a package, the `hydra.` node) stay in the remembered step."""
        with self._lock:
            parsed = self._parser.parse_overrides(list(overrides))
            later = [o for o in parsed if self._applied_over(o)]
            key = tuple(o.input_line for o in parsed if not self._applied_over(o))
            composed = self._composed.pop(key, None)
            if composed is None:
                composed = self._loader.load_sweep_config(self._config, list(key))
            self._composed[key] = composed  # most recent last
            while len(self._composed) > COMPOSED_KEPT:
                self._composed.pop(next(iter(self._composed)))
            job = copy.deepcopy(composed)
        ConfigLoaderImpl._apply_overrides_to_config(later, job)  # Hydra's own second step
        if OmegaConf.select(job, "hydra.overrides.task") is not None:
            with read_write(job.hydra):  # what Hydra records as the job's overrides: this job's
                job.hydra.overrides.task = list(overrides)
        return job

    def _applied_over(self, override: Override) -> bool:
        """A plain `key=value` of a config value (not a group, not Hydra's own node): Hydra
        applies it after composing the defaults tree, so it can be applied over a copy."""
        key = override.key_or_group
        return (
            override.type is OverrideType.CHANGE
            and override.package is None
            and not override.is_sweep_override()
            and key.split(".")[0] != "hydra"
            and not self._loader.repository.group_exists(key)  # Hydra's own test for a group
        )

    def run(
        self, overrides: Sequence[str], reporter: ConsoleReporter, folder: Path | None = None
    ) -> TrialResult:
        """One job in its folder (`folder`, else the one Hydra's launcher would give it: a
        resolve relaunch goes inside its trial's); a job that raised becomes an `error` result,
        recorded there.

        A machine that cannot take the launch (MachineNotReady) and an interruption propagate:
        no trial could succeed, so the sweep stops instead of recording failures."""
        job_cfg: DictConfig | None = None
        given = folder
        folder = given or self._fallback_folder(overrides)
        try:
            job_cfg = self.compose(overrides)
            folder = given or job_folder(job_cfg)
            folder.mkdir(parents=True, exist_ok=True)
            self._job_logging(job_cfg)
            with thread_log(folder / "trial.log"):
                try:
                    return run_job(task_config(job_cfg), folder, reporter)
                except (MachineNotReady, KeyboardInterrupt):
                    raise
                except Exception:
                    log.exception("job failed")  # the traceback in the trial's log
                    raise
        except (MachineNotReady, KeyboardInterrupt):
            raise
        except Exception as exc:  # a harness bug must not take the measured trials with it
            return self._error_result(overrides, job_cfg, folder, exc)

    def _job_logging(self, job_cfg: DictConfig) -> None:
        """Hydra's job logging (conf/hydra/job_logging) once, without its per-job file: each
        job's file is `thread_log`, so trials side by side keep their lines apart."""
        with self._lock:
            if self._logging_ready:
                return
            node = OmegaConf.select(job_cfg, "hydra.job_logging")
            conf = OmegaConf.to_container(node, resolve=False) if node is not None else None
            if not isinstance(conf, dict) or not conf:  # no job logging configured
                self._logging_ready = True
                return
            conf.get("handlers", {}).pop("file", None)
            root = conf.get("root", {})
            root["handlers"] = [h for h in root.get("handlers", []) if h != "file"]
            logging.config.dictConfig(conf)
            self._logging_ready = True

    def _fallback_folder(self, overrides: Sequence[str]) -> Path | None:
        """Where the job's folder would be, for a job whose config does not even compose."""
        name = override_value(overrides, "trial.name")
        if name is None:
            return None
        return Path(str(self._config.hydra.sweep.dir)).resolve() / name

    def _error_result(
        self,
        overrides: Sequence[str],
        job_cfg: DictConfig | None,
        folder: Path | None,
        exc: BaseException,
    ) -> TrialResult:
        cfg = job_cfg if job_cfg is not None else self._config
        result = TrialResult(
            name=override_value(overrides, "trial.name") or "?",
            role=str(job_cfg.trial.role) if job_cfg is not None else "trial",
            outcome=Outcome.ERROR,
            engine=str(cfg.engine.name),
            simulated=cfg.engine.name == "sim",
            clock_scale=1.0,
            params={},
            folder=str(folder) if folder is not None else "",
            error="".join(traceback.format_exception_only(exc)).strip(),
        )
        if folder is not None:  # the folder is the record: `python -m sweep.sync` restores it
            folder.mkdir(parents=True, exist_ok=True)
            result.write(folder)
        return result


def job_folder(job_cfg: DictConfig) -> Path:
    """hydra.sweep.dir / hydra.sweep.subdir, as Hydra's launcher places a job."""
    return (Path(str(job_cfg.hydra.sweep.dir)) / str(job_cfg.hydra.sweep.subdir)).resolve()


def task_config(job_cfg: DictConfig) -> DictConfig:
    """What the task sees: the job's config without Hydra's own node."""
    return OmegaConf.masked_copy(job_cfg, [k for k in job_cfg if k != "hydra"])


def override_value(overrides: Sequence[str], key: str) -> str | None:
    prefix = f"{key}="
    return next((o[len(prefix) :] for o in reversed(overrides) if o.startswith(prefix)), None)


@contextlib.contextmanager
def thread_log(path: Path) -> Iterator[None]:
    """The trial's log lines (this thread's only) in its folder, as Hydra's job logging does."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    ident = threading.get_ident()
    handler.addFilter(lambda record: record.thread == ident)
    logging.getLogger().addHandler(handler)
    try:
        yield
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
