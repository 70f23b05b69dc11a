"""Preflight checks of what a sweep writes to: the server port, the results folder, MLflow and
the Optuna study (its objective and search space against this sweep's)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import httpx
from omegaconf import DictConfig

from harness.record.layout import ResultsLayout
from harness.server.procs import leftover_pid, port_is_free
from harness.tls import tls_context
from sweep.preflight.check import Check
from sweep.study.loop.optuna_storage import ensure_schema, redact_url
from sweep.study.search.space import space_hash
from sweep.tracking.runs import resolve_sqlite_uri


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
        write_probe(results)
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
        checks.append(check_mlflow_server(uri.rstrip("/"), shown))
    else:
        checks.append(check_sqlite("mlflow", resolve_sqlite_uri(uri), "tracking.mlflow_uri"))
    checks.append(check_study(cfg))
    return checks


def write_probe(folder: Path) -> None:
    """Create and remove a file in `folder` (OSError when it cannot be written). The name is this
    call's own: the workers of one sweep check the same folder at the same moment, and with one
    shared name a worker removed another's probe before that one could ("No such file or
    directory": its preflight failed)."""
    fd, name = tempfile.mkstemp(prefix=".preflight-write-test-", dir=folder)
    os.close(fd)
    os.unlink(name)


def sqlite_folder_problem(uri: str) -> str | None:
    """Why a sqlite store's file cannot be written (its folder is missing, not a folder, or not
    writable), or None; None too for a store that is not a sqlite file."""
    prefix = "sqlite:///"
    if not uri.startswith(prefix):
        return None
    folder = Path(uri[len(prefix) :]).parent
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if not os.access(folder, os.W_OK):
        return f"{folder} is not writable"
    return None


def check_sqlite(what: str, uri: str, key: str) -> Check:
    problem = sqlite_folder_problem(uri)
    if problem is None:
        return Check(what, "pass", redact_url(uri))
    return Check(
        what,
        "fail",
        f"{redact_url(uri)}: {problem}",
        f"set tracking.dir to a writable folder or {key}",
    )


def check_mlflow_server(uri: str, shown: str) -> Check:
    """The server answers, and takes this sweep's credentials: `/health` is open even on
    MLflow's basic-auth app, so a one-row search is what tells a missing password now rather
    than when the sweep opens its tracker."""
    try:
        if httpx.get(uri + "/health", timeout=5, verify=tls_context()).status_code != 200:
            raise httpx.HTTPError("not healthy")
    except httpx.HTTPError:
        return Check(
            "mlflow",
            "fail",
            f"{shown} does not answer",
            "start the MLflow server or fix tracking.mlflow_uri",
        )
    user = os.environ.get("MLFLOW_TRACKING_USERNAME")
    auth = (user, os.environ.get("MLFLOW_TRACKING_PASSWORD", "")) if user else None
    try:
        status = httpx.get(
            uri + "/api/2.0/mlflow/experiments/search",
            params={"max_results": 1},
            auth=auth,
            timeout=10,
            verify=tls_context(),
        ).status_code
    except httpx.HTTPError as exc:
        return Check("mlflow", "fail", f"{shown}: {exc}", "check tracking.mlflow_uri")
    if status in (401, 403):
        said = "refused the credentials given" if auth else "asks for credentials"
        return Check(
            "mlflow",
            "fail",
            f"{shown} {said} (HTTP {status})",
            "set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, e.g. source the "
            "services.env that `python -m sweep.services start --listen` wrote",
        )
    return Check("mlflow", "pass", f"{shown} answers" + (f" (as {user})" if auth else ""))


def check_study(cfg: DictConfig) -> Check:
    import optuna

    storage = resolve_sqlite_uri(cfg.tracking.optuna_storage)
    if sqlite_folder_problem(storage):
        return check_sqlite("study", storage, "tracking.optuna_storage")
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
