"""GPUs through NVML (the `gpu` extra: nvidia-ml-py), when the machine has them.

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

log = logging.getLogger(__name__)
_said_no_nvml = False


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
