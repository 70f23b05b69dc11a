"""GPUs through NVML (the `gpu` extra: nvidia-ml-py), when the machine has them.

Everything here degrades to "unknown" without NVML or without a GPU, which is the case on the
simulator's machines; callers say so rather than guess.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GpuProcess:
    gpu: int
    pid: int
    used_mib: float


def _nvml():
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound / DriverNotLoaded: no usable GPU here
        return None
    return pynvml


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


def gpu_processes() -> list[GpuProcess] | None:
    """Processes holding GPU memory, or None when NVML is not usable."""
    nvml = _nvml()
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
