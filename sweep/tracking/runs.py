"""MLflow at the edge: one parent run per sweep, one child run per trial (explicit parent id).

Keys are the same for every trial so MLflow's compare view lines them up: params named after
SGLang's flags plus `effective.<name>` from /server_info, metrics `tok_s`, `tok_s_ci95`,
`accept_len`, `speedup_vs_baseline` with its paired 95% interval `speedup_vs_baseline_ci95_low`
/ `_high` (harness.record.stats.paired_ratio), the per-level ones, tags `specsweep.*`, and the
trial's prompts as a dataset input (the workload, digest = workload.json's content hash).

MLflow is a copy, the trial folders are the record: each folder gets `tracking.json` (where and
under which parent it belongs) before the upload, and a tracking store that stops answering
mid-sweep turns tracking off with one warning instead of failing trials. `python -m sweep.sync`
uploads later, with the same `upload_trial`, whatever MLflow lacks.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import time
import warnings
from pathlib import Path
from typing import Any

import mlflow.data
import pandas
from mlflow.entities import DatasetInput, InputTag, Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT, MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

from harness.errors import ConfigError
from harness.record.layout import sqlite_uri
from harness.record.precision import meaningful
from harness.record.results import Outcome, TrialResult, run_steps, stepped_metrics
from harness.record.stats import speedup_metrics
from harness.server.procs import pid_alive
from harness.server.redact import redact_url_passwords
from harness.trial import EFFECTIVE_KEYS
from harness.workload import BUILTIN, load_prompts
from harness.workload import record as workload_record
from sweep.config.specs import PARAM_KEYS
from sweep.tracking import provenance

log = logging.getLogger(__name__)
EXPERIMENT_KIND = "mlflow.experimentKind"
TRACKING_RECORD = "tracking.json"


def resolve_sqlite_uri(uri: str) -> str:
    """Make a relative sqlite path absolute, so the store is found whatever the job's cwd."""
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri[len(prefix) :].startswith("/"):
        path = Path(uri[len(prefix) :]).resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        return sqlite_uri(path)
    return uri


def read_tracking_record(folder: Path) -> dict[str, Any] | None:
    path = folder / TRACKING_RECORD
    return json.loads(path.read_text()) if path.is_file() else None


def baseline_runs(record: dict[str, Any]) -> dict[int, float]:
    """The baseline's tok/s per run number a tracking record keeps (JSON keys are strings)."""
    return {int(k): float(v) for k, v in (record.get("baseline_runs") or {}).items()}


# MLflow's status: FINISHED for a trial with a result (measured, stopped early with what it
# measured, or a duplicate given its source's), KILLED for one the sweep stopped, FAILED for the
# rest; the outcome itself is the specsweep.outcome tag.
_FINISHED = (Outcome.OK, Outcome.PRUNED, Outcome.DUPLICATE)


def run_status(outcome: Outcome) -> str:
    if outcome in _FINISHED:
        return "FINISHED"
    return "KILLED" if outcome is Outcome.INTERRUPTED else "FAILED"


def trial_times(result: TrialResult) -> tuple[int | None, int | None]:
    """(start, end) of the trial in epoch ms: its result.json was written as it ended, and it
    ran wall_s before that. (None, None) without a folder to read."""
    path = Path(result.folder) / "result.json" if result.folder else None
    if path is None or not path.is_file():
        return None, None
    end = int(path.stat().st_mtime * 1000)
    return (end - int(result.wall_s * 1000) if result.wall_s else None), end


