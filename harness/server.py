"""The server as a context manager: its own process group, its log in a file, a hard stop.

Ready means the "fired up" line is in the log, `/health_generate` answers 200, and the process
is still alive. Stop is SIGTERM to the whole group, a grace period, then SIGKILL to the group
(unconditionally: children that ignored SIGTERM must not outlive the trial and hold the GPUs),
then wait until the group is gone and the port is free again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

import httpx

from harness.command import ServerCommand
from harness.errors import (
    PortInUse,
    ServerCrashed,
    ServerError,
    ServerOOM,
    ServerStartTimeout,
)
from harness.logs import classify_exit, excerpt, is_ready_line, oom_kind
from harness.results import Outcome

log = logging.getLogger(__name__)
_live: set[Server] = set()  # servers started and not yet stopped, for stop_all()
_live_lock = threading.Lock()


def stop_all() -> None:
    """Stop every live server of this process: trials running side by side in threads cannot
    be interrupted like the main thread, so an interrupted sweep stops their servers."""
    with _live_lock:
        servers = list(_live)
    for server in servers:
        server.stop()


def port_is_free(host: str, port: int) -> bool:
    """True if a server could bind host:port now (a listener or a bound socket makes it False)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def wait_until(predicate, deadline_s: float, interval_s: float = 0.05) -> bool:
    """Poll `predicate` until it is true or `deadline_s` (wall seconds from now) passes."""
    end = time.monotonic() + deadline_s
    while True:
        if predicate():
            return True
        remaining = end - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(interval_s, remaining))


