"""How many requests the KV pool admits at each level, from what each launch reported.

Under load a server's output is the requests it runs at once times what each request gets per
second. The fraction moves only the first: it sizes the KV pool (`max_total_num_tokens`, which
the harness records from /server_info), and where the pool does not hold a level's requests,
SGLang admits fewer and the rest wait (the decode lines' `#running-req`, recorded per level as
`running_mean_c<C>`). Two launches of one configuration at two fractions then differ by their
pools (on a memory-tight box one step of 0.01 moved throughput ~55%); read as one configuration
with one speed, the model takes that for noise. So the model fits each level's speed per
running request and multiplies it back by the requests the candidate's pool admits:

    admitted(C, f) = min(held(C), pool(f) / tokens per request)

- `held(C)`: the most requests any launch ran at level C (the level itself, or the running cap
  where it binds first);
- tokens per request at C: the least pool / running over the launches (a launch whose pool
  bound the level runs pool / tokens-per-request requests; one whose pool did not runs fewer
  than its pool holds, so its ratio is larger);
- pool(f): the line through the launches' (fraction, pool) points. SGLang 0.5.23 sizes the pool
  from the memory left after the weights less the share the fraction keeps out of it:
  rest = available - pre_model_load_memory x (1 - mem_fraction_static), then rest / cell bytes
  (`mem_cache/kv_cache_configurator.py::_profile_available_bytes` and `calculate_pool_sizes`,
  the successor of model_runner's `profile_max_num_token`): linear in the fraction. With one
  fraction measured the slope is unknown and the pool is held at what it reported.
Where a level's running requests were not recorded, the level is fitted as before (its speed as
measured, `None` here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sweep.study.model.observations import Observation


@dataclass(frozen=True)
class Admission:
    """What the study's launches say of the pool and the requests it admits."""

    slope: float | None  # pool tokens per unit of fraction (None: one fraction measured)
    intercept: float | None  # with the slope: the line's pool at fraction 0
    reported: float | None  # the largest pool a launch reported (None: none did)
    held: dict[int, float]  # the most requests any launch ran, per level
    per_request: dict[int, float]  # the pool's tokens per running request, per level

    def pool(self, fraction: float | None) -> float | None:
        """The pool at `fraction`: on the line where two fractions were measured; else (or with
        no fraction given) the largest reported."""
        if self.slope is None or self.intercept is None or fraction is None:
            return self.reported
        return max(0.0, self.slope * fraction + self.intercept)

    def admitted(self, level: int, fraction: float | None) -> float | None:
        """The requests a launch at `fraction` runs at `level` (None: not recorded)."""
        held = self.held.get(level)
        if held is None:
            return None
        pool, per = self.pool(fraction), self.per_request.get(level)
        if pool is None or not per:
            return held
        return max(1.0, min(held, pool / per))


def fit(observations: Sequence[Observation], levels: Sequence[int]) -> Admission:
    """The pool line and, per level, the requests held and the tokens per request."""
    points = [(o.fraction, o.pool) for o in observations if o.fraction and o.pool]
    slope = intercept = None
    if len({round(f, 6) for f, _ in points}) >= 2:
        f, p = np.array(points, dtype=float).T
        slope, intercept = (float(v) for v in np.polyfit(f, p, 1))
    reported = max((float(o.pool) for o in observations if o.pool), default=None)
    held: dict[int, float] = {}
    per_request: dict[int, float] = {}
    for c in levels:
        running = [
            (o.levels[c].running, o.pool)
            for o in observations
            if c in o.levels and o.levels[c].running
        ]
        if not running:
            continue
        held[c] = max(n for n, _ in running)
        ratios = [pool / n for n, pool in running if pool]
        if ratios:
            per_request[c] = min(ratios)
    return Admission(slope, intercept, reported, held, per_request)


__all__ = ["Admission", "fit"]
