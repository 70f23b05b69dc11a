"""Credentials for `python -m sweep.services start --listen ADDRESS`: services other nodes reach.

On loopback (the default) only this machine's users reach the services and nothing here is
used. Bound to another address, PostgreSQL takes the `specsweep` role's generated password
(scram-sha-256) from the given network only (pg_hba.conf has nothing else), and MLflow runs
its basic-auth app (`mlflow server --app-name basic-auth`, Flask-WTF from `mlflow[auth]`) with
a generated admin kept in DIR (mlflow-auth.ini, 0600) and a `specsweep` user for the workers.
Workers get the URL with the password and MLFLOW_TRACKING_USERNAME/PASSWORD from
DIR/services.env (0600); specsweep prints and records the URL's password as <redacted>.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import secrets
import shlex
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import httpx

from harness.tls import tls_context

MLFLOW_USER = "specsweep"
MLFLOW_ADMIN = "specsweep-admin"


class ListenRefused(RuntimeError):
    """--listen/--allow that would expose the services: refused before anything starts."""


@dataclass(frozen=True)
class Listen:
    address: str  # where PostgreSQL and MLflow bind
    host: str  # what the URLs name (the address, or this host's name for 0.0.0.0)
    network: str | None  # pg_hba's only host network; None on loopback (no auth)

    @property
    def secured(self) -> bool:
        return self.network is not None


def is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def auth_app_available() -> bool:
    """MLflow's basic-auth app needs Flask-WTF (pip install 'mlflow[auth]')."""
    return importlib.util.find_spec("flask_wtf") is not None


def plan_listen(address: str | None, allow: str | None) -> Listen:
    """Where to bind and whom to let in; refuses what would leave the services open."""
    if address is None or is_loopback(address):
        return Listen(address or "127.0.0.1", address or "127.0.0.1", None)
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise ListenRefused(f"--listen {address}: give an IP address of this machine") from None
    if not auth_app_available():
        raise ListenRefused(
            f"--listen {address} binds beyond loopback and needs credentials: MLflow's "
            "basic-auth app is not installed (pip install 'mlflow[auth]'). Install it, or leave "
            "--listen off to keep the services on loopback."
        )
    network = _allowed_network(ip, allow)
    host = socket.getfqdn() if ip.is_unspecified else address
    return Listen(address, host, str(network))


def _allowed_network(ip, allow: str | None):
    if allow is not None:
        try:
            network = ipaddress.ip_network(allow, strict=False)
        except ValueError:
            raise ListenRefused(f"--allow {allow}: not a network, e.g. 10.0.0.0/24") from None
        if network.prefixlen == 0:
            raise ListenRefused(f"--allow {allow} lets in every address: name your network")
        return network
    if ip.is_unspecified:
        raise ListenRefused(f"--listen {ip} binds every interface: say who may connect (--allow)")
    network = interface_network(str(ip))
    if network is None:
        raise ListenRefused(f"--listen {ip}: no interface has that address (--allow CIDR)")
    return network


def interface_network(address: str):
    """The network of this machine's interface with `address` (`ip -o addr`), or None."""
    try:
        out = subprocess.run(
            ["ip", "-o", "addr", "show"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    for line in out.splitlines():
        parts = line.split()
        for i, part in enumerate(parts[:-1]):
            if part in ("inet", "inet6"):
                iface = ipaddress.ip_interface(parts[i + 1])
                if str(iface.ip) == address:
                    return iface.network
    return None


def write_private(path: Path, text: str) -> None:
    """A file only its owner reads, private before the secret is in it."""
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(text)


def pg_hba(network: str) -> str:
    """Only the specsweep role, with its password: on the socket and from `network`."""
    return (
        "# written by sweep.services --listen: nothing else may connect\n"
        "local   all   specsweep                scram-sha-256\n"
        f"host    all   specsweep   {network:<18} scram-sha-256\n"
    )


def mlflow_auth_env(root: Path) -> tuple[dict[str, str], str]:
    """The environment of an authenticated `mlflow server`, and the workers' password."""
    admin_password, worker_password = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    ini = root / "mlflow-auth.ini"
    write_private(
        ini,
        "[mlflow]\n"
        "default_permission = READ\n"
        f"database_uri = sqlite:///{root / 'mlflow-auth.db'}\n"
        f"admin_username = {MLFLOW_ADMIN}\n"
        f"admin_password = {admin_password}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n",
    )
    write_private(root / "mlflow-auth.db", "")  # its password hashes: private (sqlite fills it)
    env = {
        "MLFLOW_AUTH_CONFIG_PATH": str(ini),
        "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_urlsafe(32),
    }
    return env, worker_password


def admin_credentials(root: Path) -> tuple[str, str]:
    text = (root / "mlflow-auth.ini").read_text()
    values = dict(line.split(" = ", 1) for line in text.splitlines() if " = " in line)
    return values["admin_username"], values["admin_password"]


def create_worker_user(root: Path, url: str, password: str) -> None:
    """The workers' MLflow user, created by the admin (who stays in DIR only)."""
    response = httpx.post(
        url + "/api/2.0/mlflow/users/create",
        json={"username": MLFLOW_USER, "password": password},
        auth=admin_credentials(root),
        timeout=30,
        verify=tls_context(),
    )
    if response.status_code != 200:
        raise RuntimeError(f"creating the MLflow user failed: HTTP {response.status_code}")


def exports(env: dict[str, str]) -> str:
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(env.items()))
