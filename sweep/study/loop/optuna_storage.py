"""The Optuna storage a sweep shares with other workers, and URLs that are safe to print.

Local sweeps keep the study in sqlite. With `tracking=server` the study lives in PostgreSQL and
every worker (`python sweep.py -m` on this node or another) asks for trials from it. Optuna's
heartbeat makes a worker's death visible: each running trial beats every `heartbeat_interval`
seconds, and a trial silent for `grace_period` is failed by whichever worker looks next
(`fail_stale`, before every ask) and re-queued with the same parameters for another worker.

Optuna's private API is used here and nowhere else: ask-and-tell has no public way to start a
trial's heartbeat (`study.optimize` does it internally through `optuna.storages._heartbeat`), to
read a live trial's system attrs (where the retry callback notes `failed_trial`), or to hand the
retry callback a re-read trial. Those calls need `study._storage` and `trial._trial_id`; keeping
them in one module means an Optuna upgrade that changes them breaks one file, not three.
"""

from __future__ import annotations

import time
import warnings
from contextlib import contextmanager
from typing import Any

import optuna
from omegaconf import DictConfig
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.storages._heartbeat import get_heartbeat_thread  # private: see the docstring
from optuna.trial import FrozenTrial
from sqlalchemy.exc import IntegrityError, ProgrammingError

from harness.errors import ConfigError
from harness.server.redact import redact_url_passwords
from sweep.tracking.runs import resolve_sqlite_uri
from sweep.tracking.sqlite_wal import write_ahead_log


def redact_url(url: str) -> str:
    """`postgresql://user:secret@host/db` -> `postgresql://user:<redacted>@host/db`."""
    return redact_url_passwords(str(url))


def ensure_schema(url: str, attempts: int = 5) -> None:
    """Create Optuna's tables, tolerating workers that create them at the same moment (on a
    fresh PostgreSQL database the loser of that race gets a unique violation)."""
    if url.startswith("sqlite"):
        return
    for attempt in range(attempts):
        try:
            RDBStorage(url, skip_compatibility_check=True).engine.dispose()
            return
        except (IntegrityError, ProgrammingError):
            if attempt == attempts - 1:
                raise
            time.sleep(0.3 * (attempt + 1))


def grace_period(tracking: DictConfig) -> int | None:
    """Seconds a trial may be silent before another worker fails it (None: no heartbeats).

    Raises ConfigError, naming both keys and the fix, when the grace period would not outlast
    one beat: checked when the sweep is planned, before anything starts."""
    interval = tracking.heartbeat_interval
    if interval is None:
        return None
    if interval <= 0:
        raise ConfigError(
            f"tracking.heartbeat_interval={interval}: must be > 0 seconds (or null: no heartbeats)."
        )
    grace = tracking.grace_period or 2 * interval
    if grace <= interval:
        raise ConfigError(
            f"tracking.grace_period={grace} must exceed tracking.heartbeat_interval={interval}: "
            "a live trial would be failed between two beats. Set tracking.grace_period above "
            f"{interval}, e.g. tracking.grace_period={2 * interval}, or leave it unset (twice the "
            "interval)."
        )
    return int(grace)


def open_storage(cfg: DictConfig) -> str | RDBStorage:
    """The study's storage: an RDBStorage with heartbeats when configured, else the URL."""
    url = resolve_sqlite_uri(cfg.tracking.optuna_storage)
    grace = grace_period(cfg.tracking)
    ensure_schema(url)
    write_ahead_log(url)  # every attribute, claim and tell is a commit the slots wait on
    interval = cfg.tracking.heartbeat_interval
    if grace is None:
        return url
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return RDBStorage(
            url,
            # pre_ping: a worker idle for hours finds its pooled connections closed by the server
            engine_kwargs={"pool_pre_ping": True} if not url.startswith("sqlite") else None,
            heartbeat_interval=int(interval),
            grace_period=grace,
            heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(
                max_retry=cfg.tracking.max_retry
            ),
        )


def storage_url(storage: str | RDBStorage) -> str:
    return storage if isinstance(storage, str) else storage.url


def fail_stale(study: optuna.Study) -> None:
    """Fail trials whose worker stopped beating, and re-queue them (no-op without heartbeats)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


@contextmanager
def heartbeat(study: optuna.Study, trial: optuna.Trial):
    """Beat for `trial` while the block runs. `study.optimize` does this itself; ask-and-tell
    has to start Optuna's heartbeat thread on its own."""
    thread = get_heartbeat_thread(trial._trial_id, study._storage)
    thread.start()
    try:
        yield
    finally:
        thread.join()


def stale_callback(study: optuna.Study) -> Any:
    """The storage's retry callback, for trials failed outside the heartbeat (fail_orphans)."""
    getter = getattr(study._storage, "get_heartbeat_stale_trial_callback", None)
    return getter() if getter else None


def queue_again(study: optuna.Study, trial: optuna.Trial) -> None:
    """An interrupted trial (its worker was stopped, e.g. at a SLURM time limit) queued again
    with its parameters, as the heartbeat queues a dead worker's: its configuration was never
    measured, and the next ask in any worker takes it. Without heartbeats (a local sweep) the
    same callback queues it, so the resume line's "the interrupted trial runs again" holds
    there too; a crashed sweep's trials, which no one interrupted, stay failed."""
    callback = stale_callback(study) or optuna.storages.RetryFailedTrialCallback()
    callback(study, stored_trial(study, trial))


def stored_trial(study: optuna.Study, trial: optuna.Trial | FrozenTrial) -> FrozenTrial:
    """The trial as the storage has it now (a live Trial's system attrs, a re-read state)."""
    return study._storage.get_trial(trial._trial_id)


def retried_from(study: optuna.Study, trial: optuna.Trial) -> int | None:
    """The number of the failed trial this one re-runs (set by the heartbeat's retry callback)."""
    return stored_trial(study, trial).system_attrs.get("failed_trial")


def other_studies(study: optuna.Study) -> list[tuple[str, list[FrozenTrial]]]:
    """Every other study in the same storage with its trials (the model sampler's transfer,
    sweep/study/model/transfer.py, reads their measurements)."""
    out = []
    for other in study._storage.get_all_studies():
        if other.study_name == study.study_name:
            continue
        out.append(
            (other.study_name, study._storage.get_all_trials(other._study_id, deepcopy=False))
        )
    return out
