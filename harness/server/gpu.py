"""GPUs through NVML (the `gpu` extra: nvidia-ml-py), when the machine has them, and the rule
that a stopped server's GPU memory is released before the next launch.

Everything here degrades to "unknown" without NVML or without a GPU, which is the case on the
simulator's machines; callers say so rather than guess.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness.errors import GpuMemoryHeld

log = logging.getLogger(__name__)
_said_no_nvml = False
# pid -> (GPU MiB, command line): processes of servers this process stopped that held GPU memory
# past the release wait (twice engine.gpu_release_timeout_s).
_UNRELEASED: dict[int, tuple[float, str | None]] = {}


@dataclass(frozen=True)
class GpuProcess:
    gpu: int
    pid: int
    used_mib: float


def _nvml(module=None):
    """pynvml initialised, or None. `module` stands in for pynvml (tests inject a fake)."""
    if module is None:
        try:
            import pynvml as module
        except ImportError:
            return None
    try:
        module.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound / DriverNotLoaded: no usable GPU here
        return None
    return module


def gpu_inventory() -> dict[str, Any] | None:
    """Model, count, driver and per-GPU memory, or None when NVML is not usable."""
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        count = nvml.nvmlDeviceGetCount()
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        names = [nvml.nvmlDeviceGetName(h) for h in handles]
        memory = [nvml.nvmlDeviceGetMemoryInfo(h) for h in handles]
        return {
            "count": count,
            "model": names[0] if names else None,
            "models": names,
            "driver": nvml.nvmlSystemGetDriverVersion(),
            "total_mib": [m.total / 2**20 for m in memory],
            "free_mib": [m.free / 2**20 for m in memory],
        }
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def _cuda_version(nvml) -> str | None:
    """The CUDA version the driver supports (12040 -> "12.4"), or None where NVML lacks it."""
    try:
        number = int(nvml.nvmlSystemGetCudaDriverVersion())
    except Exception:  # an old NVML without the call, or no driver answer
        return None
    return f"{number // 1000}.{number % 1000 // 10}"


def gpu_versions(module=None) -> dict[str, str | None]:
    """The NVIDIA driver and its CUDA version (read-only NVML); both None without NVML."""
    nvml = _nvml(module)
    if nvml is None:
        return {"driver": None, "cuda": None}
    try:
        driver = nvml.nvmlSystemGetDriverVersion()
        if isinstance(driver, bytes):  # older pynvml returns bytes
            driver = driver.decode()
        return {"driver": str(driver), "cuda": _cuda_version(nvml)}
    except Exception:
        return {"driver": None, "cuda": None}
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def gpu_processes(module=None) -> list[GpuProcess] | None:
    """Processes holding GPU memory, or None when NVML is not usable."""
    nvml = _nvml(module)
    if nvml is None:
        return None
    try:
        found = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                used = (proc.usedGpuMemory or 0) / 2**20
                found.append(GpuProcess(index, proc.pid, used))
        return found
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def wait_gpu_released(
    pids: Iterable[int], deadline_s: float, *, interval_s: float = 0.5, module=None
) -> list[GpuProcess] | None:
    """Wait until none of `pids` (a stopped server's tree, snapshot before the kill) hold GPU
    memory. A reaped process's memory is freed by the driver later, sometimes minutes later, and
    a launch in between runs out of memory (shared/reference/sglang.md §10).

    Returns [] once released, the holders left at the deadline otherwise, or None without NVML
    (then nothing is checked, and that is said once)."""
    global _said_no_nvml
    wanted = set(pids)
    end = time.monotonic() + deadline_s
    while True:
        found = gpu_processes(module)
        if found is None:
            if not _said_no_nvml:
                log.info("GPU memory release after a stop is not checked: NVML is unavailable")
                _said_no_nvml = True
            return None
        held = [p for p in found if p.pid in wanted]
        if not held or time.monotonic() >= end:
            return held
        time.sleep(min(interval_s, max(end - time.monotonic(), 0)))


def _holder(p: GpuProcess, commands: dict[int, str | None]) -> str:
    command = commands.get(p.pid) or "command line unknown"
    return f"pid {p.pid} ({command}; {p.used_mib:.0f} MiB on GPU {p.gpu})"


def await_gpu_release(
    tree: Iterable[int], deadline_s: float, commands: dict[int, str | None] | None = None
) -> float | None:
    """After a stop: wait for the stopped tree's GPU memory, as SGLang's own teardown does (0.5.23
    test/test_utils.py::wait_for_gpu_release: a reaped tree does not mean the driver is done).
    Memory still held at the deadline is named in the log and waited for once more, as long
    again; what is held after that is remembered (with the command lines of `commands`, taken
    before the kill), and check_gpu_released refuses the next launch while it stays held.

    Returns the seconds the release took (the whole wait when it never came), or None when
    nothing could be checked (no NVML)."""
    wanted = set(tree)
    commands = commands or {}
    if not wanted:
        return 0.0
    started = time.monotonic()
    held = wait_gpu_released(wanted, deadline_s)
    if held is None:
        return None
    if held:
        log.warning(
            "GPU memory still held %g s after the server stopped: %s; waiting %g s more "
            "(engine.gpu_release_timeout_s)",
            deadline_s,
            ", ".join(_holder(p, commands) for p in held),
            deadline_s,
        )
        held = wait_gpu_released({p.pid for p in held}, deadline_s) or []
    for holder in held:
        _UNRELEASED[holder.pid] = (holder.used_mib, commands.get(holder.pid))
    if held:
        log.warning(
            "GPU memory still held %g s after the server stopped: %s",
            2 * deadline_s,
            ", ".join(_holder(p, commands) for p in held),
        )
    return time.monotonic() - started


def check_gpu_released() -> None:
    """Before a launch: a stopped server's processes that held GPU memory at their deadline must
    have let go by now, or the next server runs out of memory against them."""
    if not _UNRELEASED:
        return
    held = wait_gpu_released(set(_UNRELEASED), 0) or []
    remembered = dict(_UNRELEASED)
    _UNRELEASED.clear()
    for holder in held:
        _UNRELEASED[holder.pid] = (holder.used_mib, remembered[holder.pid][1])
    if held:
        commands = {pid: command for pid, (_, command) in remembered.items()}
        listed = ", ".join(_holder(p, commands) for p in held)
        raise GpuMemoryHeld(
            f"the previous server's processes still hold GPU memory: {listed}. Not launching "
            "into it (the next server would run out of memory). Check nvidia-smi and stop them; "
            "raise engine.gpu_release_timeout_s if the driver is just slow to free memory."
        )
