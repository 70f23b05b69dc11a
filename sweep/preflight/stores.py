"""Preflight checks of what a sweep writes to: the server port, the results folder, MLflow and
the Optuna study (its objective and search space against this sweep's)."""

from __future__ import annotations

from pathlib import Path

import httpx
from omegaconf import DictConfig

from harness.layout import ResultsLayout
from harness.procs import leftover_pid, port_is_free
from sweep.preflight.check import Check
from sweep.study.space import space_hash
from sweep.study.storage import ensure_schema, redact_url
from sweep.tracking import resolve_sqlite_uri


def check_network(cfg: DictConfig) -> Check:
    host, port = cfg.server.host, cfg.server.port
    if port_is_free(host, port):
        return Check("port", "pass", f"{host}:{port} is free")
    pid = leftover_pid(ResultsLayout.at(cfg.tracking.dir).server_pid_file(port))
    if pid is not None:
        return Check(
            "port",
            "warn",
            f"{host}:{port} is held by pid {pid}, a server a crashed sweep left",
            "nothing: it is stopped before the first launch",
        )
    return Check(
        "port",
        "fail",
        f"{host}:{port} is in use by another process",
        "stop it or choose another port with server.port=<port>",
    )


def check_tracking(cfg: DictConfig) -> list[Check]:
    checks = []
    results = Path(cfg.tracking.dir).resolve()
    try:
        results.mkdir(parents=True, exist_ok=True)
        probe = results / ".preflight-write-test"
        probe.write_text("ok")
        probe.unlink()
        checks.append(Check("results dir", "pass", f"{results} is writable"))
    except OSError as exc:
        checks.append(
            Check(
                "results dir",
                "fail",
                f"{results}: {exc.strerror}",
                "set tracking.dir to a writable folder",
            )
        )
    uri = cfg.tracking.mlflow_uri
    shown = redact_url(uri)
    if uri.startswith(("http://", "https://")):
        try:
            ok = httpx.get(uri.rstrip("/") + "/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            ok = False
        checks.append(
            Check(
                "mlflow",
                "pass" if ok else "fail",
                f"{shown} " + ("answers" if ok else "does not answer"),
                "" if ok else "start the MLflow server or fix tracking.mlflow_uri",
            )
        )
    else:
        checks.append(Check("mlflow", "pass", redact_url(resolve_sqlite_uri(uri))))
    checks.append(check_study(cfg))
    return checks


def check_study(cfg: DictConfig) -> Check:
    import optuna

    storage = resolve_sqlite_uri(cfg.tracking.optuna_storage)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        ensure_schema(storage)
        study = optuna.load_study(study_name=cfg.search.study_name, storage=storage)
    except KeyError:
        return Check("study", "pass", f"new study {cfg.search.study_name!r}")
    except Exception as exc:  # any storage failure fails the check
        # The driver's message can quote the URL (password included): redact both.
        reason = redact_url(str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc))
        return Check(
            "study",
            "fail",
            f"Optuna storage {redact_url(storage)}: {reason}",
            "start the database (python -m sweep.services start) or fix tracking.optuna_storage",
        )
    n = len(study.get_trials(deepcopy=False))
    recorded = study.user_attrs.get("space_hash")
    if recorded is None:
        return Check("study", "pass", f"{cfg.search.study_name!r} has {n} trials")
    if recorded != space_hash(cfg.search.space):
        return Check(
            "study",
            "warn",
            f"{cfg.search.study_name!r} has {n} trials from another search space",
            "mixing spaces confuses the sampler: use a new search.study_name",
        )
    return Check("study", "pass", f"{cfg.search.study_name!r} has {n} trials; same search space")
