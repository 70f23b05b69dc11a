"""GPU slots: which GPUs and which port a trial's server gets, so no two live servers share one.

A worker runs `gpus // tp` trials side by side; slot i owns GPUs [i*tp, (i+1)*tp) of the
worker's GPU set (an inherited CUDA_VISIBLE_DEVICES, else 0..hardware.gpus-1) and a port of its
own. Several workers on one node must not hand out the same GPU or port either, so each GPU and
each port is held through an flock'ed file in a node-local folder (`worker.lock_dir`): the
kernel releases it when the holder exits, even by SIGKILL. A GPU's lock file names the pid file
of the server running on it, so the next holder stops a dead worker's leftover server before
launching its own on that GPU.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from harness.errors import ConfigError
from harness.server.procs import port_is_free, stop_leftover

PORT_RANGE = 500  # ports tried above server.port


@dataclass(frozen=True)
class Slot:
    index: int
    gpus: tuple[str, ...]
    port: int
    pid_file: Path  # where the slot's server is recorded while it runs

    @property
    def cuda_visible_devices(self) -> str:
        return ",".join(self.gpus)


def worker_gpus(gpus: int) -> list[str]:
    """This worker's GPUs: the CUDA_VISIBLE_DEVICES it inherited (SLURM sets it), else all."""
    inherited = os.environ.get("CUDA_VISIBLE_DEVICES")
    if inherited is not None and inherited.strip():
        return [g.strip() for g in inherited.split(",") if g.strip()]
    return [str(i) for i in range(gpus)]


def slot_count(gpus: list[str], tp: int, requested: int | None) -> int:
    most = len(gpus) // tp
    if most < 1:
        raise ConfigError(f"model.tp={tp} needs more GPUs than this worker has ({','.join(gpus)}).")
    if requested is None:
        return most
    if not 1 <= requested <= most:
        raise ConfigError(
            f"worker.slots={requested}: between 1 and {most} ({len(gpus)} GPUs / model.tp={tp})."
        )
    return requested


def _try_lock(path: Path) -> IO[str] | None:
    fh = path.open("a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        return None
    return fh


class SlotPool:
    def __init__(
        self,
        gpus: list[str],
        tp: int,
        count: int,
        lock_dir: Path,
        host: str,
        base_port: int,
        stop_grace_s: float,
    ):
        self.groups = [tuple(gpus[i * tp : (i + 1) * tp]) for i in range(count)]
        self.lock_dir = lock_dir
        self.host = host
        self.base_port = base_port
        self.stop_grace_s = stop_grace_s
        self._busy: set[int] = set()  # groups held by this worker's threads
        self._ports: set[int] = set()
        self._lock = threading.Lock()
        lock_dir.mkdir(parents=True, exist_ok=True)

    @property
    def count(self) -> int:
        return len(self.groups)

    @contextlib.contextmanager
    def slot(self, poll_s: float = 0.2) -> Iterator[Slot]:
        """Wait for a free GPU group on this node, then a free port; hold both for the block."""
        index, gpu_files = self._acquire_gpus(poll_s)
        port, port_file = self._acquire_port()
        try:
            pid_file = self.lock_dir / f"server-gpu-{'-'.join(self.groups[index])}.pid"
            record = json.dumps({"pid_file": str(pid_file), "worker_pid": os.getpid()})
            for fh in gpu_files:
                fh.seek(0)
                fh.truncate()
                fh.write(record)
                fh.flush()
            yield Slot(index, self.groups[index], port, pid_file)
        finally:
            port_file.close()
            for fh in gpu_files:
                fh.close()
            with self._lock:
                self._busy.discard(index)
                self._ports.discard(port)

    def _acquire_gpus(self, poll_s: float) -> tuple[int, list[IO[str]]]:
        while True:
            for index, group in enumerate(self.groups):
                with self._lock:
                    if index in self._busy:
                        continue
                    self._busy.add(index)
                files = self._lock_group(group)
                if files is not None:
                    return index, files
                with self._lock:
                    self._busy.discard(index)
            time.sleep(poll_s)  # another worker on this node holds them

    def _lock_group(self, group: tuple[str, ...]) -> list[IO[str]] | None:
        files: list[IO[str]] = []
        for gpu in group:
            fh = _try_lock(self.lock_dir / f"gpu-{gpu}.lock")
            if fh is None:
                for held in files:
                    held.close()
                return None
            files.append(fh)
        for fh in files:  # a dead worker's server may still run on this GPU: stop it first
            fh.seek(0)
            previous = fh.read().strip()
            if previous:
                with contextlib.suppress(json.JSONDecodeError, KeyError):
                    stop_leftover(Path(json.loads(previous)["pid_file"]), self.stop_grace_s)
        return files

    def reap_leftovers(self) -> None:
        """Stop what dead workers left on this worker's GPUs that no live worker holds, before it
        exits: otherwise a server whose worker was killed keeps its GPU until some later holder
        of that GPU happens to take it (a survivor that needed no more trials never does)."""
        for index, group in enumerate(self.groups):
            with self._lock:
                if index in self._busy:
                    continue
            files = self._lock_group(group)  # stops a recorded leftover, as before a launch
            for fh in files or ():
                fh.seek(0)
                fh.truncate()
                fh.close()

    def _acquire_port(self) -> tuple[int, IO[str]]:
        for port in range(self.base_port, self.base_port + PORT_RANGE):
            with self._lock:
                if port in self._ports:
                    continue
                self._ports.add(port)
            fh = _try_lock(self.lock_dir / f"port-{port}.lock")
            if fh is not None and port_is_free(self.host, port):
                return port, fh
            if fh is not None:
                fh.close()
            with self._lock:
                self._ports.discard(port)
        raise ConfigError(
            f"no free port in {self.base_port}..{self.base_port + PORT_RANGE - 1} on {self.host}; "
            "choose another server.port."
        )
