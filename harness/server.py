"""The server as a context manager: its own process group, its log in a file, a hard stop.

Ready means the "fired up" line is in the log, `/health_generate` answers 200, and the process
is still alive. Stop is SIGTERM to the whole group, a grace period, then SIGKILL to the group
(unconditionally: children that ignored SIGTERM must not outlive the trial and hold the GPUs),
then wait until the group is gone, the port is free again and (with NVML) the tree's processes
hold no GPU memory.

The server's output reaches server.log through a pipe the harness reads line by line: secrets it
prints (SGLang logs its server_args, --api-key included) are masked before they touch the disk,
and a fatal line (an OOM, a scheduler exception) is noticed the moment it arrives.
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

from harness.command import (
    ServerCommand,
    api_key,
    recorded_argv,
    recorded_shell,
    redact_text,
    secret_values,
)
from harness.errors import (
    GpuMemoryHeld,
    PortInUse,
    ServerCrashed,
    ServerError,
    ServerOOM,
    ServerStartTimeout,
)
from harness.gpu import wait_gpu_released
from harness.logs import classify_exit, excerpt, is_fatal_line, is_ready_line, oom_kind
from harness.results import Outcome
from harness.sglang import SERVER_INFO_PATHS

log = logging.getLogger(__name__)
# A server still alive this long after printing a fatal line is half-killed: treat it as dead.
FATAL_GRACE_S = 1.0
# pid -> GPU MiB: processes of servers this process stopped that held GPU memory at the deadline.
_UNRELEASED: dict[int, float] = {}
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
        gpu_release_timeout_s: float = 60.0,
    ):
        self.command = command
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        self.stop_grace_s = stop_grace_s
        self.poll_interval_s = poll_interval_s
        self.mem_fraction_static = mem_fraction_static
        self.pid_file = pid_file  # where a crashed sweep's successor finds a leftover server
        self.gpu_release_timeout_s = gpu_release_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_fh: IO[bytes] | None = None
        self._pump: threading.Thread | None = None
        self._secrets = secret_values(command)
        self._fatal_at: float | None = None  # monotonic time the first fatal line arrived
        self.detect_s: float | None = None  # fatal line (or exit) -> the harness raising
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
            stop_leftover(self.pid_file, self.stop_grace_s, self.gpu_release_timeout_s)
        check_gpu_released()
        if not port_is_free(self.command.host, self.command.port):
            raise PortInUse(
                f"port {self.command.port} on {self.command.host} is already in use by another "
                "process. Stop it (a server left from an earlier run?) or choose another port "
                "with server.port=<port>."
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_fh = self.log_path.open("ab")
        # Recorded before the launch too: a sweep killed between the fork and the write below
        # still leaves what its successor needs to find the server (by its command line).
        self._record_pid(None)
        env = {**os.environ, **self.command.env}
        log.info("launching: %s", recorded_shell(self.command))
        self.proc = subprocess.Popen(
            list(self.command.argv),  # an argv list: no shell ever parses a config value
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # own process group: stop() signals every child too
        )
        self._started_at = time.monotonic()
        self._pump = threading.Thread(
            target=self._copy_log, args=(self.proc.stdout, self._log_fh), daemon=True
        )
        self._pump.start()
        self.launched_at = time.time()
        with _live_lock:
            _live.add(self)
        self._record_pid(self.proc.pid)

    def _record_pid(self, pid: int | None) -> None:
        if self.pid_file is None:
            return
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        argv = recorded_argv(self.command.argv)
        record = {"pid": pid, "port": self.command.port, "argv": argv}
        tmp = self.pid_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(self.pid_file)  # never half-written

    def _copy_log(self, pipe: IO[bytes], fh: IO[bytes]) -> None:
        """server stdout -> server.log, secrets masked, fatal lines timed as they arrive."""
        for raw in iter(pipe.readline, b""):
            line = raw.decode(errors="surrogateescape")
            if self._fatal_at is None and is_fatal_line(line):
                self._fatal_at = time.monotonic()
            with contextlib.suppress(ValueError):  # closed by stop() after a straggler
                fh.write(redact_text(line, self._secrets).encode(errors="surrogateescape"))
                fh.flush()
        pipe.close()

    def _drain_log(self, timeout_s: float = 2.0) -> None:
        """Wait for the pump to reach EOF, so the log holds the dead server's last lines."""
        if self._pump is not None:
            self._pump.join(timeout_s)

    @property
    def headers(self) -> dict[str, str]:
        key = api_key(self.command.argv)
        return {"Authorization": f"Bearer {key}"} if key else {}

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
        with httpx.Client(
            base_url=self.command.base_url, timeout=30.0, headers=self.headers
        ) as client:
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
                    self._drain_log(0)
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
        """Turn an exited server into ServerOOM or ServerCrashed with the log's evidence. A server
        whose log says it died but whose process lingers past FATAL_GRACE_S counts as exited."""
        assert self.proc is not None
        rc = self.proc.poll()
        now = time.monotonic()
        if rc is None:
            if self._fatal_at is None or now - self._fatal_at < FATAL_GRACE_S:
                return
            message = f"server failed during {during}: its log reports a fatal error"
        else:
            self._drain_log()
            message = f"server exited during {during} with return code {rc}"
        if self._fatal_at is not None:
            self.detect_s = now - self._fatal_at
        text = self.log_text()
        outcome = classify_exit(text, rc)
        if outcome is not Outcome.OOM and rc is not None and rc < 0 and self._fatal_at is None:
            name = signal.Signals(-rc).name if -rc in set(signal.Signals) else f"signal {-rc}"
            message += (
                f" (killed by {name} with nothing in its log to explain it: stopped from "
                "outside the harness, e.g. by the OOM killer or an operator)"
            )
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
        """Effective arguments and state: /server_info (current SGLang), else /get_server_info
        (0.5.1), as `harness.sglang.SERVER_INFO_PATHS` lists them."""
        with httpx.Client(
            base_url=self.command.base_url, timeout=30.0, headers=self.headers
        ) as client:
            for path in SERVER_INFO_PATHS:
                response = client.get(path)
                if response.status_code == 404:
                    continue
                response.raise_for_status()
                return response.json()
        raise ServerError(f"server answers neither {' nor '.join(SERVER_INFO_PATHS)}")

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
        tree = process_tree(pgid)  # before the kill: whose GPU memory must come back
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
        _await_gpu_release(tree, self.gpu_release_timeout_s)
        if self.teardown_s is None:
            self.teardown_s = time.monotonic() - stopping
        self._drain_log()
        if self._log_fh is not None:
            self._log_fh.close()
            self._log_fh = None
        if self.pid_file is not None:
            self.pid_file.unlink(missing_ok=True)
        return rc


