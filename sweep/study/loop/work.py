"""The sweeper's own work per trial, by phase: what each trial costs the process besides its server.

Trials in GPU slots share one process: every slot's asking, composing, logging and telling takes
the GIL (and Optuna's and MLflow's sqlite write locks) from the others, so this work, small beside
a launch, is what keeps slots from overlapping fully. Each phase is timed in wall seconds (with
the waits for those locks) and in the thread's own CPU seconds (`time.thread_time`: the work
itself), summed over the sweep's trials; the summary carries them as `sweeper_<phase>_wall_s` and
`sweeper_<phase>_cpu_s`, and `benchmarks/parallel_speedup.py` shows them per trial.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

# The phases of one trial outside its launch, in the order a trial goes through them.
PHASES = (
    "ask",  # stale trials failed, the next trial asked of Optuna (the sampler proposes)
    "decide",  # the job composed, its candidate, the verdict and the claim
    "forecast",  # the model's prediction before the launch
    "log",  # the trial's MLflow run
    "tell",  # Optuna told, the claim released, the trial's line printed
    "stop",  # the model's stopping rules, before the next trial
)


class SweeperWork:
    """Wall and CPU seconds per phase, summed over trials; safe across slot threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.wall_s = dict.fromkeys(PHASES, 0.0)
        self.cpu_s = dict.fromkeys(PHASES, 0.0)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        wall, cpu = time.monotonic(), time.thread_time()
        try:
            yield
        finally:
            wall, cpu = time.monotonic() - wall, time.thread_time() - cpu
            with self._lock:
                self.wall_s[name] += wall
                self.cpu_s[name] += cpu

    def metrics(self) -> dict[str, float]:
        with self._lock:
            out = {f"sweeper_{p}_wall_s": self.wall_s[p] for p in PHASES}
            out |= {f"sweeper_{p}_cpu_s": self.cpu_s[p] for p in PHASES}
        return out
