"""The simulated machine's slowly wandering speed (clocks, PCIe, load)."""

from __future__ import annotations

import math
import random

DRIFT_SIGMA = 0.02  # standard deviation of the machine's speed deviation
DRIFT_TIME_S = 20.0  # its correlation time, simulated seconds


class Drift:
    def __init__(self, sigma: float, seed: int):
        self.sigma = sigma
        self._noise = random.Random(seed)
        self.value = 0.0

    def wander(self, dt: float) -> float:
        """Ornstein-Uhlenbeck deviation: ~2% spread, ~20 s memory, so runs differ like a real
        box's do (the seeds saw +-10% on single runs of a few requests) while runs average out."""
        decay = math.exp(-dt / DRIFT_TIME_S)
        self.value = self.value * decay + self.sigma * math.sqrt(1 - decay * decay) * (
            self._noise.gauss(0.0, 1.0)
        )
        return self.value