class Tracker:
    def __init__(self, tracking_uri: str, experiment: str, artifact_root: Path):
        if tracking_uri.startswith(("http://", "https://")):
            # A dead tracking server must cost seconds per attempt, not MLflow's default minutes
            # of retries with backoff.
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
            # The summary prints where everything is; MLflow's per-run "View run" lines repeat it.
            os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
        self.client = MlflowClient(tracking_uri=tracking_uri)
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.artifact_root = artifact_root
        self.offline: str | None = None  # why tracking stopped, once the store stopped answering
        found = self.client.get_experiment_by_name(experiment)
        if found is None:
            self.experiment_id = self._create(experiment, artifact_root)
        else:
            self.experiment_id = found.experiment_id
        # A sweep is runs, not traces: what UIs without 3.17's GenAI switch read (tracking.view)
        try:
            self.client.set_experiment_tag(
                self.experiment_id, EXPERIMENT_KIND, "custom_model_development"
            )
        except MlflowException:  # workers starting together: another one's insert won
            log.debug("experiment tag set concurrently", exc_info=True)

    def _create(self, experiment: str, artifact_root: Path) -> str:
        location = None  # a tracking server stores artifacts itself (--artifacts-destination)
        if not self.tracking_uri.startswith(("http://", "https://")):
            artifact_root.mkdir(parents=True, exist_ok=True)
            location = artifact_root.resolve().as_uri()
        try:
            return self.client.create_experiment(experiment, artifact_location=location)
        except MlflowException:  # another worker created it a moment ago
            found = self.client.get_experiment_by_name(experiment)
            if found is None:
                raise
            return found.experiment_id

    def close_orphan_sweeps(self) -> list[str]:
        """Parent runs a crashed sweep on this host left RUNNING -> KILLED."""
        closed = []
        runs = self.client.search_runs(
            [self.experiment_id],
            filter_string="tags.`specsweep.role` = 'sweep' and attributes.status = 'RUNNING'",
        )
        for run in runs:
            tags = run.data.tags
            if tags.get("specsweep.worker_host") != socket.gethostname():
                continue
            pid = tags.get("specsweep.worker_pid")
            if pid and pid.isdigit() and pid_alive(int(pid)):
                continue
            self.client.set_terminated(run.info.run_id, status="KILLED")
            closed.append(run.info.run_id)
        return closed

    def start_sweep(self, name: str, tags: dict[str, str], params: dict[str, Any]) -> str:
        run = self.client.create_run(
            self.experiment_id, run_name=name, tags={**tags, "specsweep.role": "sweep"}
        )
        self._log(run.info.run_id, params=params)
        return run.info.run_id

    def end_sweep(
        self,
        run_id: str | None,
        metrics: dict[str, float],
        artifacts: list[Path | tuple[Path, str]],  # a file, or (file, artifact folder)
        status: str,
        tags: dict[str, str] | None = None,
    ) -> None:
        if run_id is None or self.offline:
            return
        try:
            self.close_sweep(run_id, metrics, artifacts, status, tags)
        except Exception as exc:
            self.went_offline(exc)

    def close_sweep(
        self,
        run_id: str,
        metrics: dict[str, float],
        artifacts: list[Path | tuple[Path, str]],
        status: str,
        tags: dict[str, str] | None = None,
    ) -> None:
        self._log(run_id, metrics=metrics)
        for key, value in (tags or {}).items():
            self.client.set_tag(run_id, key, value)
        for item in artifacts:
            path, folder = item if isinstance(item, tuple) else (item, None)
            self.client.log_artifact(run_id, str(path), folder)
        self.client.set_terminated(run_id, status=status)

    def log_result_run(
        self,
        name: str,
        role: str,
        tags: dict[str, str],
        params: dict[str, Any],
        metrics: dict[str, float],
        artifacts: list[Path],
    ) -> str:
        """A finished run of its own (`specsweep.role` = role) with its numbers and files: a
        result measured after the sweep (the adaptive head-to-head). A `mlflow.parentRunId` tag
        files it under the sweep's run in the UI."""
        run = self.client.create_run(
            self.experiment_id, run_name=name, tags={**tags, "specsweep.role": role}
        )
        run_id = run.info.run_id
        self._log(run_id, params=params, metrics=metrics)
        for path in artifacts:
            self.client.log_artifact(run_id, str(path))
        self.client.set_terminated(run_id, status="FINISHED")
        return run_id

    def log_trial(
        self,
        result: TrialResult,
        *,
        parent_run_id: str | None,
        study: str,
        baseline_tok_s: float | None,
        baseline_runs: dict[int, float] | None = None,
    ) -> str | None:
        """Record where the trial belongs in its folder, then upload it; None if MLflow is down
        (the folder has everything for `python -m sweep.sync`). `baseline_runs`: the baseline's
        tok/s per run number, for the speedup's paired interval."""
        if result.folder and Path(result.folder).is_dir():
            record = {
                "experiment": self.experiment,
                "mlflow_uri": redact_url_passwords(self.tracking_uri),
                "parent_run_id": parent_run_id,
                "study": study,
                "baseline_tok_s": baseline_tok_s,
                "baseline_runs": {str(k): v for k, v in (baseline_runs or {}).items()},
            }
            (Path(result.folder) / TRACKING_RECORD).write_text(json.dumps(record, indent=2) + "\n")
        if self.offline:
            return None
        try:
            return self.upload_trial(
                result,
                parent_run_id=parent_run_id,
                study=study,
                baseline_tok_s=baseline_tok_s,
                baseline_runs=baseline_runs,
            )
        except Exception as exc:  # the store's failure must not take the measured trial with it
            self.went_offline(exc)
            return None

    def went_offline(self, exc: Exception) -> None:
        from sweep.readout.console import console

        self.offline = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        uri = redact_url_passwords(self.tracking_uri)
        console.print(
            f"[bold yellow]warning:[/] MLflow at {uri} stopped answering ({self.offline}). The "
            "sweep goes on without it: every trial folder keeps its results, config and logs. "
            f"Upload them later with: python -m sweep.sync --tracking-dir "
            f"{self.artifact_root.parent} --mlflow-uri {uri}",
            soft_wrap=True,
        )

    def logged_folders(self) -> dict[str, list[Any]]:
        """Trial folder -> the runs of this experiment that were uploaded from it."""
        found: dict[str, list[Any]] = {}
        token = None
        while True:
            page = self.client.search_runs([self.experiment_id], max_results=1000, page_token=token)
            for run in page:
                folder = run.data.tags.get("specsweep.folder")
                if folder:
                    found.setdefault(folder, []).append(run)
            token = page.token
            if not token:
                return found

    def upload_trial(
        self,
        result: TrialResult,
        *,
        parent_run_id: str | None,
        study: str,
        baseline_tok_s: float | None,
        baseline_runs: dict[int, float] | None = None,
    ) -> str:
        tags = {
            MLFLOW_RUN_NAME: result.name,
            "specsweep.outcome": str(result.outcome),
            "specsweep.engine": result.engine,
            "specsweep.role": result.role,
            "specsweep.simulated": str(result.simulated).lower(),
            "specsweep.clock_scale": str(result.clock_scale),
            "specsweep.study": study,
            "specsweep.folder": result.folder,
        }
        if result.number is not None:
            tags["specsweep.trial_number"] = str(result.number)
        if parent_run_id:
            tags[MLFLOW_PARENT_RUN_ID] = parent_run_id
        if result.folder:
            tags.update(provenance.read_tags(Path(result.folder)))
        if result.error:
            tags["specsweep.error"] = result.error[:4000]
        if result.warnings:
            tags["specsweep.warning"] = ",".join(result.warnings)
        if result.related:  # the trial a duplicate / predicted OOM was inferred from
            tags["specsweep.related"] = result.related
        if result.oom_kind:
            tags["specsweep.oom_kind"] = result.oom_kind
        # The trial's own start and end, so the UI's Duration is the trial's, not the upload's.
        start, end = trial_times(result)
        run = self.client.create_run(
            self.experiment_id, run_name=result.name, tags=tags, start_time=start
        )
        run_id = run.info.run_id
        # The same keys for every trial, whatever its outcome ("None": not known for this one).
        params = {key: result.params.get(key) for key in PARAM_KEYS}
        params.update({f"effective.{k}": result.effective.get(k) for k in EFFECTIVE_KEYS})
        metrics = dict(result.metrics)
        # speedup_vs_baseline, with its paired 95% interval when the baseline's runs are known
        metrics.update(
            speedup_metrics(metrics.get("tok_s"), result.runs, baseline_tok_s, baseline_runs)
        )
        if result.startup_s is not None:
            metrics["startup_s"] = result.startup_s  # server clock (simulated when engine=sim)
        if result.teardown_s is not None:
            metrics["teardown_s"] = result.teardown_s  # wall clock: stop until the group is gone
        if result.gpu_release_s is not None:  # measured only where NVML is usable
            metrics["gpu_release_s"] = result.gpu_release_s
        self._log(run_id, params=params, metrics=metrics)
        self._log_runs(run_id, result)
        if result.folder:
            self._log_workload(run_id, Path(result.folder))
        if result.folder and Path(result.folder).is_dir():
            self.client.log_artifacts(run_id, result.folder)
        self.client.set_terminated(run_id, status=run_status(result.outcome), end_time=end)
        return run_id

    def _log_workload(self, run_id: str, folder: Path) -> None:
        """The trial's prompts as an MLflow dataset input (the Datasets column and the run's
        Inputs), named after the workload, with workload.json's content hash as its digest."""
        record = workload_record.read(folder)
        if record is None:
            return
        try:
            prompts = load_prompts(record["source"], 0, tuple(record["categories"]))
        except ConfigError:  # a user file that has since moved: workload.json still says it all
            return
        table = pandas.DataFrame(
            {
                "id": [p.id for p in prompts],
                "category": [p.category for p in prompts],
                "messages": [json.dumps(list(p.messages), ensure_ascii=False) for p in prompts],
                "est_prompt_tokens": [workload_record.estimated_tokens(p) for p in prompts],
            }
        )
        source = "harness/data" if record["source"] == BUILTIN else record["source"]
        # MLflow's hints ("can be interpreted in multiple ways": it is a local path; integer
        # columns cannot hold missing values: these never do) are not the user's business.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            dataset = mlflow.data.from_pandas(
                table, source=source, name=record["name"], digest=record["sha256"][:16]
            )._to_mlflow_entity()
        context = InputTag(key=MLFLOW_DATASET_CONTEXT, value="benchmark")
        self.client.log_inputs(run_id, datasets=[DatasetInput(dataset, tags=[context])])

    def _log_runs(self, run_id: str, result: TrialResult) -> None:
        """Each run's values as steps, so the UI plots a trial's runs one after another."""
        now = int(time.time() * 1000)
        # Speed, acceptance and the memory window (harness.measure.memory_probe):
        # run.token_usage_mean_c150; the trial's aggregates (kv_pool_tokens, requests_fit,
        # kv_bound) are its metrics. Then the curves: by window; P(>=k) by depth k.
        steps = run_steps(result.runs) + stepped_metrics(result)
        metrics = [Metric(key, meaningful(key, value), now, step) for key, value, step in steps]
        for start in range(0, len(metrics), 1000):  # MLflow's batch limit
            self.client.log_batch(run_id, metrics=metrics[start : start + 1000])

    def _log(
        self,
        run_id: str,
        params: dict[str, Any] | None = None,
        metrics: dict[str, float] | None = None,
        tags: dict[str, str] | None = None,
    ) -> None:
        now = int(time.time() * 1000)
        self.client.log_batch(
            run_id,
            metrics=[
                Metric(k, meaningful(k, v), now, 0)  # the digits it is worth: 88.9, not 88.871...
                for k, v in (metrics or {}).items()
                if v is not None and math.isfinite(float(v))
            ],
            params=[Param(k, str(v)) for k, v in (params or {}).items()],
            tags=[RunTag(k, v) for k, v in (tags or {}).items()],
        )
