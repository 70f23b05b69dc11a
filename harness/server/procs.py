"""Processes, process groups and ports: liveness, signals, waits, and a crashed run's leftover.

A server is a process group (its launcher, the TP workers, their helpers), so liveness and
signals here are per group as well as per pid; psutil reads what signals cannot tell (zombies,
descendants that left the group, a process's command line, who a pid is now).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil

from harness.server.gpu import await_gpu_release
from harness.server.redact import recorded_argv

log = logging.getLogger(__name__)

# pid -> that process, as it was when the snapshot was taken: psutil.Process knows its start
# time, so a pid recycled since is never taken for it (is_running, kill).
Snapshot = dict[int, psutil.Process]


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the kernel's pick), for a test server or a service."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_is_free(host: str, port: int) -> bool:
    """True if a server could bind host:port now (a listener or a bound socket makes it False)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def wait_until(predicate: Callable[[], bool], deadline_s: float, interval_s: float = 0.05) -> bool:
    """Poll `predicate` until it is true or `deadline_s` (wall seconds from now) passes."""
    end = time.monotonic() + deadline_s
    while True:
        if predicate():
            return True
        remaining = end - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(interval_s, remaining))


def _running(proc: psutil.Process) -> bool:
    """`pid_alive` for the process itself: False too once its pid was recycled."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def pid_alive(pid: int) -> bool:
    """The process exists and is not a zombie (an exited child stays one until it is reaped, and
    runs nothing). One we may not inspect (AccessDenied: alive but not ours) is alive."""
    try:
        return _running(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True
    except ValueError:  # a negative pid
        return False


def group_alive(pgid: int) -> bool:
    """Signal 0 to the group checks existence (psutil knows no groups): ESRCH means gone, EPERM
    means alive but not ours."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _in_group(proc: psutil.Process, pgid: int) -> bool:
    try:
        return os.getpgid(proc.pid) == pgid
    except OSError:
        return False


def snapshot_tree(pgid: int) -> Snapshot:
    """The members of process group `pgid` and their descendants (a child that called setsid is
    still a descendant), taken before a stop: afterwards a descendant that left the group is an
    orphan nobody can find (SGLang 0.5.23 test/test_utils.py::collect_process_tree_pids: "Call
    it BEFORE the kill")."""
    tree: Snapshot = {}
    for proc in psutil.process_iter():
        if proc.pid in tree or not _in_group(proc, pgid):
            continue  # a member found as a descendant brought its own descendants along
        tree[proc.pid] = proc
        with contextlib.suppress(psutil.Error):
            tree.update((child.pid, child) for child in proc.children(recursive=True))
    return tree


def process_tree(pgid: int) -> set[int]:
    """The pids of `snapshot_tree(pgid)`."""
    return set(snapshot_tree(pgid))


def _argv(proc: psutil.Process) -> list[str]:
    """The process's argv, undecodable bytes as U+FFFD (psutil keeps them as surrogates, which
    a strict UTF-8 write of a record or a log line refuses)."""
    return [p.encode(errors="surrogateescape").decode(errors="replace") for p in proc.cmdline()]


def command_line(pid: int) -> str | None:
    """The process's command line, secrets (an --api-key value) replaced by references."""
    try:
        parts = _argv(psutil.Process(pid))
    except (psutil.Error, ValueError):
        return None
    return " ".join(recorded_argv(parts)) or None


def kill_tree(pgid: int, snapshot: Snapshot) -> None:
    """SIGKILL the group and every process of the snapshot still alive (the descendants that
    left the group included), as SGLang's kill_process_tree kills the whole tree."""
    signal_group(pgid, signal.SIGKILL)
    for proc in snapshot.values():
        if _running(proc):
            with contextlib.suppress(psutil.Error):
                proc.kill()  # psutil refuses a pid recycled since the snapshot


def tree_gone(pgid: int, snapshot: Snapshot) -> bool:
    return not group_alive(pgid) and not any(_running(proc) for proc in snapshot.values())


