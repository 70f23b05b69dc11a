"""A worker that ends stops what dead workers left on its GPUs (sweep.launch.slots.SlotPool
.reap_leftovers): a server whose worker was SIGKILLed otherwise keeps its GPU until some later
holder of that GPU happens to take it, and a survivor that needs no more trials never does
(CI caught one alive after the three-worker sweep: tests/scaleout/test_workers.py)."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness.server.procs import pid_alive
from sweep.launch.slots import SlotPool


def leftover(lock_dir: Path, gpu: str) -> subprocess.Popen:
    """A 'server' on `gpu` whose worker is gone: its pid file, and the GPU's lock file naming it."""
    argv = [sys.executable, "-c", "import time; time.sleep(120)", f"leftover-on-gpu-{gpu}"]
    proc = subprocess.Popen(argv, start_new_session=True)
    # Reaped the moment it dies, as a dead worker's server is by init: not a zombie of ours.
    threading.Thread(target=proc.wait, daemon=True).start()
    pid_file = lock_dir / f"server-gpu-{gpu}.pid"
    pid_file.write_text(json.dumps({"pid": proc.pid, "port": 1, "argv": argv}))
    lock = lock_dir / f"gpu-{gpu}.lock"
    lock.write_text(json.dumps({"pid_file": str(pid_file), "worker_pid": 999999}))
    return proc


def test_an_ending_worker_stops_a_dead_workers_server_but_not_a_live_ones(tmp_path):
    orphan, guarded = leftover(tmp_path, "0"), leftover(tmp_path, "1")
    holder = (tmp_path / "gpu-1.lock").open("a+")  # a live worker still holds GPU 1
    fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        pool = SlotPool(["0", "1"], 1, 2, tmp_path, "127.0.0.1", 39000, stop_grace_s=2.0)
        pool.reap_leftovers()
        deadline = time.monotonic() + 10
        while orphan.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert orphan.poll() is not None  # stopped: its worker was dead (the lock was free)
        assert not (tmp_path / "server-gpu-0.pid").exists()
        assert (tmp_path / "gpu-0.lock").read_text() == ""  # nothing left to stop there
        assert pid_alive(guarded.pid)  # GPU 1's holder is alive: its server is its own
    finally:
        holder.close()
        for proc in (orphan, guarded):
            proc.kill()
            proc.wait()
