"""`python -m sweep.services start --listen ADDRESS`: reachable from other nodes, never open.

Started for real on this machine's own non-loopback address (loopback keeps the default, no
auth): MLflow's basic-auth app refuses a request without credentials (401) and takes the
generated ones; PostgreSQL refuses a connection without the password and takes the generated
one; pg_hba.conf admits the given network only; services.env is mode 0600. A worker that has
only services.env (no pgpass, as on another node) sweeps into both, and the password shows up
in none of its console output, files, or MLflow params and tags. Nothing is left running.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import optuna
import psycopg2
import pytest
from mlflow.tracking import MlflowClient

from harness.server.procs import free_port, pid_alive
from sweep.preflight.stores import check_mlflow_server
from sweep.services import auth as service_auth
from sweep.services import stores as services
from tests.conftest import ROOT

pytestmark = pytest.mark.scaleout

STUDY = "listen"


def own_address() -> str | None:
    """This machine's first non-loopback IPv4 address (`hostname -I`)."""
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
    for part in out:
        ip = ipaddress.ip_address(part)
        if ip.version == 4 and not ip.is_loopback:
            return part
    return None


ADDRESS = own_address()


def read_env(path: Path) -> dict[str, str]:
    env = {}
    for line in path.read_text().splitlines():
        name, value = line.removeprefix("export ").split("=", 1)
        env[name] = shlex.split(value)[0]
    return env


@pytest.fixture(scope="module")
def listening():
    if ADDRESS is None:
        pytest.skip("this machine has no non-loopback address to listen on")
    root = Path(tempfile.mkdtemp(prefix="specsweep-listen-"))
    argv = [sys.executable, "-m", "sweep.services", "start", "--dir", str(root)]
    proc = subprocess.run(
        [*argv, "--listen", ADDRESS], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        env = read_env(root / "services.env")
        yield {"root": root, "env": env, "out": proc.stdout + proc.stderr}
    finally:
        mlflow_pid = (root / "mlflow.pid").read_text() if (root / "mlflow.pid").exists() else None
        postmaster = root / "postgres" / "postmaster.pid"
        pg_pid = postmaster.read_text().split()[0] if postmaster.exists() else None
        services.stop(root)
        for pid in (mlflow_pid, pg_pid):  # nothing of the services is left running
            assert pid is None or not pid_alive(int(pid))


def password(listening) -> str:
    url = listening["env"]["SPECSWEEP_OPTUNA_STORAGE"]
    return re.search(r"specsweep:([^@]+)@", url)[1]


def test_services_env_is_private_and_carries_the_credentials(listening):
    path = listening["root"] / "services.env"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    env = listening["env"]
    assert env["SPECSWEEP_MLFLOW_URI"].startswith(f"http://{ADDRESS}:")
    assert env["MLFLOW_TRACKING_USERNAME"] == service_auth.MLFLOW_USER
    assert len(env["MLFLOW_TRACKING_PASSWORD"]) >= 24
    assert f"@{ADDRESS}:" in env["SPECSWEEP_OPTUNA_STORAGE"] and len(password(listening)) >= 20
    for secret in ("mlflow-auth.ini", "mlflow-auth.db", "pgpass"):
        assert stat.S_IMODE((listening["root"] / secret).stat().st_mode) == 0o600
    # printed with the password redacted
    assert password(listening) not in listening["out"]
    assert env["MLFLOW_TRACKING_PASSWORD"] not in listening["out"]
    assert "specsweep:<redacted>@" in listening["out"]


def test_mlflow_asks_for_the_password(listening):
    url = listening["env"]["SPECSWEEP_MLFLOW_URI"] + "/api/2.0/mlflow/experiments/search"
    params = {"max_results": 1}
    assert httpx.get(url, params=params, timeout=10).status_code == 401
    wrong = (listening["env"]["MLFLOW_TRACKING_USERNAME"], "not-the-password")
    assert httpx.get(url, params=params, auth=wrong, timeout=10).status_code == 401
    auth = (
        listening["env"]["MLFLOW_TRACKING_USERNAME"],
        listening["env"]["MLFLOW_TRACKING_PASSWORD"],
    )
    assert httpx.get(url, params=params, auth=auth, timeout=10).status_code == 200


def test_preflight_says_the_server_wants_credentials_before_the_sweep_starts(
    listening, monkeypatch
):
    uri = listening["env"]["SPECSWEEP_MLFLOW_URI"]
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    check = check_mlflow_server(uri, uri)
    assert check.status == "fail" and "asks for credentials (HTTP 401)" in check.message
    assert "MLFLOW_TRACKING_PASSWORD" in check.fix and "services.env" in check.fix
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", listening["env"]["MLFLOW_TRACKING_USERNAME"])
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "not-the-password")
    assert "refused the credentials" in check_mlflow_server(uri, uri).message
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", listening["env"]["MLFLOW_TRACKING_PASSWORD"])
    assert check_mlflow_server(uri, uri).status == "pass"


