"""The server as a context manager: its own process group, its log in a file, a hard stop.

Ready means `/health_generate` answers 200 and the process is still alive, as SGLang's own
`popen_launch_server` decides it (no log line: `--log-level warning` hides the INFO "fired up").
Stop is SGLang's own teardown order (0.5.23 test/test_utils.py::terminate_and_kill_process_tree):
SIGTERM to the launcher only (it drains and tells its schedulers to release the GPU and exit;
they have no SIGTERM handler, so a SIGTERM to the whole group would kill them mid-release), a
grace period, then SIGKILL to the whole tree (unconditionally, descendants that left the group
too: nothing may outlive the trial and hold the GPUs), then wait until the tree is gone, the
port is free again and (with NVML) the tree's processes hold no GPU memory, timed as
gpu_release_s.

The server's output reaches server.log through a pipe the harness reads in pieces split on `\r`
and `\n` (tqdm redraws its bars with a carriage return): secrets it prints (SGLang logs its
server_args, --api-key included) are masked before they touch the disk, a fatal line (an OOM, a
scheduler exception) is noticed the moment it arrives, and each piece moves the start-up phase
(`harness.server.startup`). server.log holds the bytes as SGLang wrote them, redraws and their
carriage returns included, as `launch_server > server.log 2>&1` would: one line per bar, shown
by `cat` or `less -r` as a terminal shows it. A start-up that prints nothing for
`stall_timeout_s` is stopped as stalled at its phase, long before the ready deadline.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import httpx

from harness.errors import PortInUse, ServerCrashed, ServerError, ServerOOM, ServerStartTimeout
from harness.record.results import Outcome
from harness.server.command import ServerCommand
from harness.server.gpu import await_gpu_release, check_gpu_released
from harness.server.logs import classify_exit, excerpt, is_fatal_line, oom_kind
from harness.server.procs import (
    command_line,
    kill_tree,
    port_is_free,
    port_taken_message,
    snapshot_tree,
    stop_leftover,
    terminate_then_kill,
    tree_gone,
    wait_until,
)
from harness.server.redact import recorded_argv, recorded_shell, redact_text, secret_values
from harness.server.startup import StartupTracker, hides_startup_lines, split_output
from harness.sglang.surfaces import SERVER_INFO_PATHS
from harness.tls import tls_context

log = logging.getLogger(__name__)
# A server still alive this long after printing a fatal line is half-killed: treat it as dead.
FATAL_GRACE_S = 1.0
_live: set[Server] = set()  # servers started and not yet stopped, for stop_all()
_live_lock = threading.Lock()


def stop_all() -> None:
    """Stop every live server of this process: trials running side by side in threads cannot
    be interrupted like the main thread, so an interrupted sweep stops their servers."""
    with _live_lock:
        servers = list(_live)
    for server in servers:
        server.stop()


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
        stall_timeout_s: float | None = None,
        on_startup: Callable[[StartupTracker], None] | None = None,
    ):
        self.command = command
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        self.stop_grace_s = stop_grace_s
        self.poll_interval_s = poll_interval_s
        self.mem_fraction_static = mem_fraction_static
        self.pid_file = pid_file  # where a crashed sweep's successor finds a leftover server
        self.gpu_release_timeout_s = gpu_release_timeout_s
        # No output for this long during start-up is a hang (None: only the ready deadline).
        # A --log-level above INFO hides the start-up lines: silence then proves nothing.
        quiet = hides_startup_lines(command.argv)
        self.stall_timeout_s = None if quiet else stall_timeout_s
        self.on_startup = on_startup  # called from wait_ready when the phase moves
        self.startup = StartupTracker()
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_fh: IO[bytes] | None = None
        self._pump: threading.Thread | None = None
        self._secrets = secret_values(command)
        self._fatal_at: float | None = None  # monotonic time the first fatal line arrived
        # fatal line (or exit; a stalled start's last output) -> the harness raising
        self.detect_s: float | None = None
        self._started_at: float | None = None
        self.ready_wall_s: float | None = None  # wall seconds from launch to ready
        self.teardown_s: float | None = None  # wall seconds from stop to group gone + port free
        self.gpu_release_s: float | None = None  # wall seconds until its GPU memory came back
        self.launched_at: float | None = None  # epoch seconds: Popen
        self.gone_at: float | None = None  # epoch seconds: the whole process group gone
        self._stop_lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> Server:
        try:
            self.start()
        except BaseException:  # Ctrl-C mid-start: `with` calls no __exit__ for a failed enter
            self.stop()
            raise
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
        # "wb": a rerun in the same folder must not mix two servers' logs (nor read the first
        # server's fatal lines as the second one's).
        self._log_fh = self.log_path.open("wb")
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
        with _live_lock:  # at once: from here an interrupted sweep's stop_all() finds it
            _live.add(self)
        self._started_at = time.monotonic()
        self.startup = StartupTracker(started=self._started_at)
        self._pump = threading.Thread(
            target=self._copy_log, args=(self.proc.stdout, self._log_fh), daemon=True
        )
        self._pump.start()
        self.launched_at = time.time()
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
        """server stdout -> server.log, secrets masked, fatal lines timed as they arrive, the
        start-up phase moved by each piece (split on \r and \n, as a terminal shows them)."""
        rest = b""
        read = getattr(pipe, "read1", pipe.read)
        while chunk := read(65536):
            self.startup.output()
            pieces, rest = split_output(rest + chunk)
            for piece in pieces:
                self._take(piece, fh)
            if rest:  # a bar being drawn: tqdm writes "\r" + text, the next "\r" ends it
                self.startup.feed(rest.decode(errors="replace"))
        if rest:
            self._take(rest, fh)
        pipe.close()

    def _take(self, raw: bytes, fh: IO[bytes]) -> None:
        line = raw.decode(errors="surrogateescape")
        if self._fatal_at is None and is_fatal_line(line):
            self._fatal_at = time.monotonic()
        self.startup.feed(line)
        with contextlib.suppress(ValueError):  # closed by stop() after a straggler
            fh.write(redact_text(line, self._secrets).encode(errors="surrogateescape"))
            fh.flush()

    def _drain_log(self, timeout_s: float = 2.0) -> None:
        """Wait for the pump to reach EOF, so the log holds the dead server's last lines. A
        Ctrl-C inside the pump's own start() leaves a thread that never ran: nothing to drain,
        and joining it would raise in place of the interrupt."""
        if self._pump is not None:
            with contextlib.suppress(RuntimeError):  # "cannot join thread before it is started"
                self._pump.join(timeout_s)

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
        """Block until ready; return wall seconds since launch. Raises a typed ServerError.

        Ready is `/health_generate` 200 with the process alive, whatever the log level: SGLang
        answers 503 at once while its status is Starting (warm-up not done), so a 200 means it
        was Up when the request was sent. That moment is the ready time: 0.5.23's handler then
        sleeps ~1 s before it answers, and neither that nor the harness's polling is start-up."""
        assert self.proc is not None and self._started_at is not None, "start() first"
        deadline = self._started_at + self.ready_timeout_s
        with httpx.Client(
            base_url=self.command.base_url,
            timeout=30.0,
            headers=self.command.headers,
            verify=tls_context(),
        ) as client:
            while True:
                self.raise_if_exited(during="start-up")
                if self.on_startup is not None:  # every poll: a phase that lasts is news too
                    self.on_startup(self.startup)
                self._raise_if_stalled()
                sent = time.monotonic()
                if self._healthy(client):
                    self.raise_if_exited(during="start-up")
                    self._raise_if_port_taken()  # the answer came from this server?
                    self.ready_wall_s = sent - self._started_at
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

    def _raise_if_stalled(self) -> None:
        """No output for stall_timeout_s during start-up: stalled at its phase (a hung NCCL init,
        a stuck filesystem), not worth the rest of the ready deadline."""
        if self.stall_timeout_s is None:
            return
        silent = self.startup.silent_s()
        if silent < self.stall_timeout_s:
            return
        self._drain_log(0)
        self.detect_s = silent  # its last output -> the harness raising
        at = self.startup.describe()
        raise ServerStartTimeout(
            f"stalled at {at}: no output for {silent:.0f} s (wall, "
            f"{self.startup.elapsed_s():.0f} s after launch; engine.stall_timeout_s="
            f"{self.stall_timeout_s:g}); raise engine.stall_timeout_s if a step of this start-up "
            "is legitimately silent for longer.",
            log_excerpt=excerpt(self.log_text()),
        )

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
            # The pump may time the fatal line only while draining: detection ends here, after it
            # (timed before the drain, a detection could read as negative).
            now = time.monotonic()
            message = f"server exited during {during} with return code {rc}"
        if self._fatal_at is not None:
            self.detect_s = now - self._fatal_at
        text = self.log_text()
        self._raise_if_port_taken(text)
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

    def _raise_if_port_taken(self, log_text: str = "") -> None:
        taken = port_taken_message(
            self.command.port, self.proc.pid, log_text, listener=self.command.local
        )
        if taken is not None:
            raise PortInUse(taken)

    def server_info(self) -> dict[str, Any]:
        """Effective arguments and state: /server_info (current SGLang), else /get_server_info
        (0.5.1), as `harness.sglang.surfaces.SERVER_INFO_PATHS` lists them."""
        with httpx.Client(
            base_url=self.command.base_url,
            timeout=30.0,
            headers=self.command.headers,
            verify=tls_context(),
        ) as client:
            for path in SERVER_INFO_PATHS:
                response = client.get(path)
                if response.status_code == 404:
                    continue
                response.raise_for_status()
                return response.json()
        raise ServerError(f"server answers neither {' nor '.join(SERVER_INFO_PATHS)}")

    def _leader_exits(self, timeout_s: float) -> bool:
        assert self.proc is not None
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True

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
        tree = snapshot_tree(pgid)  # before the kill: what to kill, whose GPU memory to wait for
        commands = {pid: command_line(pid) for pid in tree}
        if proc.poll() is None:
            terminate_then_kill(pgid, tree, self.stop_grace_s, self._leader_exits)
        else:
            kill_tree(pgid, tree)  # a launcher that died may have left its schedulers running
        rc = proc.wait()
        if not wait_until(lambda: tree_gone(pgid, tree), deadline_s=30.0):
            log.warning("process tree of %d still has members after SIGKILL", pgid)
        if self.gone_at is None:
            self.gone_at = time.time()
        with _live_lock:
            _live.discard(self)
        if not wait_until(
            lambda: port_is_free(self.command.host, self.command.port), deadline_s=30.0
        ):
            log.warning("port %d still busy after the server stopped", self.command.port)
        released = await_gpu_release(tree, self.gpu_release_timeout_s, commands)
        if self.gpu_release_s is None:
            self.gpu_release_s = released
        if self.teardown_s is None:
            self.teardown_s = time.monotonic() - stopping
        self._drain_log()
        if self._log_fh is not None:
            self._log_fh.close()
            self._log_fh = None
        if self.pid_file is not None:
            self.pid_file.unlink(missing_ok=True)
        return rc
