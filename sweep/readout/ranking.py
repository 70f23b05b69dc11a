"""What a study ranks its trials by, for every line that says "fastest" or "best".

A single-stream study ranks by decode tok/s at concurrency 1 (`tok_s`); a throughput study by
output tok/s at its level (`output_tok_s_c<level>`); a weighted load-profile study by its
aggregate (`weighted_throughput`, `weighted_speed`: sweep.study.trial.objective). The trial lines,
the trials table and the verdict all read the same Ranking, so the table's "fastest first" and the
`Best:` line never disagree with each other or with the study (a throughput study's table once
sorted by per-user decode speed: 26 tok/s where its verdict said 713 tok/s output at 32 in
flight; a weighted-throughput study's `Best:` once named the fastest single stream).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.record.results import TrialResult
from harness.record.stats import objective_runs

# The unit of what a weighted objective sums at each level (its field: Objective.PER_LEVEL).
_WEIGHTED = {"weighted_throughput": "tok/s output", "weighted_speed": "tok/s per user"}


@dataclass(frozen=True)
class Ranking:
    """`level` None: decode tok/s at the single-stream level (`tok_s`, its runs objective_runs);
    else output tok/s at that level (`output_tok_s_c{level}`, its runs that level's).
    `weighted`: a weighted load-profile Objective, whose aggregate it ranks by instead (its runs:
    run r's weighted sum over the levels, run r at every level having sent the same prompts in
    every trial)."""

    level: int | None = None
    weighted: Any = None

    @property
    def metric(self) -> str:
        if self.weighted is not None:
            return self.weighted.name
        return "tok_s" if self.level is None else f"output_tok_s_c{self.level}"

    @property
    def unit(self) -> str:
        if self.weighted is not None:
            levels = "/".join(str(c) for c in self.weighted.levels)
            return f"{_WEIGHTED[self.weighted.name]}, weighted over {levels} in flight"
        return "tok/s" if self.level is None else f"tok/s output at {self.level} in flight"

    @property
    def column(self) -> str:
        if self.weighted is not None:
            return f"weighted {_WEIGHTED[self.weighted.name]} ±95%"
        return "tok/s ±95%" if self.level is None else f"output tok/s @{self.level} ±95%"

    def _metrics(self, result: TrialResult) -> dict[str, float]:
        if self.weighted is None or self.metric in result.metrics:
            return result.metrics
        return {**result.metrics, **self.weighted.derived(result)}

    def value(self, result: TrialResult | None) -> float | None:
        return self._metrics(result).get(self.metric) if result is not None else None

    def ci95(self, result: TrialResult) -> float | None:
        return self._metrics(result).get(self.metric + "_ci95")

    def runs(self, result: TrialResult) -> dict[int, float]:
        if self.weighted is not None:
            name = self.weighted.PER_LEVEL[self.weighted.name]
            levels = dict(zip(self.weighted.levels, self.weighted.weights, strict=True))
            by_run: dict[int, dict[int, float]] = {}
            for r in result.runs:
                value = getattr(r, name)
                if r.concurrency in levels and not r.incomplete and value is not None:
                    by_run.setdefault(r.run, {})[r.concurrency] = value
            return {
                run: sum(levels[c] * v for c, v in found.items())
                for run, found in by_run.items()
                if len(found) == len(levels)
            }
        if self.level is None:
            return objective_runs(result.runs)
        return {
            r.run: r.output_tok_s
            for r in result.runs
            if r.concurrency == self.level and not r.incomplete and r.output_tok_s is not None
        }


SINGLE_STREAM = Ranking()


def for_objective(objective: Any) -> Ranking:
    """The ranking of a study's objective (sweep.study.trial.objective.Objective): a throughput
    objective ranks by its level's output tok/s, a weighted one by its aggregate, every other
    one (speed, a Pareto front) by single-stream tok/s."""
    if objective.name in _WEIGHTED:
        return Ranking(weighted=objective)
    return Ranking(objective.concurrency) if objective.name == "throughput" else SINGLE_STREAM
