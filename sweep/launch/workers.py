"""`worker.count=N`: the Hydra launcher places N sweep workers, e.g. one per SLURM node.

Each Hydra job here is a whole worker, not a trial: the job runs `python sweep.py -m` with the
same overrides on the node the launcher put it on (`worker.count=1` there, so it sweeps instead
of launching more workers). The workers share the study through `tracking=server`; each one
runs its node's GPU slots. The launcher (hydra-submitit-launcher's `submitit_slurm`, or
`submitit_local` to try it on one machine; CI runs the latter) decides where they run; this
module only asks it to.

What running it showed (tests/scaleout/test_submitit_workers.py):
- submitit's LocalExecutor sets CUDA_VISIBLE_DEVICES to its `gpus_per_node` GPUs, "" when that
  is unset: every server then saw no GPU. The job drops an empty value (the worker's GPUs are then
  `hardware.gpus`, as in a shell).
- Workers placed by a launcher may share a node (submitit_local always does, SLURM without
  `exclusive` can): a placed worker therefore takes its GPUs and ports through the node's lock
  files even with one slot (`shares_node`), or two of them launch servers on the same GPU/port.
- The job's own process is the one SLURM and submitit signal: it forwards SIGTERM/SIGINT to the
  worker and waits for it to stop its servers, instead of killing it (subprocess.run's way on an
  exception), which left the worker's servers running.
- On a real SLURM cluster (tests/slurm): the time-limit signal (USR2 at signal_delay_s before
  the limit, or `scancel --signal=USR2`) reaches every process of the job's step. USR2's default
  action ended the worker and its server on the spot, recording nothing (the requeued job found
  its trial RUNNING, a crashed sweep's), while submitit's handler requeued the job. The worker and
  its servers now inherit USR2 ignored; the job's own process turns it into one SIGTERM to the
  worker and hands it to submitit's handler (requeue) only once the worker has stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from sweep.launch.slurm_jobs import preempt_signal, watch_without_accounting
from sweep.paths import ROOT
from sweep.readout.console import console

_OWN_KEYS = ("trial.", "worker.count")
PLACED_ENV = "SPECSWEEP_PLACED_WORKER"  # set in a worker a launcher placed: its name
STOP_WAIT_S = 300.0  # a worker stopping its servers (engine.stop_grace_s each, GPU release)


def shares_node() -> bool:
    """True in a worker that a launcher placed: other workers may run on its node."""
    return bool(os.environ.get(PLACED_ENV))


def launch_workers(sweeper: Any, arguments: list[str]) -> list[int]:
    cfg = sweeper.config
    target = str(cfg.hydra.launcher.get("_target_", ""))
    if target.endswith("BasicLauncher"):
        console.print(
            f"[red]error:[/red] worker.count={cfg.worker.count} needs a launcher that runs jobs "
            "side by side, e.g. hydra/launcher=slurm (submitit, one worker per node) or "
            "submitit_local; to share a study from several shells, start `python sweep.py -m` "
            "in each instead (docs/scale-out.md)."
        )
        raise SystemExit(2)
    kept = [a for a in arguments if not a.lstrip("+~").startswith(_OWN_KEYS)]
    jobs = [[*kept, f"trial.name=worker_{i}", "trial.role=worker"] for i in range(cfg.worker.count)]
    console.print(f"starting {len(jobs)} sweep workers through {target.rsplit('.', 1)[-1]}")
    watch_without_accounting(target)  # no sacct on the cluster: job states from squeue
    returns = sweeper.launcher.launch(jobs, initial_job_idx=0)
    codes = [_exit_code(i, r) for i, r in enumerate(returns)]
    study_dir = Path(str(cfg.hydra.sweep.dir))
    for i, code in enumerate(codes):
        log = study_dir / f"worker_{i}" / "worker.log"
        console.print(
            f"worker_{i}: " + ("finished" if code == 0 else f"exit code {code}") + f" (log: {log})",
            soft_wrap=True,
        )
    if any(codes):
        raise SystemExit(1)
    return codes


def _exit_code(index: int, job_return: Any) -> int:
    """A worker's exit code; 1 when its job raised instead, said on the console: submitit's
    handler for the time-limit signal raises 'Job not requeued because: timed-out too many
    times' once hydra.launcher.max_num_timeout requeues are spent."""
    try:
        return int(job_return.return_value)
    except Exception as exc:
        console.print(f"[red]worker_{index}'s job failed:[/red] {exc}", soft_wrap=True)
        return 1


def run_worker(cfg: DictConfig) -> int:
    """Inside the launched job, on its node: one `python sweep.py -m` with the same overrides."""
    overrides = [
        o for o in HydraConfig.get().overrides.task if not o.lstrip("+~").startswith(_OWN_KEYS)
    ]
    folder = Path(HydraConfig.get().runtime.output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, str(ROOT / "sweep.py"), "-m", *overrides, "worker.count=1"]
    env = {**os.environ, PLACED_ENV: str(cfg.trial.name)}
    if env.get("CUDA_VISIBLE_DEVICES") == "":  # submitit_local without gpus_per_node
        del env["CUDA_VISIBLE_DEVICES"]
    # SLURM sends the time-limit signal to every process of the job's step, and its default
    # action ends a process: the worker and its servers inherit it ignored (exec keeps SIG_IGN),
    # so only this process acts on it, by stopping the worker (_wait_forwarding).
    preempt = preempt_signal()
    requeue = signal.signal(preempt, signal.SIG_IGN) if preempt else None  # submitit's handler
    with (folder / "worker.log").open("ab") as out:
        # Its own session: a terminal's Ctrl-C reaches it once, through this process.
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return _wait_forwarding(proc, preempt, requeue)


def _wait_forwarding(
    proc: subprocess.Popen, preempt: signal.Signals | None = None, requeue: Any = None
) -> int:
    """Wait for the worker; a SIGTERM/SIGINT to this job becomes one SIGTERM to the worker (it
    stops its servers and records the interrupted trials), then a bounded wait, then a kill.
    The `preempt` signal does the same, and then calls `requeue` (submitit's handler for it)."""
    signalled: list[int] = []

    def forward(signum, frame) -> None:
        if not signalled and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        signalled.append(signum)

    watched = [signal.SIGTERM, signal.SIGINT, *([preempt] if preempt else [])]
    previous = {s: signal.signal(s, forward) for s in watched}
    if preempt:
        previous[preempt] = requeue if requeue is not None else signal.SIG_DFL
    deadline = None
    try:
        while True:
            try:  # short waits: a signal's handler runs between them, and the deadline starts
                code = proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if signalled and deadline is None:
                    deadline = time.monotonic() + STOP_WAIT_S
                if deadline is not None and time.monotonic() > deadline:
                    os.killpg(proc.pid, signal.SIGKILL)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if preempt in signalled and callable(requeue):
        # Now that the worker has stopped its servers and recorded its trials, submitit may
        # requeue the job (and exit), or end it as timed out: its handler decides.
        requeue(preempt, None)
    return code
