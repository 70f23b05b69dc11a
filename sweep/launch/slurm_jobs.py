"""SLURM jobs as submitit runs them: their state without accounting, their time-limit signal.

submitit reads job states with `sacct`, which needs SLURM's accounting storage (slurmdbd). A
cluster without it (the single-node one of `sweep.services.slurm`, many small ones) answers
"Slurm accounting storage is disabled" to every call: submitit logs three warnings per poll and
sees every job as UNKNOWN, so a job that ends without writing its result (cancelled while
pending, killed at its time limit) is waited for forever (Job.wait: no result file, and UNKNOWN
is not an end state). `watch_without_accounting` gives
submitit's SLURM jobs a watcher that reads the states from slurmctld (`squeue`) there instead.

submitit's own handler for the time-limit signal (`--signal=USR2@signal_delay_s`; USR2 unless
SUBMITIT_PREEMPT_SIGNAL says otherwise) requeues the job and exits at once. A worker job
(sweep.launch.workers) first stops its worker with it: `preempt_signal` names that signal.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
from typing import Any

log = logging.getLogger(__name__)

SUBMIT_ENV = "SUBMITIT_EXECUTOR"  # set by submitit in every job it runs
POLL_S = 30.0  # between squeue calls; submitit checks the job's result file every second


def preempt_signal() -> signal.Signals | None:
    """submitit's time-limit/preemption signal inside a submitit job, else None."""
    if not os.environ.get(SUBMIT_ENV):
        return None
    name = os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2")
    return getattr(signal, f"SIG{name}", None)


def accounting_disabled() -> bool:
    """True when this cluster's slurmctld keeps no accounting (sacct cannot answer)."""
    if shutil.which("scontrol") is None:
        return False
    try:
        out = subprocess.run(
            ["scontrol", "show", "config"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except subprocess.TimeoutExpired:
        return False
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "AccountingStorageType":
            return value.strip() in ("accounting_storage/none", "(null)")
    return False


def watch_without_accounting(launcher_target: str) -> bool:
    """For the SLURM launcher on a cluster without accounting: job states from squeue. Returns
    whether it did."""
    if not launcher_target.endswith("SlurmLauncher") or not accounting_disabled():
        return False
    from submitit.slurm import slurm

    # a class attribute: every SlurmJob of this process polls through it
    slurm.SlurmJob.watcher = _squeue_watcher_class(slurm)(delay_s=POLL_S)
    log.info("no SLURM accounting storage: job states come from squeue, not sacct")
    return True


def _squeue_watcher_class(slurm: Any) -> type:
    class SqueueInfoWatcher(slurm.SlurmInfoWatcher):
        """submitit's SLURM watcher, reading `squeue` (one line per array task) for `sacct`."""

        def __init__(self, delay_s: int | float = POLL_S) -> None:
            super().__init__(delay_s=delay_s)
            self._seen: set[str] = set()

        def _make_command(self) -> list[str] | None:
            if not self._registered - self._finished:
                return None
            return ["squeue", "--me", "-h", "-r", "-t", "all", "-o", "%i|%T|%N"]

        def read_info(self, string: bytes | str) -> dict[str, dict[str, str]]:
            text = string.decode() if isinstance(string, bytes) else string
            info: dict[str, dict[str, str]] = {}
            for line in text.splitlines():
                parts = line.strip().split("|")
                if len(parts) == 3:
                    job, state, nodes = parts
                    info[job] = {"JobID": job, "State": state.split()[0], "NodeList": nodes}
            # A job slurmctld no longer lists (MinJobAge after its end) has ended: submitit then
            # looks for its result and reports what it finds, instead of waiting on it.
            for job in (self._registered - self._finished) & (self._seen - set(info)):
                info[job] = {"JobID": job, "State": "PURGED", "NodeList": ""}
            self._seen |= set(info)
            return info

    return SqueueInfoWatcher
