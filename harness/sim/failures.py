"""How a server dies, as SGLang prints it: the texts and exit codes of the failures the simulator
reproduces on demand (`--sim-fault`), copied from SGLang's source (docs/reliability.md cites the
file and version of each).

Every death ends as SGLang's do: the launcher's SIGQUIT handler kills its process tree and then
itself with SIGKILL, so the return code is -9.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable

from harness.sglang.surfaces import surface
from harness.sim.faults import Faults

log = logging.getLogger("sglang.launch_server")
sched_log = logging.getLogger("sglang.scheduler")

# torch's note under every CUDA error (c10's CUDA check; quoted in sgl-project/sglang#5029).
TORCH_CUDA_NOTE = (
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
)
ILLEGAL_ADDRESS = "CUDA error: an illegal memory access was encountered"

# 0.5.23 mem_cache/kv_cache_configurator.py (also 0.5.22): hybrid models' state pool too small.
HYBRID_POOL_OOM = (
    "RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
    "Computed max_mamba_cache_size=0 (total_rest_memory=0.41 GB, mamba_cache_per_req=48.00 MB). "
    "Try: (1) reduce --max-running-requests, (2) increase --mem-fraction-static, (3) reduce "
    "--speculative-num-draft-tokens, or (4) use GPUs with more memory."
)

# Faults only the 0.5.22+ surface can show (0.5.1.post3 has no subprocess watchdog, no hybrid
# state pools), and why.
NEEDS_CURRENT = {
    "host-oom-after-tokens": "0.5.1.post3 has no subprocess watchdog",
    "hybrid-pool-oom": "0.5.1.post3 has no hybrid state pools",
}


def _flush_and_kill() -> None:
    for handler in logging.getLogger().handlers + sched_log.handlers:
        handler.flush()
    os.kill(os.getpid(), signal.SIGKILL)  # kill_process_tree(os.getpid()): itself.kill()


def die_like_sglang(message: str) -> None:
    """Scheduler exception -> SIGQUIT to the launcher -> it kills its tree and itself (-9)."""
    sched_log.error("Scheduler hit an exception: Traceback (most recent call last):\n%s", message)
    log.error("Received sigquit from a child process. It usually means the child failed.")
    _flush_and_kill()


def _sigquit_after_start_up(version: str) -> None:
    """The running-phase SIGQUIT handler (0.5.23 managers/tokenizer_manager.py, installed with
    loop.add_signal_handler, so it is called without arguments); 0.5.1.post3 prints the
    launch-phase text here too."""
    if surface(version).legacy:
        log.error("Received sigquit from a child process. It usually means the child failed.")
    else:
        log.error("SIGQUIT received. signum=None, frame=None. It usually means one child failed.")


def capture_crash(help_text: str) -> None:
    """CUDA-graph capture fails with an illegal memory access: SGLang's wrapper catches any
    RuntimeError and adds its "lower --mem-fraction-static" hint all the same."""
    die_like_sglang(
        f"torch.AcceleratorError: {ILLEGAL_ADDRESS}\n{TORCH_CUDA_NOTE}\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        f"Exception: Capture cuda graph failed: {ILLEGAL_ADDRESS}\n{TORCH_CUDA_NOTE}\n" + help_text
    )


def kv_pool_full(version: str, phase: str, batch_tokens: int, available: int) -> None:
    """The allocator finds no KV slot even after eviction (0.5.23 mem_cache/allocation.py,
    0.5.1.post3 managers/schedule_batch.py): logged, raised, and the scheduler dies."""
    text = (
        f"{phase.capitalize()} out of memory. Try to lower your batch size.\n"
        f"Try to allocate {batch_tokens} tokens.\n"
        f"Available tokens: {available} (available_size={available} + evictable_size=0)"
    )
    sched_log.error(text)
    sched_log.error(
        "Scheduler hit an exception: Traceback (most recent call last):\nRuntimeError: %s", text
    )
    _sigquit_after_start_up(version)
    _flush_and_kill()


def scheduler_oom_killed(version: str) -> None:
    """The kernel's OOM killer SIGKILLs scheduler 0 after start-up: nothing from the scheduler;
    the launcher's SubprocessWatchdog (0.5.23 utils/watchdog.py, polling every 1 s) reports it
    and SIGQUITs its own process, whose handler kills the tree and itself."""
    pid = os.getpid() + 1  # the scheduler's pid, as it would be
    log.error(
        "Subprocess scheduler_0 (pid=%d) crashed with exit code -9. Triggering SIGQUIT for "
        "cleanup...",
        pid,
    )
    _sigquit_after_start_up(version)
    _flush_and_kill()


def runtime_death(
    faults: Faults, version: str, kv_tokens: int
) -> tuple[int | None, Callable[[int, str], None]]:
    """The earliest of the faults that kill a running server once N tokens were generated:
    (N, what happens then). The engine calls it with the tokens so far and the phase."""
    deaths: list[tuple[int, Callable[[int, str], None]]] = []
    if faults.crash_after_tokens is not None:

        def gpu_oom(generated: int, phase: str) -> None:
            die_like_sglang(
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. "
                f"(simulated fault after {generated} generated tokens)"
            )

        deaths.append((faults.crash_after_tokens, gpu_oom))
    if faults.kv_oom_after_tokens is not None:

        def kv_oom(generated: int, phase: str) -> None:
            kv_pool_full(version, phase, 64, min(kv_tokens, 7))

        deaths.append((faults.kv_oom_after_tokens, kv_oom))
    if faults.host_oom_after_tokens is not None:
        deaths.append(
            (faults.host_oom_after_tokens, lambda generated, phase: scheduler_oom_killed(version))
        )
    if not deaths:
        return None, lambda generated, phase: None
    return min(deaths, key=lambda death: death[0])