def test_postgres_asks_for_the_password_and_admits_the_network_only(listening, monkeypatch):
    monkeypatch.setenv("PGPASSFILE", os.devnull)  # as on another node: no pgpass
    monkeypatch.delenv("PGPASSWORD", raising=False)
    url = listening["env"]["SPECSWEEP_OPTUNA_STORAGE"].replace("postgresql+psycopg2", "postgresql")
    without = re.sub(r"specsweep:[^@]+@", "specsweep@", url)
    with pytest.raises(psycopg2.OperationalError, match="password"):
        psycopg2.connect(without, connect_timeout=10)
    with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
        psycopg2.connect(url.replace(password(listening), "wrong"), connect_timeout=10)
    psycopg2.connect(url, connect_timeout=10).close()
    hba = (listening["root"] / "postgres" / "pg_hba.conf").read_text()
    rules = [line.split() for line in hba.splitlines() if line.strip() and line[0] != "#"]
    network = str(service_auth.interface_network(ADDRESS))
    assert [r for r in rules if r[0] != "local"] == [
        ["host", "all", "specsweep", network, "scram-sha-256"]
    ]
    assert all(r[-1] == "scram-sha-256" for r in rules)
    # and it listens on the address only: not on loopback
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    assert not services._listening(port)


def test_a_worker_with_only_services_env_sweeps_and_never_shows_the_password(listening, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "MLFLOW_", "SPECSWEEP_"))}
    env.update({k: v for k, v in listening["env"].items() if k != "PGPASSFILE"})
    argv = [
        *(sys.executable, "sweep.py", "-m", "tracking=server", "experiment=smoke", "report=false"),
        *(f"tracking.dir={tmp_path}", f"search.study_name={STUDY}", "search.n_trials=2"),
        *(f"server.port={free_port()}", f"worker.lock_dir={tmp_path / 'locks'}"),
        "search.remeasure_baseline=false",
    ]
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "sweep finished with status FINISHED" in out
    secrets = [password(listening), listening["env"]["MLFLOW_TRACKING_PASSWORD"]]
    storage = listening["env"]["SPECSWEEP_OPTUNA_STORAGE"]
    study = optuna.load_study(study_name=STUDY, storage=storage)
    assert len([t for t in study.get_trials() if t.state.is_finished()]) >= 2
    os.environ.update(  # the MLflow client reads its credentials from the environment
        {k: listening["env"][k] for k in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")}
    )
    try:
        client = MlflowClient(tracking_uri=listening["env"]["SPECSWEEP_MLFLOW_URI"])
        experiment = client.get_experiment_by_name(STUDY)
        runs = client.search_runs([experiment.experiment_id], max_results=100)
    finally:
        os.environ.pop("MLFLOW_TRACKING_USERNAME")
        os.environ.pop("MLFLOW_TRACKING_PASSWORD")
    assert len(runs) >= 3  # the sweep, the baseline, the trials
    recorded = [str(r.data.params) + str(r.data.tags) for r in runs]
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.stat().st_size < 5_000_000]
    files += [listening["root"] / "mlflow.log", listening["root"] / "postgres" / "server.log"]
    assert any(p.name == "config.yaml" for p in files)
    for secret in secrets:
        assert secret not in out
        assert not [r for r in recorded if secret in r]
        assert not [p for p in files if secret.encode() in p.read_bytes()]


def test_listen_beyond_loopback_without_the_auth_app_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(service_auth, "auth_app_available", lambda: False)
    with pytest.raises(service_auth.ListenRefused, match=r"--listen 192\.0\.2\.7 binds beyond"):
        service_auth.plan_listen("192.0.2.7", None)
    with pytest.raises(service_auth.ListenRefused, match="--allow"):
        monkeypatch.setattr(service_auth, "auth_app_available", lambda: True)
        service_auth.plan_listen("0.0.0.0", None)
    with pytest.raises(service_auth.ListenRefused, match="every address"):
        service_auth.plan_listen("0.0.0.0", "0.0.0.0/0")
    assert services.main(["start", "--dir", str(tmp_path), "--listen", "0.0.0.0"]) == 2
    assert list(tmp_path.iterdir()) == []  # refused before anything was written or started
    assert not service_auth.plan_listen(None, None).secured  # loopback: as before
    assert not service_auth.plan_listen("127.0.0.1", None).secured
