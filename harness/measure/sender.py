"""Sending a benchmark's requests, and keeping what each one recorded.

Every request goes through `harness.measure.client.stream_request`, its times on the server's
clock from the benchmark's start; a simulated server's timeline is then restamped
(`harness.measure.clock.restamp`), and the record kept: every phase's in `records`, the measured
requests' timelines in `timelines`, so they survive a failure halfway. A failed request has the
server checked at once. A phase's requests go out as one wave of `count`, `concurrency` at a time
(warm-up, and every run at concurrency 1), or as steady state (`harness.measure.steady`: C in
flight until the window is complete, the rest cut), whose slots are multi-round users
(`harness.measure.rounds`). `on_request` hears of each measured request as it ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import httpx

from harness.measure.client import stream_request
from harness.measure.clock import ServerClock, restamp
from harness.measure.prompt_plan import PromptPlan
from harness.measure.rounds import Users
from harness.measure.schedule import Run
from harness.measure.steady import keep_in_flight
from harness.measure.timeline import Timeline
from harness.record.results import RequestRecord
from harness.spec import BenchmarkSpec
from harness.workload import Prompt


class Sender:
    """A benchmark's requests, sent through the client each call is given."""

    def __init__(
        self,
        spec: BenchmarkSpec,
        clock: ServerClock,
        prompt_plan: PromptPlan,
        *,
        speculative: bool,
        on_request: Callable[[RequestRecord, int, int, int], None],
        check_server: Callable[[], None],
    ):
        self.spec = spec
        self.clock = clock
        self.prompt_plan = prompt_plan
        self.speculative = speculative
        self.on_request = on_request
        self.check_server = check_server
        self.records: list[RequestRecord] = []  # kept even when a run fails halfway
        self.timelines: list[Timeline] = []  # measured requests' chunk arrivals
        self._origin = ServerClock.now()  # every time is relative to the benchmark's start

    def _prompt_source(self, phase: str, run: int, concurrency: int) -> Iterator[Prompt]:
        """The prompts of this phase/run in sending order, endless
        (harness.measure.prompt_plan)."""
        return self.prompt_plan.source(phase, run, concurrency)

    async def steady(self, client: httpx.AsyncClient, run: Run) -> list[Timeline]:
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
            line = await self.send(client, prompt, "measure", run.number, concurrency, on_start)
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

    async def send(
        self,
        client: httpx.AsyncClient,
        prompt: Prompt,
        phase: str,
        run: int,
        concurrency: int,
        on_start: Callable[[Timeline], None] | None = None,
    ) -> Timeline:
        """One request, kept in the records (measured ones in the timelines too)."""
        timeline = await stream_request(
            client,
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

    async def wave(
        self, client: httpx.AsyncClient, phase: str, run: int, concurrency: int, count: int
    ) -> list[Timeline]:
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
                timeline = await self.send(client, prompt, phase, run, concurrency)
            done += 1
            tokens += timeline.record.completion_tokens or 0
            if phase == "measure":
                self.on_request(timeline.record, done, count, tokens)
            return timeline

        return list(await asyncio.gather(*(one(p) for p in prompts)))
