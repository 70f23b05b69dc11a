"""The benchmark's steps against a ready server: warm up, then per scheduled run flush + measure.

Warm-up requests are recorded but never measured. Each measured run is preceded by a flush of the
server's cache, so no run reuses another's prefixes and the server's speculative counters cover only
that run; its accept length comes from the same window (`harness.measure.acceptance`). A run at
concurrency 1 is `requests_at(1)` requests one after another; above 1 it is steady state
(`harness.measure.steady`): C in flight until the window holds `window_at(C)` completions; the
requests are sent and kept by `harness.measure.sender`. The schedule (`harness.measure.schedule`)
decides one run at a time from what was measured so far: repeats, replaced incomplete runs, adaptive
runs, an early stop.

Every step runs beside a watchdog (`harness.measure.watchdog`) that checks the server, so a server
that dies mid-run ends the benchmark at once, not when its requests time out. Records survive a
failure halfway (they are kept on the instance).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from harness.measure.acceptance import accept_by_position, open_window, window_accept_length
from harness.measure.client import deadline_error, is_aborted
from harness.measure.client_cpu import CpuMeter
from harness.measure.clock import ServerClock, close_client_gaps
from harness.measure.flush import flush_when_idle
from harness.measure.http_stream import StreamClient, event_loop_factory
from harness.measure.lossless import LosslessOutput, collect
from harness.measure.metrics import aggregate_metrics, summarize_run
from harness.measure.prompt_plan import PromptPlan
from harness.measure.schedule import Run, Schedule
from harness.measure.sender import Sender
from harness.measure.steady import is_cut, steady_window
from harness.measure.step_acceptance import StepShape, step_histograms
from harness.measure.timeline import Timeline
from harness.measure.watchdog import settle, watch_server, watched
from harness.record.results import RequestRecord, RunSummary, StepHistogram
from harness.spec import BenchmarkSpec, EarlyStop
from harness.workload import load_prompts

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class BenchmarkResult:
    records: list[RequestRecord]
    runs: list[RunSummary]
    metrics: dict[str, float]
    stopped_early: bool = False
    # Accept length per POSITION_WINDOW output tokens over the measured requests (speculative).
    accept_by_window: list[float] = field(default_factory=list)
    # P(>=k) per level from the verify steps (harness.measure.step_acceptance; speculative).
    step_histograms: list[StepHistogram] = field(default_factory=list)


class Benchmark:
    """Used as a context manager: one event loop and one connection pool for all its steps."""

    def __init__(
        self,
        base_url: str,
        spec: BenchmarkSpec,
        clock: ServerClock,
        *,
        speculative: bool,
        on_request: Callable[[RequestRecord, int, int, int], None] | None = None,
        check_server: Callable[[], None] | None = None,
        early_stop: EarlyStop | None = None,
        server_log: Path | None = None,
        headers: dict[str, str] | None = None,
        steps: StepShape | None = None,
    ):
        self.base_url = base_url
        self.spec = spec
        self.clock = clock
        self.speculative = speculative
        self.steps = steps  # what a verify step can carry: P(>=k) per level (None: not counted)
        self.check_server = check_server or (lambda: None)
        self.server_log = server_log
        self.headers = headers or {}  # Authorization when the server has an --api-key
        self.prompts = load_prompts(spec.prompts, spec.seed, spec.categories)
        self.prompt_plan = PromptPlan(self.prompts, spec)  # warm-up apart, runs disjoint, paired
        self._sender = Sender(
            spec,
            clock,
            self.prompt_plan,
            speculative=speculative,
            on_request=on_request or (lambda _record, _done, _total, _tokens: None),
            check_server=self.check_server,
        )
        self.run_summaries: list[RunSummary] = []
        self._schedule = Schedule(spec, self.run_summaries, early_stop)  # reads the summaries
        self._flushed = False  # whether the flush before the coming run worked
        self._flush_attempts = 0  # how many posts that flush took
        self._flush_asked = False  # whether a flush preceded the coming run at all
        self._runner: asyncio.Runner | None = None
        self._client: httpx.AsyncClient | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> Benchmark:
        self._runner = asyncio.Runner(loop_factory=event_loop_factory())
        self._client = StreamClient(
            base_url=self.base_url,
            limits=httpx.Limits(max_connections=max(self.spec.concurrency) + 4),
            timeout=httpx.Timeout(self.spec.request_deadline_s, connect=30.0),
            headers=self.headers,
        )
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._runner is not None and self._client is not None
        try:
            with contextlib.suppress(Exception):  # never hide the error that ended the steps
                self._runner.run(self._client.aclose())
        finally:
            self._runner.close()
            self._runner = self._client = None

    @property
    def records(self) -> list[RequestRecord]:
        """Every request sent so far, warm-up included (harness.measure.sender)."""
        return self._sender.records

    @property
    def timelines(self) -> list[Timeline]:
        """The measured requests' timelines so far."""
        return self._sender.timelines

    def run(self) -> BenchmarkResult:
        """The benchmark alone: the steps `harness.trial.run_trial` spells out."""
        with self:
            self.warm_up()
            for run in self.schedule():
                self.flush()
                self.measure(run)
        return self.result()

    # -- the steps -----------------------------------------------------------------------------
    def warm_up(self) -> None:
        """Requests at the first level that load caches and settle the scheduler; recorded with
        phase "warmup", never measured."""
        if self.spec.warmup:
            level = self.spec.concurrency[0]
            self._step(self._sender.wave(self._client, "warmup", 0, level, self.spec.warmup))  # type: ignore[arg-type]

    def schedule(self) -> Iterator[Run]:
        """The measured runs, each decided after the previous one was measured
        (harness.measure.schedule)."""
        return iter(self._schedule)

    @property
    def stopped_early(self) -> bool:
        """Whether the schedule ended on an early stop."""
        return self._schedule.stopped_early

    def flush(self) -> bool:
        """Empty the server's cache before a measured run, waiting for its scheduler to be idle
        and retrying a refusal; False (and a warning) if every attempt failed. The outcome and
        the number of attempts go on the coming run's summary (`flushed`, `flush_attempts`)."""
        self._flushed, self._flush_attempts = self._step(self._flush())
        self._flush_asked = True
        return self._flushed

    def measure(self, run: Run) -> RunSummary:
        """One measured run (flush first): its requests at its level, summarised."""
        cpu = CpuMeter.start()
        summary = cpu.record(self._step(self._measure(run)))
        summary.flushed = self._flushed if self._flush_asked else None
        summary.flush_attempts, self._flush_asked = self._flush_attempts, False
        self.run_summaries.append(summary)
        return summary

    def lossless_outputs(self) -> list[LosslessOutput]:
        """The lossless check's greedy outputs (harness.measure.lossless): its own step, in no
        measured window; nothing when benchmark.lossless_check is 0."""
        prompts = self.prompts[: self.spec.lossless_check]
        if not prompts:
            return []
        return self._step(collect(self._client, prompts, self.spec.lossless_max_tokens))  # type: ignore[arg-type]

    def result(self) -> BenchmarkResult:
        curve = accept_by_position(self.timelines) if self.speculative else []
        hists = step_histograms(self.timelines, self.steps) if self.steps else []
        return BenchmarkResult(
            self.records, self.run_summaries, self.metrics(), self.stopped_early, curve, hists
        )

    def metrics(self) -> dict[str, float]:
        return aggregate_metrics(self.run_summaries, self.spec.objective_concurrency)

    # -- running a step beside the watchdog ----------------------------------------------------
    def _step(self, step: Coroutine[Any, Any, T]) -> T:
        if self._runner is None:
            step.close()
            raise RuntimeError("use the Benchmark as a context manager (with Benchmark(...))")
        return self._runner.run(watched(step, watch_server(self.check_server)))

    # -- the steps inside the event loop -------------------------------------------------------
    async def _flush(self) -> tuple[bool, int]:
        assert self._client is not None
        return await flush_when_idle(self._client)

    async def _measure(self, run: Run) -> RunSummary:
        assert self._client is not None
        window = await open_window(self._client, self._flushed, speculative=self.speculative)
        steady = run.concurrency > 1
        if steady:
            timelines = await self._sender.steady(self._client, run)
            span = steady_window(timelines, run.concurrency, self.spec.window_at(run.concurrency))
        else:
            count = self.spec.requests_at(run.concurrency)
            timelines = await self._sender.wave(
                self._client, "measure", run.number, run.concurrency, count
            )
            close_client_gaps(timelines, self.clock.scale)  # one after another: the gaps are ours
            starts = [t.record.start_s for t in timelines]
            ends = [t.record.end_s for t in timelines if t.record.end_s is not None]
            span = (min(starts), max(ends) if ends else min(starts))
        failed = [t.record.error for t in timelines if not is_cut(t.record.error)]
        if any(e not in (None, deadline_error(self.spec)) for e in failed):
            await settle(self.check_server)
        accept, source = None, None
        if self.speculative:
            accept, source = await window_accept_length(
                self._client, window, timelines, self.server_log
            )
        summary = summarize_run(
            run.number, run.concurrency, timelines, span or (0.0, 0.0), accept, source, steady
        )
        # A request that missed its deadline held a slot the whole time, one the server aborted
        # mid-stream gave its slot up early: either way the run's rates are not this
        # configuration's. Kept and flagged, replaced (up to max_runs), left out of the means.
        summary.incomplete = any(e == deadline_error(self.spec) or is_aborted(e) for e in failed)
        return summary