def leftover_pid(pid_file: Path) -> int | None:
    """The server recorded in `pid_file` if it still runs: the recorded pid when that process
    runs the recorded command line (so a recycled pid is never mistaken for it), else any process
    running that command line (the recorder died between the launch and writing the pid). The
    record holds the argv with secrets replaced by references; live command lines are compared
    the same way. The argv names the server's port, which no other live server holds."""
    try:
        record = json.loads(pid_file.read_text())
        argv, pid = list(record["argv"]), record.get("pid")
    except (FileNotFoundError, json.JSONDecodeError, KeyError, TypeError):
        return None
    if pid is not None and _runs(int(pid), argv):
        return int(pid)
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and _runs(int(entry), argv):
            return int(entry)
    return None


def _runs(pid: int, argv: list[str]) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    if "\nState:\tZ" in status:
        return False
    return recorded_argv([part.decode(errors="replace") for part in cmdline]) == argv


def stop_leftover(
    pid_file: Path, grace_s: float, gpu_release_timeout_s: float = 60.0
) -> int | None:
    """Stop the server a crashed run recorded in `pid_file`; returns the pid stopped."""
    pid = leftover_pid(pid_file)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return None
    log.warning("stopping server pid %d left behind by an earlier run (%s)", pid, pid_file)
    tree = process_tree(pid)
    _signal_group(pid, signal.SIGTERM)
    if not wait_until(lambda: not _group_alive(pid), deadline_s=grace_s, interval_s=0.1):
        _signal_group(pid, signal.SIGKILL)
        wait_until(lambda: not _group_alive(pid), deadline_s=30.0, interval_s=0.1)
    pid_file.unlink(missing_ok=True)
    _await_gpu_release(tree, gpu_release_timeout_s)
    return pid


def process_tree(pgid: int) -> set[int]:
    """The live members of process group `pgid` and their descendants (a child that called
    setsid is still a descendant), from /proc."""
    parents: dict[int, int] = {}
    members = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid pgrp ...
        parents[int(entry)] = int(fields[1])
        if int(fields[2]) == pgid:
            members.add(int(entry))
    tree, frontier = set(members), list(members)
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                frontier.append(pid)
    return tree


def _await_gpu_release(tree: set[int], deadline_s: float) -> None:
    held = wait_gpu_released(tree, deadline_s) if tree else []
    for holder in held or []:
        _UNRELEASED[holder.pid] = holder.used_mib
    if held:
        log.warning(
            "GPU memory still held %.0f s after the server stopped: %s",
            deadline_s,
            ", ".join(f"pid {p.pid} {p.used_mib:.0f} MiB on GPU {p.gpu}" for p in held),
        )


def check_gpu_released() -> None:
    """Before a launch: a stopped server's processes that held GPU memory at their deadline must
    have let go by now, or the next server runs out of memory against them."""
    if not _UNRELEASED:
        return
    held = wait_gpu_released(set(_UNRELEASED), 0) or []
    _UNRELEASED.clear()
    for holder in held:
        _UNRELEASED[holder.pid] = holder.used_mib
    if held:
        listed = ", ".join(f"pid {p.pid} ({p.used_mib:.0f} MiB on GPU {p.gpu})" for p in held)
        raise GpuMemoryHeld(
            f"the previous server's processes still hold GPU memory: {listed}. Not launching "
            "into it (the next server would run out of memory). Check nvidia-smi and stop them; "
            "raise engine.gpu_release_timeout_s if the driver is just slow to free memory."
        )


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
