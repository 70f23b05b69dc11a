"""Which prompts each request of a benchmark sends: warm-up apart, runs disjoint, trials paired.

The workload is shuffled once by `benchmark.seed` (`harness.workload`), so every trial of a study
sees the same order. The plan cuts that order into segments:

- the warm-up takes the first `warmup` prompts; no measured run ever sends one of them;
- the rest (the pool) is cut, per concurrency level, into consecutive segments of
  `max(run size, pool // max_runs)` prompts; measured run r at a level sends segment r-1 of that
  level, from its start. A replacement run (an incomplete run is replaced by the next number) or
  an adaptive extra run has its own number, so its own segment.

Run r therefore sends the same prompts in every trial of the study, the baseline included
(trials are paired run by run: `harness.record.stats.paired_ratio`), and no two runs of a level
share a prompt while the pool lasts. Levels may share prompts with each other: each level's interval
is over its own runs, and every run starts from a flushed cache.

When the workload is too small, two things can happen, each said once per benchmark:
- a run that asks for more prompts than its segment holds (a steady-state loop that keeps
  going) cycles through its own segment again: it never borrows another run's prompts;
- a run number past the last whole segment reuses segment (r-1) mod segments, another run's
  prompts: its runs are then correlated and the interval narrower than the truth.
Both are warnings, and a level whose planned `runs` cannot all have their own prompts is named
before the sweep starts (`short_levels`: the banner's workload line and the summary's
`prompt_reuse`). A workload that cannot give the warm-up and the planned `runs` of the
objective level disjoint prompts is refused at config time (`check_fits`): the interval the
verdicts rest on would measure repeats of the same prompts.

The lossless check (`harness.measure.lossless`) sends the first `lossless_check` prompts of the
shuffled order, which may be warm-up or measured prompts: it runs after the measured runs and in no
measured window, so the overlap cannot bias a measurement.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator, Sequence

from harness.errors import ConfigError
from harness.spec import BenchmarkSpec
from harness.workload import Prompt

log = logging.getLogger(__name__)


class PromptPlan:
    """The segments of one benchmark's prompts (the same for every trial with the same spec)."""

    def __init__(self, prompts: Sequence[Prompt], spec: BenchmarkSpec):
        if not prompts:
            raise ConfigError("the workload has no prompts")
        self.prompts = tuple(prompts)
        self.warmup = min(spec.warmup, len(self.prompts))
        self.pool = self.prompts[self.warmup :] or self.prompts  # all warm-up: shared (warned)
        self.max_runs = spec.max_runs
        self.sizes = {c: spec.requests_at(c) for c in spec.concurrency}
        self._warned: set[tuple[str, int]] = set()
        if len(self.prompts) <= spec.warmup:
            self._warn_once(
                "warmup", 0, f"the workload's {len(self.prompts)} prompts are all warm-up "
                "prompts: measured runs send them too"
            )  # fmt: skip

    def segment_length(self, concurrency: int) -> int:
        """Prompts in one run's segment at this level: at least what a run sends, more when the
        pool has room for max_runs segments (for runs that keep sending: steady state)."""
        size = self.sizes.get(concurrency, concurrency)
        return max(1, min(len(self.pool), max(size, len(self.pool) // self.max_runs)))

    def segments(self, concurrency: int) -> int:
        """Whole, disjoint segments the pool holds at this level."""
        return len(self.pool) // self.segment_length(concurrency)

    def short_levels(self, runs: int) -> dict[int, int]:
        """The levels whose pool holds fewer than `runs` disjoint runs -> the runs it holds
        there: runs past them send another run's prompts (said in the banner and summary)."""
        return {c: self.segments(c) for c in self.sizes if self.segments(c) < runs}

    def warmup_prompts(self) -> tuple[Prompt, ...]:
        return self.prompts[: self.warmup]

    def segment(self, run: int, concurrency: int) -> tuple[Prompt, ...]:
        """Measured run `run` (1-based) at `concurrency`: its prompts, in sending order."""
        length, count = self.segment_length(concurrency), self.segments(concurrency)
        index = (run - 1) % count
        if run > count:
            self._warn_once(
                "reuse", concurrency,
                f"the workload holds {count} disjoint run(s) of {length} prompts at concurrency "
                f"{concurrency}; run {run} reuses run {index + 1}'s prompts (its runs are then "
                "correlated: use a larger workload or fewer runs)",
            )  # fmt: skip
        return self.pool[index * length : (index + 1) * length]

    def source(self, phase: str, run: int, concurrency: int) -> Iterator[Prompt]:
        """The prompts of one phase/run, endless: past its segment it cycles the same segment."""
        prompts = self.warmup_prompts() if phase == "warmup" else self.segment(run, concurrency)
        if not prompts:  # warmup 0: nothing to send (a caller asking anyway gets pool prompts)
            prompts = self.pool
        for sent, prompt in enumerate(itertools.cycle(prompts)):
            if sent == len(prompts):
                self._warn_once(
                    phase, concurrency,
                    f"a {phase} run at concurrency {concurrency} sent more than its "
                    f"{len(prompts)} prompts; it repeats them (a larger workload avoids it)",
                )  # fmt: skip
            yield prompt

    def _warn_once(self, kind: str, concurrency: int, message: str) -> None:
        if (kind, concurrency) not in self._warned:
            self._warned.add((kind, concurrency))
            log.warning("prompt plan: %s", message)


def needed(spec: BenchmarkSpec) -> int:
    """The fewest prompts the plan accepts: the warm-up plus `runs` disjoint runs of the
    objective level (the level the interval, the pruning and the speedup are judged on)."""
    return spec.warmup + spec.runs * spec.requests_at(spec.objective_concurrency)


def check_fits(prompts: Sequence[Prompt], spec: BenchmarkSpec, source: str = "") -> None:
    """Refuse, before any launch, a workload far too small for the plan."""
    need = needed(spec)
    if len(prompts) < need:
        level = spec.objective_concurrency
        raise ConfigError(
            f"benchmark.prompts={source or spec.prompts!r} has {len(prompts)} prompts; the plan "
            f"needs {need}: warm-up {spec.warmup} + {spec.runs} runs x "
            f"{spec.requests_at(level)} requests at concurrency {level}, each run its own "
            "prompts. Use a larger workload, or lower benchmark.runs, requests_per_run (or "
            "requests_per_level) or warmup."
        )
