"""Process helpers against real processes: liveness (zombies included) and polling."""

from __future__ import annotations

import os
import subprocess
import sys

from harness.server.procs import group_alive, pid_alive, wait_until


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
