"""`python -m sweep.services start|stop --dir DIR [--listen ADDRESS]`: PostgreSQL and MLflow.

Several sweep workers share one Optuna study in PostgreSQL and one MLflow tracking server
(`tracking=server`). This starts both on one machine, for a team without them or for the tests:
a throwaway PostgreSQL cluster in DIR/postgres (installed with apt-get when its binaries are
missing; run as the `postgres` user when started as root, which PostgreSQL refuses), databases
`optuna` and `mlflow`, and `mlflow server` on that database. The password lives in DIR/pgpass
(mode 600, read by libpq through PGPASSFILE), so the URLs carry none and are safe to print.
It writes DIR/services.env (0600) with the variables `conf/tracking/server.yaml` reads.

Both bind loopback unless `--listen ADDRESS` says otherwise; then only with credentials
(`sweep.services.auth`): pg_hba.conf admits the `specsweep` role with its password from the
ADDRESS's network (or `--allow CIDR`) only, MLflow runs its basic-auth app, and services.env
carries the password-bearing storage URL and MLFLOW_TRACKING_USERNAME/PASSWORD for the workers
on other nodes (printed and recorded with the password as <redacted>).
"""

from __future__ import annotations

import argparse
import glob
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

from harness.server.procs import free_port, pid_alive, wait_until
from harness.server.redact import redact_url_passwords
from harness.tls import tls_context
from sweep.services import auth as service_auth
from sweep.services.auth import Listen, ListenRefused, plan_listen

LOOPBACK = Listen("127.0.0.1", "127.0.0.1", None)

PG_USER = "specsweep"
DATABASES = ("optuna", "mlflow")


@dataclass(frozen=True)
class Services:
    optuna_storage: str
    mlflow_uri: str
    env: dict[str, str]  # PGPASSFILE and the SPECSWEEP_* variables (+ MLflow's credentials)

    def exports(self) -> str:
        return service_auth.exports(self.env)


