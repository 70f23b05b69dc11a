"""The run scheduler: which measured run comes next, decided from the runs measured so far.

Per concurrency level, in order: `runs` complete runs (an incomplete one, with a stalled or an
aborted request, is replaced, up to `max_runs` started), more while `adaptive` and the 95%
interval of the level's rate (decode tok/s at C = 1, output tok/s above) is wider than
`target_ci_pct`, and none after an early stop (`EarlyStop`: this configuration cannot beat the
best so far), which ends the whole schedule. Runs are numbered from `first_run` (1, or after the
runs a trial already recorded when a resolve relaunch adds more: the number picks the prompts).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from harness.record.results import RunSummary
from harness.record.stats import summarize
from harness.spec import BenchmarkSpec, EarlyStop


@dataclass(frozen=True)
class Run:
    """A measured run the schedule asks for: the `number`-th at `concurrency`."""

    number: int
    concurrency: int


class Schedule:
    """The runs of one benchmark; `measured` is its list of run summaries, read as it grows."""

    def __init__(
        self, spec: BenchmarkSpec, measured: Sequence[RunSummary], early_stop: EarlyStop | None
    ):
        self.spec = spec
        self.measured = measured
        self.early_stop = early_stop
        self.stopped_early = False

    def __iter__(self) -> Iterator[Run]:
        """The measured runs, each decided after the previous one was measured."""
        for index, concurrency in enumerate(self.spec.concurrency):
            last_level = index == len(self.spec.concurrency) - 1
            number = 0
            while self.wants_another_run(number, concurrency):
                number += 1
                yield Run(self.spec.first_run - 1 + number, concurrency)
                more = not last_level or self.wants_another_run(number, concurrency)
                complete = [r for r in self.measured if not r.incomplete]
                if more and self.early_stop and self.early_stop.should_stop(complete):
                    self.stopped_early = True
                    return

    def wants_another_run(self, started: int, concurrency: int) -> bool:
        """Until `runs` complete runs (an incomplete one is replaced, up to max_runs in all)."""
        level = [r for r in self.measured if r.concurrency == concurrency]
        done = sum(not r.incomplete for r in level)
        if started >= self.spec.max_runs:
            return False
        if done < self.spec.runs:
            return True
        if not self.spec.adaptive:
            return False
        values = [
            r.decode_tok_s if concurrency == 1 else r.output_tok_s
            for r in level
            if not r.incomplete
        ]
        values = [v for v in values if v is not None]
        if len(values) < 2:
            return True
        stat = summarize(values)
        return 100 * stat.ci95 / stat.mean > self.spec.target_ci_pct
