"""What a study ranks its trials by, for every line that says "fastest" or "best".

A single-stream study ranks by decode tok/s at concurrency 1 (`tok_s`); a throughput study by
output tok/s at its level (`output_tok_s_c<level>`). The trial lines, the trials table and the
verdict all read the same Ranking, so the table's "fastest first" and the `Best:` line never
disagree (a throughput study's table once sorted by per-user decode speed: 26 tok/s where its
verdict said 713 tok/s output at 32 in flight).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.results import TrialResult
from harness.stats import objective_runs


@dataclass(frozen=True)
class Ranking:
    """`level` None: decode tok/s at the single-stream level (`tok_s`, its runs objective_runs);
    else output tok/s at that level (`output_tok_s_c{level}`, its runs that level's)."""

    level: int | None = None

    @property
    def metric(self) -> str:
        return "tok_s" if self.level is None else f"output_tok_s_c{self.level}"

    @property
    def unit(self) -> str:
        return "tok/s" if self.level is None else f"tok/s output at {self.level} in flight"

    @property
    def column(self) -> str:
        return "tok/s ±95%" if self.level is None else f"output tok/s @{self.level} ±95%"

    def value(self, result: TrialResult | None) -> float | None:
        return result.metrics.get(self.metric) if result is not None else None

    def ci95(self, result: TrialResult) -> float | None:
        return result.metrics.get(self.metric + "_ci95")

    def runs(self, result: TrialResult) -> dict[int, float]:
        if self.level is None:
            return objective_runs(result.runs)
        return {
            r.run: r.output_tok_s
            for r in result.runs
            if r.concurrency == self.level and not r.incomplete and r.output_tok_s is not None
        }


SINGLE_STREAM = Ranking()


def for_objective(objective: Any) -> Ranking:
    """The ranking of a study's objective (sweep.study.objective.Objective): a throughput
    objective ranks by its level's output tok/s, every other one by single-stream tok/s."""
    return Ranking(objective.concurrency) if objective.name == "throughput" else SINGLE_STREAM