def terminate_then_kill(
    pid: int, snapshot: Snapshot, grace_s: float, wait_leader: Callable[[float], bool]
) -> None:
    """SGLang's own teardown order (0.5.23 test/test_utils.py::terminate_and_kill_process_tree):
    SIGTERM to the launcher only, so it drains and sends its schedulers a ShutdownReq (they
    have no SIGTERM handler: signalled directly they die before releasing the GPU); wait the
    grace for it; then SIGKILL the whole tree, whatever is left of it. `wait_leader(timeout)`
    is True once the launcher is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGTERM)
    wait_leader(grace_s)
    kill_tree(pid, snapshot)


def _others() -> Iterator[psutil.Process]:
    """Every process but this one."""
    me = os.getpid()
    return (proc for proc in psutil.process_iter() if proc.pid != me)


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
    if pid is not None:
        with contextlib.suppress(psutil.Error, ValueError):
            if _runs(psutil.Process(int(pid)), argv):
                return int(pid)
    for proc in _others():
        if _runs(proc, argv):
            return proc.pid
    return None


def _runs(proc: psutil.Process, argv: list[str]) -> bool:
    try:
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return recorded_argv(_argv(proc)) == argv
    except psutil.Error:
        return False


def stop_leftover(
    pid_file: Path, grace_s: float, gpu_release_timeout_s: float = 60.0
) -> int | None:
    """Stop the server a crashed run recorded in `pid_file`; returns the pid stopped."""
    pid = leftover_pid(pid_file)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return None
    log.warning("stopping server pid %d left behind by an earlier run (%s)", pid, pid_file)
    tree = snapshot_tree(pid)
    commands = {member: command_line(member) for member in tree}
    terminate_then_kill(
        pid, tree, grace_s, lambda s: wait_until(lambda: not pid_alive(pid), s, interval_s=0.1)
    )
    wait_until(lambda: tree_gone(pid, tree), deadline_s=30.0, interval_s=0.1)
    pid_file.unlink(missing_ok=True)
    await_gpu_release(tree, gpu_release_timeout_s, commands)
    return pid


def processes_mentioning(marker: str) -> list[str]:
    """The live processes (zombies excluded) whose command line contains `marker`, each as
    "pid: command line": how a test or a benchmark proves that nothing it started outlived it.
    The command line is every argument followed by a space (/proc's NULs read as spaces), so
    that a marker "--port 8000 " matches a last argument too but never "--port 80001"."""
    found = []
    for proc in _others():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            cmdline = "".join(f"{part} " for part in _argv(proc))
        except psutil.Error:
            continue
        if marker in cmdline:
            found.append(f"{proc.pid}: {cmdline}")
    return found


# uvicorn's text when the server's port was taken between the harness's check and SGLang's bind
# (0.5.23 binds it only after the scheduler is up, 20-40 s on a CPU): SGLang prints it and, as
# its warm-up request went to whoever holds the port, "The server is fired up and ready to
# roll!" too, then shuts down.
_BIND_FAILED = re.compile(r"\[Errno 98\] error while attempting to bind on address .*address")


def _foreign_listeners(port: int, pgid: int) -> list[str]:
    """The processes outside group `pgid`'s tree that listen on `port`, as "pid N (command)"."""
    found = []
    with contextlib.suppress(psutil.Error):
        tree = process_tree(pgid)
        for conn in psutil.net_connections(kind="tcp"):
            listens = conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port
            if listens and conn.pid is not None and conn.pid not in tree:
                found.append(f"pid {conn.pid} ({command_line(conn.pid) or '?'})")
    return found


def port_taken_message(
    port: int, pgid: int, log_text: str = "", listener: bool = True
) -> str | None:
    """Why `port` does not serve the server of group `pgid`, or None: its log says the bind
    failed, or (`listener`: the server runs in the group's own tree) a process outside that tree
    listens there (a /health_generate that answered came from it: ready must mean this server).
    A wrapped server (docker run, srun) listens from processes outside the tree: its log alone
    says."""
    others = _foreign_listeners(port, pgid) if listener else []
    if not others and not _BIND_FAILED.search(log_text):
        return None
    holder = f" by {', '.join(sorted(set(others)))}" if others else ""
    return (
        f"port {port} was taken{holder} while the server started, so it could not bind it "
        "(its log may still say it is fired up: its warm-up reached the other process). Stop "
        "that process or choose another port with server.port=<port>."
    )
