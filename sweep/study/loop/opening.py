"""Opening a sweep's stores: MLflow, the Optuna study, the claims; refusing with a reason.

A store that does not answer stops the sweep before any launch (exit code 2) with what to start
or fix, rather than sweeping untracked. A study that optimises another objective is refused too:
its values could not be compared with this sweep's.
"""

from __future__ import annotations

import os
import socket
import warnings
from pathlib import Path

import optuna
from mlflow.exceptions import MlflowException
from omegaconf import DictConfig, OmegaConf
from rich.markup import escape
from sqlalchemy.exc import SQLAlchemyError

from harness.record.layout import ResultsLayout
from sweep.readout.console import console
from sweep.study.loop.claims import Claims
from sweep.study.loop.decisions import SearchDriver
from sweep.study.loop.optuna_storage import (
    grace_period,
    open_storage,
    redact_url,
    stale_callback,
    storage_url,
)
from sweep.study.loop.plan import SweepPlan
from sweep.study.model.sampler import EXPLORE, ModelSampler, model_refusal
from sweep.study.search import memory
from sweep.study.search.space import SearchSpace, space_hash
from sweep.study.trial import capacity
from sweep.study.trial.objective import Objective
from sweep.tracking import identity
from sweep.tracking.runs import Tracker, resolve_sqlite_uri
from sweep.tracking.sqlite_wal import write_ahead_log

LOCAL_LEASE_S = 600.0  # claims without heartbeats (sqlite): a dead sweep's expire after this


def open_tracker(cfg: DictConfig) -> Tracker:
    uri = resolve_sqlite_uri(cfg.tracking.mlflow_uri)
    write_ahead_log(uri)  # each trial's run is several commits, slots waiting on each other's
    try:
        return Tracker(
            uri,
            cfg.tracking.experiment,
            ResultsLayout.at(cfg.tracking.dir).artifacts,
        )
    except Exception as exc:  # before any launch: refuse rather than sweep untracked
        detail = str(exc).splitlines()[0] if isinstance(exc, MlflowException) else ""
        console.print(
            f"[red]error:[/red] MLflow at {redact_url(cfg.tracking.mlflow_uri)} does not "
            f"answer ({type(exc).__name__}{': ' + redact_url(detail)[:300] if detail else ''})"
            ". Start the tracking server or fix tracking.mlflow_uri.",
            soft_wrap=True,
        )
        raise SystemExit(2) from None


def make_sampler(
    cfg: DictConfig, objective: Objective | None = None, demand: capacity.Demand | None = None
):
    """The configured sampler, with the memory knobs chosen as search.memory says; `demand`
    (what a request holds in the KV pool) defaults to the composed benchmark's."""
    base = _base_sampler(cfg, objective)
    if objective is None:
        return base
    mode = str(OmegaConf.select(cfg, "search.memory", default="auto"))
    if demand is None and memory.resolve_mode(mode, objective) == "auto":
        demand = capacity.demand_for(cfg)
    return memory.wrap(base, mode, objective, demand)


def _base_sampler(cfg: DictConfig, objective: Objective | None) -> optuna.samplers.BaseSampler:
    sampler = cfg.search.sampler
    if sampler.name == "random":
        return optuna.samplers.RandomSampler(seed=cfg.search.seed)
    if sampler.name == "model":
        if objective is None:
            raise ValueError("search.sampler.name=model needs the study's objective")
        space = SearchSpace.from_config(cfg.search.space)
        reason = model_refusal(space, objective)
        if reason is None:
            return ModelSampler(
                space,
                objective,
                seed=cfg.search.seed,
                explore=float(OmegaConf.select(cfg, "search.sampler.explore", default=EXPLORE)),
                screen=bool(OmegaConf.select(cfg, "search.sampler.screen", default=True)),
            )
        console.print(f"search.sampler=model: {reason}; this study samples with TPE.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            seed=cfg.search.seed,
            n_startup_trials=sampler.n_startup_trials,
            multivariate=True,
            group=True,  # draft tokens exist only when topk > 1: a conditional space
            constant_liar=True,
        )


def open_study(
    cfg: DictConfig, objective: Objective, plan: SweepPlan | None = None
) -> tuple[optuna.Study, str]:
    """The study (created or loaded) and its storage URL; refused where it measured another
    setup than `plan`'s (sweep.tracking.identity) or optimises another objective."""
    try:
        storage = open_storage(cfg)
        study = optuna.create_study(
            study_name=cfg.search.study_name,
            storage=storage,
            sampler=make_sampler(cfg, objective),
            directions=objective.directions,
            load_if_exists=True,
        )
    except (SQLAlchemyError, ImportError, ValueError) as exc:
        reason = redact_url(str(exc).strip().splitlines()[0])
        console.print(
            f"[red]error:[/red] cannot open the Optuna storage "
            f"{redact_url(cfg.tracking.optuna_storage)}: {reason}. Start it (python -m "
            "sweep.services start) or fix tracking.optuna_storage.",
            soft_wrap=True,
        )
        raise SystemExit(2) from None
    if plan is not None:
        refused = identity.check(study, plan.setup, plan.derived_name)
        if refused is not None:
            console.print(f"[red]error:[/red] {escape(refused)}", soft_wrap=True)
            raise SystemExit(2)
        identity.record(study, Path(str(cfg.hydra.sweep.dir)).resolve(), plan.setup)
    recorded = study.user_attrs.get("objective", cfg.search.objective)
    if recorded != cfg.search.objective or len(study.directions) != len(objective.directions):
        console.print(
            f"[red]error:[/red] study {cfg.search.study_name!r} optimises {recorded}; its "
            f"values cannot mix with {cfg.search.objective}. Choose a new search.study_name."
        )
        raise SystemExit(2)
    study.set_user_attr("objective", cfg.search.objective)
    if "space_hash" not in study.user_attrs:  # preflight warns when a later sweep differs
        study.set_user_attr("space_hash", space_hash(cfg.search.space))
    return study, storage_url(storage)


def open_claims(cfg: DictConfig, url: str) -> Claims:
    """This worker's leases, kept alive every heartbeat (every 30 s without heartbeats)."""
    interval = cfg.tracking.heartbeat_interval
    grace = grace_period(cfg.tracking)
    claims = Claims(
        url,
        cfg.search.study_name,
        owner=f"{socket.gethostname()}:{os.getpid()}",
        lease_s=float(grace) if grace is not None else LOCAL_LEASE_S,
    )
    claims.start(interval_s=float(interval or 30))
    return claims


def close_orphans(study: optuna.Study, driver: SearchDriver, tracker: Tracker) -> None:
    """What a crashed sweep on this host left RUNNING: its trials failed, its parent run killed."""
    orphans = driver.fail_orphans(stale_callback(study))
    killed = tracker.close_orphan_sweeps()
    if orphans or killed:
        console.print(
            f"[yellow]a crashed sweep left {len(orphans)} trial(s) running "
            f"({', '.join(f'#{n}' for n in orphans) or '-'}): marked failed.[/yellow]"
        )