class Server:
    def __init__(
        self,
        command: ServerCommand,
        log_path: Path,
        *,
        ready_timeout_s: float,
        stop_grace_s: float = 30.0,
        poll_interval_s: float = 0.2,
        mem_fraction_static: float | None = None,
        pid_file: Path | None = None,
    ):
        self.command = command
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        self.stop_grace_s = stop_grace_s
        self.poll_interval_s = poll_interval_s
        self.mem_fraction_static = mem_fraction_static
        self.pid_file = pid_file  # where a crashed sweep's successor finds a leftover server
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_fh: IO[bytes] | None = None
        self._started_at: float | None = None
        self.ready_wall_s: float | None = None  # wall seconds from launch to ready
        self.teardown_s: float | None = None  # wall seconds from stop to group gone + port free
        self.launched_at: float | None = None  # epoch seconds: Popen
        self.gone_at: float | None = None  # epoch seconds: the whole process group gone
        self._stop_lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> Server:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if self.proc is not None:
            raise RuntimeError("server already started")
        if self.pid_file is not None:
            stop_leftover(self.pid_file, self.stop_grace_s)
        if not port_is_free(self.command.host, self.command.port):
            raise PortInUse(
                f"port {self.command.port} on {self.command.host} is already in use by another "
                "process. Stop it (a server left from an earlier run?) or choose another port "
                "with server.port=<port>."
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_fh = self.log_path.open("ab")
        env = {**os.environ, **self.command.env}
        log.info("launching: %s", self.command.shell())
        self.proc = subprocess.Popen(
            list(self.command.argv),
            stdout=self._log_fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # own process group: stop() signals every child too
        )
        self._started_at = time.monotonic()
        self.launched_at = time.time()
        with _live_lock:
            _live.add(self)
        if self.pid_file is not None:
            self.pid_file.parent.mkdir(parents=True, exist_ok=True)
            record = {"pid": self.proc.pid, "port": self.command.port, "argv": self.proc.args}
            self.pid_file.write_text(json.dumps(record))

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_ready(self) -> float:
        """Block until ready; return wall seconds since launch. Raises a typed ServerError."""
        assert self.proc is not None and self._started_at is not None, "start() first"
        deadline = self._started_at + self.ready_timeout_s
        offset = 0
        seen_ready_line = False
        with httpx.Client(base_url=self.command.base_url, timeout=30.0) as client:
            while True:
                self.raise_if_exited(during="start-up")
                if not seen_ready_line:
                    text = self.log_text()
                    seen_ready_line = any(is_ready_line(ln) for ln in text[offset:].splitlines())
                    offset = max(offset, text.rfind("\n") + 1)
                if seen_ready_line and self._healthy(client):
                    self.raise_if_exited(during="start-up")
                    self.ready_wall_s = time.monotonic() - self._started_at
                    return self.ready_wall_s
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ServerStartTimeout(
                        f"server not ready after {self.ready_timeout_s:.0f} s (wall); raise "
                        "engine.ready_timeout_s if loading the model legitimately takes longer.",
                        log_excerpt=excerpt(self.log_text()),
                    )
                time.sleep(min(self.poll_interval_s, remaining))

    @staticmethod
    def _healthy(client: httpx.Client) -> bool:
        try:
            return client.get("/health_generate").status_code == 200
        except httpx.HTTPError:
            return False

    def raise_if_exited(self, during: str) -> None:
        """Turn an exited server into ServerOOM or ServerCrashed with the log's evidence."""
        assert self.proc is not None
        rc = self.proc.poll()
        if rc is None:
            return
        text = self.log_text()
        outcome = classify_exit(text, rc)
        message = f"server exited during {during} with return code {rc}"
        if outcome is Outcome.OOM:
            raise ServerOOM(
                message + f" (out of memory; mem_fraction_static={self.mem_fraction_static})",
                log_excerpt=excerpt(text),
                returncode=rc,
                mem_fraction_static=self.mem_fraction_static,
                kind=oom_kind(text),
            )
        raise ServerCrashed(message, log_excerpt=excerpt(text), returncode=rc)

    def server_info(self) -> dict[str, Any]:
        """Effective arguments and state: /server_info (0.5.23), else /get_server_info (0.5.1)."""
        with httpx.Client(base_url=self.command.base_url, timeout=30.0) as client:
            for path in ("/server_info", "/get_server_info"):
                response = client.get(path)
                if response.status_code == 404:
                    continue
                response.raise_for_status()
                return response.json()
        raise ServerError("server answers neither /server_info nor /get_server_info")

    def stop(self) -> int | None:
        """Idempotent hard stop of the whole process group; returns the leader's return code."""
        with self._stop_lock:  # stop_all() from another thread may race the trial's own stop
            return self._stop()

    def _stop(self) -> int | None:
        proc = self.proc
        if proc is None:
            return None
        pgid = proc.pid  # start_new_session made the leader's pid the group id
        stopping = time.monotonic()
        if proc.poll() is None:
            _signal_group(pgid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=self.stop_grace_s)
        _signal_group(pgid, signal.SIGKILL)
        rc = proc.wait()
        if not wait_until(lambda: not _group_alive(pgid), deadline_s=30.0):
            log.warning("process group %d still has members after SIGKILL", pgid)
        if self.gone_at is None:
            self.gone_at = time.time()
        with _live_lock:
            _live.discard(self)
        if not wait_until(
            lambda: port_is_free(self.command.host, self.command.port), deadline_s=30.0
        ):
            log.warning("port %d still busy after the server stopped", self.command.port)
        if self.teardown_s is None:
            self.teardown_s = time.monotonic() - stopping
        if self._log_fh is not None:
            self._log_fh.close()
            self._log_fh = None
        if self.pid_file is not None:
            self.pid_file.unlink(missing_ok=True)
        return rc


def leftover_pid(pid_file: Path) -> int | None:
    """The pid recorded in `pid_file` if that process still runs the recorded command line
    (so a recycled pid is never mistaken for it)."""
    try:
        record = json.loads(pid_file.read_text())
        cmdline = Path(f"/proc/{record['pid']}/cmdline").read_bytes().split(b"\0")[:-1]
    except (FileNotFoundError, json.JSONDecodeError, KeyError, ProcessLookupError):
        return None
    if [part.decode(errors="replace") for part in cmdline] != list(record["argv"]):
        return None
    return int(record["pid"])


def stop_leftover(pid_file: Path, grace_s: float) -> int | None:
    """Stop the server a crashed run recorded in `pid_file`; returns the pid stopped."""
    pid = leftover_pid(pid_file)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return None
    log.warning("stopping server pid %d left behind by an earlier run (%s)", pid, pid_file)
    _signal_group(pid, signal.SIGTERM)
    if not wait_until(lambda: not _group_alive(pid), deadline_s=grace_s, interval_s=0.1):
        _signal_group(pid, signal.SIGKILL)
        wait_until(lambda: not _group_alive(pid), deadline_s=30.0, interval_s=0.1)
    pid_file.unlink(missing_ok=True)
    return pid


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _signal_zero_succeeds(send, target: int) -> bool:
    """Signal 0 checks existence: ESRCH means gone, EPERM means alive but not ours."""
    try:
        send(target, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pid_alive(pid: int) -> bool:
    return _signal_zero_succeeds(os.kill, pid)


def _group_alive(pgid: int) -> bool:
    return _signal_zero_succeeds(os.killpg, pgid)
    return True
