"""The launcher's process tree and its SIGTERM path, as SGLang has them (docs/reliability.md).

SGLang's launcher spawns its schedulers; each calls `kill_itself_when_parent_died` (PR_SET_PDEATHSIG
SIGKILL) and installs no SIGTERM handler (0.5.23 managers/scheduler.py), so a SIGTERM sent to
them directly kills them before they release the GPU. The launcher's tokenizer manager handles
SIGTERM (0.5.23 managers/tokenizer_manager.py, `SignalHandler.sigterm_handler`, installed with
`loop.add_signal_handler` by the first request): a flag its `sigterm_watchdog` polls every 5 s;
then it drains, and 0.5.23 sends the schedulers a ShutdownReq (they release the GPU and exit 0),
waits up to 15 s for them, kills whatever is left of its tree and exits 0. 0.5.1.post3 instead
kills its whole tree and itself at once (return code -9).

The simulated scheduler is one forked child that holds no GPU but can record the memory it holds
in a ledger (the directory named by SPECSWEEP_SIM_GPU_LEDGER, one file per pid, its MiB): the
entry goes away only when it released the memory (a ShutdownReq), so a test's fake NVML can
report what a killed scheduler leaves behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("sglang.launch_server")
LEDGER_ENV = "SPECSWEEP_SIM_GPU_LEDGER"
SIGTERM_POLL_S = 5.0  # tokenizer_manager.sigterm_watchdog: asyncio.sleep(5)
SCHEDULER_EXIT_TIMEOUT_S = 15.0  # tokenizer_manager._SCHEDULER_EXIT_TIMEOUT_SECS (0.5.23)
_TASKS: set[asyncio.Task] = set()  # the watchdog, referenced so it is not collected


def _die_with_parent() -> None:
    """SGLang's `kill_itself_when_parent_died` (0.5.23 utils/common.py)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Scheduler:
    """The launcher's child: waits for a ShutdownReq (a byte on a pipe), then releases and
    exits 0. It keeps the default SIGTERM action, like SGLang's schedulers."""

    def __init__(self, gpu_mib: float):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the scheduler
            os.close(write_end)
            _die_with_parent()
            ledger = os.environ.get(LEDGER_ENV)
            entry = Path(ledger) / str(os.getpid()) if ledger else None
            if entry is not None:
                entry.write_text(f"{gpu_mib:.0f}")
            shutdown = os.read(read_end, 1)
            if shutdown and entry is not None:  # released in userspace (release_host_resources)
                entry.unlink(missing_ok=True)
            os._exit(0 if shutdown else 1)
        os.close(read_end)
        self.pid, self._pipe = pid, write_end

    def exited(self) -> bool:
        try:
            return os.waitpid(self.pid, os.WNOHANG)[0] != 0
        except ChildProcessError:
            return True

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)

    async def shut_down(self, timeout_s: float) -> bool:
        """ShutdownReq, then wait for the scheduler to exit; False if it is still alive."""
        with contextlib.suppress(OSError):  # a scheduler already dead closed its end
            os.write(self._pipe, b"S")
        deadline = time.monotonic() + timeout_s
        while not self.exited():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True


def _flush() -> None:
    for handler in logging.getLogger().handlers + logging.getLogger("sglang.scheduler").handlers:
        handler.flush()


def install_sigterm(
    scheduler: Scheduler, legacy: bool, running: Callable[[], list[str]], scale: float
) -> None:
    """The tokenizer manager's SIGTERM handler and its watchdog, on the running loop;
    `running()` lists the rids of the requests still in flight."""
    flag = asyncio.Event()

    def sigterm_handler() -> None:  # loop.add_signal_handler calls it without arguments
        log.warning(
            "SIGTERM received. signum=None frame=None. Draining requests and shutting down..."
        )
        flag.set()

    async def sigterm_watchdog() -> None:
        while not flag.is_set():
            await asyncio.sleep(SIGTERM_POLL_S / scale)
        while True:
            remaining_rids = running()
            log.info(
                f"Gracefully exiting... Remaining number of requests {len(remaining_rids)}. "
                f"Remaining requests {remaining_rids=}."
            )
            if not remaining_rids:
                break
            await asyncio.sleep(SIGTERM_POLL_S / scale)
        if legacy:  # kill_process_tree(os.getpid(), include_parent=True)
            scheduler.kill()
            _flush()
            os.kill(os.getpid(), signal.SIGKILL)
        if not await scheduler.shut_down(SCHEDULER_EXIT_TIMEOUT_S / scale):
            log.warning(
                "Schedulers still alive %ds after ShutdownReq, killing them before they "
                "released: [%d]",
                int(SCHEDULER_EXIT_TIMEOUT_S),
                scheduler.pid,
            )
        scheduler.kill()  # kill_process_tree(os.getpid(), include_parent=False)
        _flush()
        os._exit(0)  # sys.exit(0)

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, sigterm_handler)
    _TASKS.add(loop.create_task(sigterm_watchdog()))