def postgres_bin() -> Path:
    """The folder with initdb/pg_ctl: Debian keeps them in /usr/lib/postgresql/<v>/bin."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=_version)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).resolve().parent
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-q", "postgresql"], check=True, env=env)
        return postgres_bin()
    raise RuntimeError("PostgreSQL is not installed: sudo apt-get install -y postgresql")


def _version(path: str) -> tuple[int, ...]:
    part = Path(path).parent.parent.name
    return tuple(int(x) for x in part.split(".") if x.isdigit())


def _as_postgres(argv: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: drop to the `postgres` user the package created."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def _own(path: Path) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")


def _wait(predicate, deadline_s: float, what: str) -> None:
    if not wait_until(predicate, deadline_s, interval_s=0.2):
        raise RuntimeError(f"{what} did not come up within {deadline_s:.0f} s")


def _listening(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        return sock.connect_ex((host, port)) == 0


def start_postgres(root: Path, port: int, listen: Listen = LOOPBACK) -> tuple[str, str]:
    """initdb + pg_ctl start on listen.address:port; returns (base URL, pgpass path). The URL
    has no password: this machine's clients read it from pgpass (PGPASSFILE)."""
    data = root / "postgres"
    # Refuse before writing anything: the existing cluster's password is only in DIR/pgpass, and
    # overwriting it would lock its owner out of a cluster this call then does not start.
    if (data / "PG_VERSION").exists():
        raise RuntimeError(f"{data} exists: stop and remove it, or use another --dir")
    bin_dir = postgres_bin()
    password = secrets.token_urlsafe(18)
    pgpass = root / "pgpass"
    service_auth.write_private(pgpass, f"{listen.host}:{port}:*:{PG_USER}:{password}\n")
    data.mkdir(parents=True, exist_ok=True)
    _own(data)
    pwfile = root / "pwfile"
    pwfile.write_text(password + "\n")
    _own(pwfile)
    subprocess.run(
        _as_postgres(
            [
                *(str(bin_dir / "initdb"), "-D", str(data), "-U", PG_USER),
                *("--auth=scram-sha-256", f"--pwfile={pwfile}", "--no-instructions"),
            ]
        ),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    pwfile.unlink()
    if listen.secured:  # only the role, with its password, from the allowed network
        (data / "pg_hba.conf").write_text(service_auth.pg_hba(str(listen.network)))
    options = f"-c listen_addresses={listen.address} -p {port} -k {data}"
    subprocess.run(
        _as_postgres(
            [
                *(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(data / "server.log")),
                *("-o", options, "-w", "start"),
            ]
        ),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    env = {**os.environ, "PGPASSFILE": str(pgpass)}
    for db in DATABASES:
        dsn = f"postgresql://{PG_USER}@{listen.host}:{port}/postgres"
        subprocess.run([sys.executable, "-c", _CREATE_DB, dsn, db], check=True, env=env)
    # SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3; the dev extra installs psycopg2.
    return f"postgresql+psycopg2://{PG_USER}@{listen.host}:{port}", str(pgpass)


# psycopg2 in a child process: PGPASSFILE must be in its environment before libpq loads.
_CREATE_DB = """
import sys, psycopg2
conn = psycopg2.connect(sys.argv[1]); conn.autocommit = True
conn.cursor().execute(f'CREATE DATABASE "{sys.argv[2]}"')
"""


def launch_mlflow(
    root: Path,
    backend: str,
    port: int,
    env: dict[str, str] | None = None,
    listen: Listen = LOOPBACK,
) -> subprocess.Popen:
    """`mlflow server` on `backend` at listen.address:`port` (its basic-auth app when secured:
    `env` then holds MLFLOW_AUTH_CONFIG_PATH), artifacts under root/mlartifacts, log in
    root/mlflow.log; returns once /health answers (its own process group, for a clean kill)."""
    mlflow = Path(sys.executable).parent / "mlflow"
    log = (root / "mlflow.log").open("ab")
    app = ["--app-name", "basic-auth"] if listen.secured else []
    if listen.secured:  # MLflow's Host-header check admits only localhost and private IPs
        app += ["--allowed-hosts", f"{listen.host},{listen.host}:{port}"]
    proc = subprocess.Popen(
        [
            *(str(mlflow), "server", "--host", listen.address, "--port", str(port), *app),
            *("--workers", "1", "--artifacts-destination", str(root / "mlartifacts")),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        # the URI through the environment: nothing secret in `ps`; one worker, no job runner
        env={
            **os.environ,
            **(env or {}),
            "MLFLOW_BACKEND_STORE_URI": backend,
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        },
        start_new_session=True,
    )
    url = f"http://{listen.host}:{port}"

    def healthy() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"mlflow server exited ({proc.returncode}); see {root}/mlflow.log")
        try:
            return httpx.get(url + "/health", timeout=2, verify=tls_context()).status_code == 200
        except httpx.HTTPError:
            return False

    _wait(healthy, 180, "mlflow server")
    return proc


def start_mlflow(
    root: Path, backend: str, port: int, env: dict[str, str], listen: Listen = LOOPBACK
) -> tuple[str, dict[str, str]]:
    """The server's URL, and what a worker needs besides it (MLflow's credentials, if any)."""
    auth_env: dict[str, str] = {}
    worker_env: dict[str, str] = {}
    if listen.secured:
        auth_env, password = service_auth.mlflow_auth_env(root)
    proc = launch_mlflow(root, backend, port, {**env, **auth_env}, listen)
    (root / "mlflow.pid").write_text(str(proc.pid))
    url = f"http://{listen.host}:{port}"
    if listen.secured:
        service_auth.create_worker_user(root, url, password)
        worker_env = {
            "MLFLOW_TRACKING_USERNAME": service_auth.MLFLOW_USER,
            "MLFLOW_TRACKING_PASSWORD": password,
        }
    return url, worker_env


def start(
    root: Path,
    pg_port: int | None = None,
    mlflow_port: int | None = None,
    listen: Listen = LOOPBACK,
) -> Services:
    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:  # the postgres user must reach DIR/postgres
        os.chmod(root, 0o755)
    base, pgpass = start_postgres(root, pg_port or free_port(), listen)
    pg_env = {"PGPASSFILE": pgpass}
    try:
        mlflow_uri, worker_env = start_mlflow(
            root, base + "/mlflow", mlflow_port or free_port(), pg_env, listen
        )
    except BaseException:  # nothing left running from a start that did not finish
        stop(root)
        raise
    storage = base + "/optuna"
    if listen.secured:  # a worker on another node has no pgpass: the URL carries the password
        password = Path(pgpass).read_text().strip().rsplit(":", 1)[1]
        storage = storage.replace(f"{PG_USER}@", f"{PG_USER}:{password}@", 1)
    services = Services(
        optuna_storage=storage,
        mlflow_uri=mlflow_uri,
        env={
            **pg_env,
            **worker_env,
            "SPECSWEEP_OPTUNA_STORAGE": storage,
            "SPECSWEEP_MLFLOW_URI": mlflow_uri,
        },
    )
    service_auth.write_private(root / "services.env", services.exports())
    return services


def stop(root: Path) -> None:
    root = root.resolve()
    pid_file = root / "mlflow.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text())
        try:
            os.killpg(pid, signal.SIGTERM)
            _wait(lambda: not pid_alive(pid), 30, "mlflow server shutdown")
        except (ProcessLookupError, RuntimeError):
            if pid_alive(pid):
                os.killpg(pid, signal.SIGKILL)
        pid_file.unlink()
    data = root / "postgres"
    if (data / "postmaster.pid").exists():
        subprocess.run(
            _as_postgres([str(postgres_bin() / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"]),
            check=False,
            stdout=subprocess.DEVNULL,
        )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["slurm"]:  # a single-node SLURM cluster for the SLURM launcher
        from sweep.services import slurm

        return slurm.main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m sweep.services",
        description=__doc__,
        epilog="python -m sweep.services slurm start|stop --dir DIR: a single-node SLURM "
        "cluster to try the SLURM launcher on (sweep.services.slurm)",
    )
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("--dir", type=Path, default=Path("results/services"))
    parser.add_argument("--pg-port", type=int, default=None)
    parser.add_argument("--mlflow-port", type=int, default=None)
    parser.add_argument(
        "--listen",
        default=None,
        metavar="ADDRESS",
        help="bind here instead of loopback: other nodes reach the services, with credentials",
    )
    parser.add_argument(
        "--allow",
        default=None,
        metavar="CIDR",
        help="the network PostgreSQL admits with --listen (default: ADDRESS's interface network)",
    )
    args = parser.parse_args(argv)
    if args.action == "stop":
        stop(args.dir)
        print(f"stopped the services in {args.dir}")
        return 0
    if args.allow is not None and args.listen is None:
        parser.error("--allow CIDR goes with --listen ADDRESS (on loopback nothing else connects)")
    try:
        listen = plan_listen(args.listen, args.allow)
    except ListenRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    services = start(args.dir, args.pg_port, args.mlflow_port, listen)
    print(f"PostgreSQL (Optuna): {redact_url_passwords(services.optuna_storage)}")
    print(f"MLflow server:       {services.mlflow_uri}")
    if listen.secured:
        print(f"Admitted:            {listen.network} (pg_hba.conf); MLflow asks for a password")
        print(f"Credentials:         {args.dir.resolve()}/services.env (mode 600)")
    print(f"\nIn each worker's shell:  source {args.dir.resolve()}/services.env")
    print("then:                    python sweep.py -m tracking=server ...")
    print(f"Stop both:               python -m sweep.services stop --dir {args.dir}")
    return 0
