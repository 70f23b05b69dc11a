"""Processes, process groups and ports: liveness, signals, waits, and a crashed run's leftover.

A server is a process group (its launcher, the TP workers, their helpers), so liveness and
signals here are per group as well as per pid; /proc is read for what signals cannot tell
(zombies, descendants that left the group, a process's command line).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path

from harness.server.gpu import await_gpu_release
from harness.server.redact import recorded_argv

log = logging.getLogger(__name__)


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


def _signal_zero_succeeds(send: Callable[[int, int], None], target: int) -> bool:
    """Signal 0 checks existence: ESRCH means gone, EPERM means alive but not ours."""
    try:
        send(target, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def pid_alive(pid: int) -> bool:
    """The process exists and is not a zombie (an exited child stays one until it is reaped, and
    runs nothing)."""
    return _signal_zero_succeeds(os.kill, pid) and not _zombie(pid)


def group_alive(pgid: int) -> bool:
    return _signal_zero_succeeds(os.killpg, pgid)


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


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


def _start_ticks(pid: int) -> str | None:
    """The process's start time (/proc stat field 22): with the pid, who a process is (a pid
    recycled since a snapshot has another start time)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def command_line(pid: int) -> str | None:
    """The process's command line, secrets (an --api-key value) replaced by references."""
    try:
        parts = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    except OSError:
        return None
    return " ".join(recorded_argv([p.decode(errors="replace") for p in parts])) or None


def snapshot_tree(pgid: int) -> dict[int, str | None]:
    """`process_tree(pgid)` with each member's start time, taken before a stop: afterwards a
    descendant that left the group is an orphan nobody can find (SGLang 0.5.23
    test/test_utils.py::collect_process_tree_pids: "Call it BEFORE the kill")."""
    return {pid: _start_ticks(pid) for pid in process_tree(pgid)}


def _same_process(pid: int, ticks: str | None) -> bool:
    return ticks is not None and _start_ticks(pid) == ticks and pid_alive(pid)


def kill_tree(pgid: int, snapshot: dict[int, str | None]) -> None:
    """SIGKILL the group and every process of the snapshot still alive (the descendants that
    left the group included), as SGLang's kill_process_tree kills the whole tree."""
    signal_group(pgid, signal.SIGKILL)
    for pid, ticks in snapshot.items():
        if _same_process(pid, ticks):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def tree_gone(pgid: int, snapshot: dict[int, str | None]) -> bool:
    return not group_alive(pgid) and not any(_same_process(p, t) for p, t in snapshot.items())


def terminate_then_kill(
    pid: int, snapshot: dict[int, str | None], grace_s: float, wait_leader: Callable[[float], bool]
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
    "pid: command line": how a test or a benchmark proves that nothing it started outlived it."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if "\nState:\tZ" not in status and marker in cmdline:
            found.append(f"{entry}: {cmdline}")
    return found
