"""What a study has spent, in GPU-hours, and when a budget in them is used up.

A launched trial costs its server's time on the GPUs it holds: start-up (on the server's clock,
`startup_s`) plus the rest of the trial (benchmark, lossless check, stop; wall time converted to
the server's clock) times the GPUs (`model.tp`). A trial that launched nothing (a duplicate, a
predicted OOM, a known crash, a configuration refused before launch) costs nothing. The driver
records each trial's cost as the `gpu_hours` user attribute, so the spend is read back from the
study: a resumed sweep (or another worker) sees what earlier sweeps spent, and a study-wide
`search.budget_gpu_hours` is finished, not started again.
"""

from __future__ import annotations

import math

from optuna.trial import FrozenTrial

from harness.record.results import TrialResult
from sweep.study.trial.unlaunched import NOT_LAUNCHED

# With a budget, the sweep also stops after this many proposals in a row that launched nothing
# (the sampler keeps proposing what the study knows: the space is exhausted for it).
MAX_IDLE_PROPOSALS = 25


def trial_seconds(result: TrialResult) -> float:
    """The server's time a launched trial held its GPUs, on the server's clock."""
    if result.outcome in NOT_LAUNCHED or result.wall_s is None:
        return 0.0
    scale = result.clock_scale or 1.0
    if result.startup_s is not None and result.startup_wall_s is not None:
        rest = max(0.0, result.wall_s - result.startup_wall_s)
        return result.startup_s + rest * scale
    return result.wall_s * scale


def gpu_hours(result: TrialResult, gpus: int) -> float:
    return round(trial_seconds(result) * gpus / 3600, 6)


def spent(trials: list[FrozenTrial]) -> float:
    """GPU-hours the study's trials recorded (every sweep and worker of it)."""
    return sum(float(t.user_attrs.get("gpu_hours") or 0.0) for t in trials)


class Budget:
    """`search.budget_gpu_hours` over the whole study (None: no budget, `n_trials` decides)."""

    def __init__(self, gpu_hours_total: float | None):
        if gpu_hours_total is not None and not (
            math.isfinite(float(gpu_hours_total)) and gpu_hours_total > 0
        ):
            raise ValueError(
                f"search.budget_gpu_hours={gpu_hours_total}: GPU-hours > 0 (or null: no budget)"
            )
        self.total = None if gpu_hours_total is None else float(gpu_hours_total)
        self.idle = 0  # proposals in a row that launched nothing

    @property
    def active(self) -> bool:
        return self.total is not None

    def remaining(self, trials: list[FrozenTrial]) -> float | None:
        return None if self.total is None else max(0.0, self.total - spent(trials))

    def note(self, result: TrialResult) -> None:
        self.idle = self.idle + 1 if result.outcome in NOT_LAUNCHED else 0

    def exhausted(self, trials: list[FrozenTrial]) -> bool:
        if self.total is None:
            return False
        return spent(trials) >= self.total or self.idle >= MAX_IDLE_PROPOSALS
