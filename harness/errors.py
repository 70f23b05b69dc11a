"""One root error class with the facts a user needs to act on a failure."""

from __future__ import annotations


class SpecsweepError(Exception):
    """Root of every error specsweep raises on purpose."""


class ConfigError(SpecsweepError):
    """A configuration value is wrong; the message names the field, the value and the fix."""


class MachineNotReady(SpecsweepError):
    """The machine cannot take the next launch (a busy port, GPU memory still held): no trial
    could succeed, so the sweep stops instead of recording failures."""


class PortInUse(MachineNotReady):
    """The server port is already taken by another process."""


class GpuMemoryHeld(MachineNotReady):
    """Processes of a stopped server still hold GPU memory past the release deadline."""


class ServerError(SpecsweepError):
    """The server failed; carries the tail of its log so the cause is visible without digging."""

    def __init__(self, message: str, *, log_excerpt: str = "", returncode: int | None = None):
        super().__init__(message)
        self.log_excerpt = log_excerpt
        self.returncode = returncode


class ServerOOM(ServerError):
    """GPU (or host) memory ran out: at start-up (KV pool, CUDA-graph capture) or later."""

    def __init__(
        self,
        message: str,
        *,
        mem_fraction_static: float | None = None,
        kind: str | None = None,
        **kwargs,
    ):
        super().__init__(message, **kwargs)
        self.mem_fraction_static = mem_fraction_static
        self.kind = kind  # harness.server.logs.oom_kind: "gpu", "kv_pool" or "host"


class ServerCrashed(ServerError):
    """The server process exited (or stopped answering) for a reason other than memory."""


class ServerStartTimeout(ServerError):
    """The server did not become ready before its deadline."""


class BenchmarkError(SpecsweepError):
    """The benchmark could not produce a measurement (every request failed, for instance)."""
