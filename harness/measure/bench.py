"""The benchmark's steps against a ready server: warm up, then per scheduled run flush + measure.

Warm-up requests are recorded but never measured. Each measured run is preceded by a flush of
the server's cache, so no run reuses another's prefixes and the server's speculative counters
cover only that run; its accept length comes from the same window (`harness.measure.acceptance`). A
run at concurrency 1 is `requests_at(1)` requests one after another; above 1 it is steady state
(`harness.measure.steady`): C in flight until the window holds `window_at(C)` completions. The
schedule (`harness.measure.schedule`) decides one run at a time from what was measured so far:
repeats, replaced incomplete runs, adaptive runs, an early stop.

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
from harness.measure.client import deadline_error, is_aborted, stream_request
from harness.measure.client_cpu import CpuMeter
from harness.measure.clock import ServerClock, close_client_gaps, restamp
from harness.measure.flush import flush_when_idle
from harness.measure.http_stream import StreamClient, event_loop_factory
from harness.measure.lossless import LosslessOutput, collect
from harness.measure.metrics import aggregate_metrics, summarize_run
from harness.measure.prompt_plan import PromptPlan
from harness.measure.rounds import Users
from harness.measure.schedule import Run, Schedule
from harness.measure.steady import is_cut, keep_in_flight, steady_window
from harness.measure.timeline import Timeline
from harness.measure.watchdog import settle, watch_server, watched
from harness.record.results import RequestRecord, RunSummary
from harness.spec import BenchmarkSpec, EarlyStop
from harness.workload import Prompt, load_prompts

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
    ):
        self.base_url = base_url
        self.spec = spec
        self.clock = clock
        self.speculative = speculative
        self.on_request = on_request or (lambda _record, _done, _total, _tokens: None)
        self.check_server = check_server or (lambda: None)
        self.server_log = server_log
        self.headers = headers or {}  # Authorization when the server has an --api-key
        self.prompts = load_prompts(spec.prompts, spec.seed, spec.categories)
        self.prompt_plan = PromptPlan(self.prompts, spec)  # warm-up apart, runs disjoint, paired
        self.records: list[RequestRecord] = []  # kept even when a run fails halfway
        self.timelines: list[Timeline] = []  # measured requests' chunk arrivals
        self.run_summaries: list[RunSummary] = []
        self._schedule = Schedule(spec, self.run_summaries, early_stop)  # reads the summaries
        self._origin = ServerClock.now()  # every time is relative to the benchmark's start
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
            self._step(self._requests("warmup", 0, level, self.spec.warmup))

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
        return BenchmarkResult(
            self.records, self.run_summaries, self.metrics(), self.stopped_early, curve
        )

    def metrics(self) -> dict[str, float]:
        return aggregate_metrics(self.run_summaries, self.spec.objective_concurrency)

    # -- running a step beside the watchdog ----------------------------------------------------
    def _step(self, step: Coroutine[Any, Any, T]) -> T:
        if self._runner is None:
            step.close()
            raise RuntimeError("use the Benchmark as a context manager (with Benchmark(...))")
        return self._runner.run(watched(step, watch_server(self.check_server)))

    # -- the requests --------------------------------------------------------------------------
    def _prompt_source(self, phase: str, run: int, concurrency: int) -> Iterator[Prompt]:
        """The prompts of this phase/run in sending order, endless
        (harness.measure.prompt_plan)."""
        return self.prompt_plan.source(phase, run, concurrency)

    async def _flush(self) -> tuple[bool, int]:
        assert self._client is not None
        return await flush_when_idle(self._client)

    async def _measure(self, run: Run) -> RunSummary:
        assert self._client is not None
        window = await open_window(self._client, self._flushed, speculative=self.speculative)
        steady = run.concurrency > 1
        if steady:
            timelines = await self._steady(run)
            span = steady_window(timelines, run.concurrency, self.spec.window_at(run.concurrency))
        else:
            count = self.spec.requests_at(run.concurrency)
            timelines = await self._requests("measure", run.number, run.concurrency, count)
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

    async def _steady(self, run: Run) -> list[Timeline]:
        """C requests in flight until the steady-state window is complete
        (`harness.measure.steady`): C completions of ramp-up, then the window's; the requests still
        running are cut."""
        concurrency, target = run.concurrency, self.spec.window_at(run.concurrency)
        total, progress = concurrency + target, [0, 0]  # requests done, their tokens
        # benchmark.users conversations of benchmark.rounds rounds (harness.measure.rounds)
        spec, source = self.spec, self._prompt_source("measure", run.number, concurrency)
        users = Users(source, spec.rounds, max(spec.users, concurrency))

        async def send(on_start: Callable[[Timeline], None]) -> Timeline:
            prompt = users.next()
            line = await self._send(prompt, "measure", run.number, concurrency, on_start)
            users.answered(prompt, line)
            progress[0] += 1
            progress[1] += line.record.completion_tokens or 0
            self.on_request(line.record, min(progress[0], total), total, progress[1])
            return line

        started, cut = await keep_in_flight(send, concurrency, total, max_failures=target)
        for line in cut:
            self._keep(line, "measure")
        return started

    def _server_time(self, wall: float) -> float:
        return self.clock.seconds(wall - self._origin)

    def _keep(self, timeline: Timeline, phase: str) -> None:
        if self.clock.simulated:  # the client's own share stays at wall rate
            restamp(timeline, self.clock.scale)
        self.records.append(timeline.record)
        if phase == "measure":
            self.timelines.append(timeline)

    async def _send(
        self,
        prompt: Prompt,
        phase: str,
        run: int,
        concurrency: int,
        on_start: Callable[[Timeline], None] | None = None,
    ) -> Timeline:
        """One request, kept in the records (measured ones in the timelines too)."""
        assert self._client is not None
        timeline = await stream_request(
            self._client,
            self.spec,
            prompt,
            phase=phase,
            run=run,
            concurrency=concurrency,
            speculative=self.speculative,
            server_time=self._server_time,
            on_start=on_start,
        )
        self._keep(timeline, phase)
        if timeline.record.error is not None:
            self.check_server()  # a dead server raises ServerOOM/ServerCrashed here
        return timeline

    async def _requests(self, phase: str, run: int, concurrency: int, count: int) -> list[Timeline]:
        """One wave of `count` requests, `concurrency` at a time (warm-up, and every run at
        concurrency 1)."""
        semaphore = asyncio.Semaphore(concurrency)
        done = 0
        tokens = 0
        source = self._prompt_source(phase, run, concurrency)
        prompts = [next(source) for _ in range(count)]

        async def one(prompt: Prompt) -> Timeline:
            nonlocal done, tokens
            async with semaphore:
                timeline = await self._send(prompt, phase, run, concurrency)
            done += 1
            tokens += timeline.record.completion_tokens or 0
            if phase == "measure":
                self.on_request(timeline.record, done, count, tokens)
            return timeline

        return list(await asyncio.gather(*(one(p) for p in prompts)))
