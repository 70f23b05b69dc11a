"""`python -m sweep.services start|stop --dir DIR`: PostgreSQL and an MLflow server for workers.

Several sweep workers share one Optuna study in PostgreSQL and one MLflow tracking server
(`tracking=server`). This starts both on one machine, for a team without them or for the tests:
a throwaway PostgreSQL cluster in DIR/postgres (installed with apt-get when its binaries are
missing; run as the `postgres` user when started as root, which PostgreSQL refuses), databases
`optuna` and `mlflow`, and `mlflow server` on that database. The password lives in DIR/pgpass
(mode 600, read by libpq through PGPASSFILE), so the URLs carry none and are safe to print.
It writes DIR/services.env with the variables `conf/tracking/server.yaml` reads.
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

from harness.procs import free_port, pid_alive, wait_until

PG_USER = "specsweep"
DATABASES = ("optuna", "mlflow")


@dataclass(frozen=True)
class Services:
    optuna_storage: str
    mlflow_uri: str
    env: dict[str, str]  # PGPASSFILE and the SPECSWEEP_* variables

    def exports(self) -> str:
        return "".join(f"export {k}={v}\n" for k, v in sorted(self.env.items()))


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


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def start_postgres(root: Path, port: int) -> tuple[str, str]:
    """initdb + pg_ctl start on 127.0.0.1:port; returns (host:port base URL, pgpass path)."""
    data = root / "postgres"
    # Refuse before writing anything: the existing cluster's password is only in DIR/pgpass, and
    # overwriting it would lock its owner out of a cluster this call then does not start.
    if (data / "PG_VERSION").exists():
        raise RuntimeError(f"{data} exists: stop and remove it, or use another --dir")
    bin_dir = postgres_bin()
    password = secrets.token_urlsafe(18)
    pgpass = root / "pgpass"
    pgpass.touch(mode=0o600)  # private before the password is in it
    pgpass.chmod(0o600)
    pgpass.write_text(f"127.0.0.1:{port}:*:{PG_USER}:{password}\n")
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
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {data}"
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
        dsn = f"postgresql://{PG_USER}@127.0.0.1:{port}/postgres"
        subprocess.run([sys.executable, "-c", _CREATE_DB, dsn, db], check=True, env=env)
    # SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3; the dev extra installs psycopg2.
    return f"postgresql+psycopg2://{PG_USER}@127.0.0.1:{port}", str(pgpass)


# psycopg2 in a child process: PGPASSFILE must be in its environment before libpq loads.
_CREATE_DB = """
import sys, psycopg2
conn = psycopg2.connect(sys.argv[1]); conn.autocommit = True
conn.cursor().execute(f'CREATE DATABASE "{sys.argv[2]}"')
"""


def launch_mlflow(
    root: Path, backend: str, port: int, env: dict[str, str] | None = None
) -> subprocess.Popen:
    """`mlflow server` on `backend` at 127.0.0.1:`port`, artifacts under root/mlartifacts, log in
    root/mlflow.log; returns once /health answers (its own process group, for a clean kill)."""
    mlflow = Path(sys.executable).parent / "mlflow"
    log = (root / "mlflow.log").open("ab")
    proc = subprocess.Popen(
        [
            *(str(mlflow), "server", "--host", "127.0.0.1", "--port", str(port)),
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
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"mlflow server exited ({proc.returncode}); see {root}/mlflow.log")
        try:
            return httpx.get(url + "/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    _wait(healthy, 180, "mlflow server")
    return proc


def start_mlflow(root: Path, backend: str, port: int, env: dict[str, str]) -> str:
    proc = launch_mlflow(root, backend, port, env)
    (root / "mlflow.pid").write_text(str(proc.pid))
    return f"http://127.0.0.1:{port}"


def start(root: Path, pg_port: int | None = None, mlflow_port: int | None = None) -> Services:
    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:  # the postgres user must reach DIR/postgres
        os.chmod(root, 0o755)
    base, pgpass = start_postgres(root, pg_port or free_port())
    pg_env = {"PGPASSFILE": pgpass}
    mlflow_uri = start_mlflow(root, base + "/mlflow", mlflow_port or free_port(), pg_env)
    services = Services(
        optuna_storage=base + "/optuna",
        mlflow_uri=mlflow_uri,
        env={
            **pg_env,
            "SPECSWEEP_OPTUNA_STORAGE": base + "/optuna",
            "SPECSWEEP_MLFLOW_URI": mlflow_uri,
        },
    )
    (root / "services.env").write_text(services.exports())
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
    parser = argparse.ArgumentParser(prog="python -m sweep.services", description=__doc__)
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("--dir", type=Path, default=Path("results/services"))
    parser.add_argument("--pg-port", type=int, default=None)
    parser.add_argument("--mlflow-port", type=int, default=None)
    args = parser.parse_args(argv)
    if args.action == "stop":
        stop(args.dir)
        print(f"stopped the services in {args.dir}")
        return 0
    services = start(args.dir, args.pg_port, args.mlflow_port)
    print(f"PostgreSQL (Optuna): {services.optuna_storage}")
    print(f"MLflow server:       {services.mlflow_uri}")
    print(f"\nIn each worker's shell:  source {args.dir.resolve()}/services.env")
    print("then:                    python sweep.py -m tracking=server ...")
    print(f"Stop both:               python -m sweep.services stop --dir {args.dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
