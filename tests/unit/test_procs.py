"""Process helpers against real processes: liveness (zombies included) and polling."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from harness.server.procs import (
    free_port,
    group_alive,
    pid_alive,
    port_is_free,
    port_taken_message,
    wait_until,
)


def test_a_running_process_is_alive_and_an_exited_unreaped_child_is_not():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert pid_alive(child.pid) and pid_alive(os.getpid())
        child.kill()
        # Not reaped yet: a zombie, which runs nothing, so it counts as gone.
        assert wait_until(lambda: not pid_alive(child.pid), deadline_s=10)
    finally:
        child.kill()
        child.wait()
    assert not pid_alive(child.pid)


def test_group_alive_follows_the_group():
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    assert group_alive(child.pid)
    child.kill()
    child.wait()
    assert wait_until(lambda: not group_alive(child.pid), deadline_s=10)


def test_wait_until_gives_up_at_its_deadline():
    calls = []
    assert not wait_until(lambda: calls.append(1) and False, deadline_s=0.2, interval_s=0.05)
    assert len(calls) >= 2
    assert wait_until(lambda: True, deadline_s=0)


LISTEN = (
    "import socket, sys, time; s = socket.socket(); "
    "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); time.sleep(60)"
)


def test_a_port_held_by_another_process_tree_is_named_with_its_holder():
    port = free_port()
    other = subprocess.Popen([sys.executable, "-c", LISTEN, str(port)], start_new_session=True)
    server = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a group without it
    try:
        assert wait_until(lambda: not port_is_free("127.0.0.1", port), deadline_s=10)
        message = port_taken_message(port, server.pid)
        assert message is not None and f"port {port} was taken by pid {other.pid}" in message
        # the same listener is the server's own when it is in the server's group
        assert port_taken_message(port, other.pid) is None
        # a wrapped server (docker run, srun) listens outside its launch's tree: not judged
        assert port_taken_message(port, server.pid, listener=False) is None
    finally:
        for proc in (other, server):
            proc.kill()
            proc.wait()


def test_a_log_with_uvicorns_bind_error_is_a_taken_port_whoever_listens():
    line = (
        "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 1): "
        "address already in use"
    )
    with socket.socket() as own:  # nobody else listens
        own.bind(("127.0.0.1", 0))
        port = own.getsockname()[1]
        assert port_taken_message(port, os.getpgid(0)) is None
        message = port_taken_message(port, os.getpgid(0), line)
        assert message is not None and "was taken while the server started" in message
