"""Benchmark client: streaming requests over async httpx, warm-up kept out, runs repeated.

Per run: flush the server's cache (no run reuses another's prefixes, and the server's speculative
counters cover only this run), send the run's requests at the level's concurrency, then take the
accept length for the same window from the best source the server offers: per-request meta
(`/generate` meta_info, chat `sglext.spec_tokens_details`), else `/metrics` counter deltas, else
the decode log lines inside the window, else `/server_info`. Every time is converted to the
server's clock through `ServerClock`; records survive a failure halfway (kept on the instance).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from harness.clock import ServerClock
from harness.errors import BenchmarkError, ConfigError
from harness.logs import parse_decode_line
from harness.metrics import (
    Timeline,
    accept_from_counters,
    accept_from_requests,
    aggregate_metrics,
    prometheus_values,
    summarize_run,
)
from harness.prompts import Prompt, load_prompts
from harness.results import RequestRecord, RunSummary
from harness.sglang import SERVER_INFO_PATHS
from harness.stats import summarize

log = logging.getLogger(__name__)
APIS = ("chat", "generate")
WATCH_INTERVAL_S = 0.2  # how often the server's process and log are checked during a benchmark


@dataclass(frozen=True)
class BenchmarkSpec:
    model: str  # the "model" field of each request
    prompts: str = "builtin"
    api: str = "chat"  # chat: /v1/chat/completions; generate: SGLang's native /generate
    max_tokens: int = 2048
    warmup: int = 2
    runs: int = 5
    concurrency: tuple[int, ...] = (1,)
    requests_per_run: int = 3  # per level: max(requests_per_run, concurrency), unless...
    requests_per_level: tuple[int, ...] = ()  # ...given per level, aligned with concurrency
    temperature: float = 0.0
    ignore_eos: bool = False
    thinking: bool = True  # chat template reasoning mode (Kimi/Qwen "thinking")
    # Per-request deadline, wall seconds. None: derived from max_tokens at min_request_tok_s,
    # a rate far below any working server, so only a stalled request misses it.
    request_timeout_s: float | None = None
    min_request_tok_s: float = 5.0
    seed: int = 0
    adaptive: bool = False  # add runs until the 95% interval is within target_ci_pct
    target_ci_pct: float = 2.0
    max_runs: int = 20

    def __post_init__(self) -> None:
        checks = [
            (self.api in APIS, f"benchmark.api={self.api!r}: use one of {', '.join(APIS)}"),
            (1 <= self.max_tokens <= 262144, f"benchmark.max_tokens={self.max_tokens}: 1..262144"),
            (0 <= self.warmup <= 1000, f"benchmark.warmup={self.warmup}: 0..1000"),
            (1 <= self.runs <= 1000, f"benchmark.runs={self.runs}: 1..1000"),
            (bool(self.concurrency), "benchmark.concurrency is empty: give e.g. [1]"),
            (
                all(1 <= c <= 4096 for c in self.concurrency),
                f"benchmark.concurrency={list(self.concurrency)}: each level 1..4096",
            ),
            (
                1 <= self.requests_per_run <= 100000,
                f"benchmark.requests_per_run={self.requests_per_run}: 1..100000",
            ),
            (
                not self.requests_per_level
                or (
                    len(self.requests_per_level) == len(self.concurrency)
                    and all(n >= 1 for n in self.requests_per_level)
                ),
                f"benchmark.requests_per_level={list(self.requests_per_level)}: one count >= 1 per "
                f"concurrency level {list(self.concurrency)}",
            ),
            (0.0 <= self.temperature <= 2.0, f"benchmark.temperature={self.temperature}: 0..2"),
            (
                self.request_timeout_s is None or self.request_timeout_s > 0,
                f"benchmark.request_timeout_s={self.request_timeout_s}: must be > 0 (or null to "
                "derive it from max_tokens)",
            ),
            (
                self.min_request_tok_s > 0,
                f"benchmark.min_request_tok_s={self.min_request_tok_s}: must be > 0",
            ),
            (0 < self.target_ci_pct <= 100, "benchmark.target_ci_pct must be in (0, 100]"),
            (self.max_runs >= self.runs, "benchmark.max_runs must be >= benchmark.runs"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(f"{message} (out of range).")

    @property
    def request_deadline_s(self) -> float:
        """Wall seconds a request may take: 60 s for queueing and prefill, then max_tokens at
        min_request_tok_s (2048 tokens: 470 s)."""
        if self.request_timeout_s is not None:
            return self.request_timeout_s
        return 60.0 + self.max_tokens / self.min_request_tok_s

    @property
    def objective_concurrency(self) -> int:
        """Single-stream if measured, else the first level."""
        return 1 if 1 in self.concurrency else self.concurrency[0]

    def requests_at(self, concurrency: int) -> int:
        if self.requests_per_level:
            return self.requests_per_level[self.concurrency.index(concurrency)]
        return max(self.requests_per_run, concurrency)


@dataclass(frozen=True)
class EarlyStop:
    """Stop once this configuration's 95% upper bound is below `below` (the best trial's lower
    bound): more runs could not make it the best, only cost GPU time."""

    below: float
    concurrency: int
    metric: str = "decode_tok_s"  # a RunSummary field: decode_tok_s or output_tok_s
    min_runs: int = 2

    def should_stop(self, runs: list[RunSummary]) -> bool:
        values = [
            getattr(r, self.metric)
            for r in runs
            if r.concurrency == self.concurrency and getattr(r, self.metric) is not None
        ]
        if len(values) < self.min_runs:
            return False
        stat = summarize(values)
        return stat.mean + stat.ci95 < self.below


@dataclass
class BenchmarkResult:
    records: list[RequestRecord]
    runs: list[RunSummary]
    metrics: dict[str, float]
    stopped_early: bool = False


class Benchmark:
    def __init__(
        self,
        base_url: str,
        spec: BenchmarkSpec,
        clock: ServerClock,
        *,
        speculative: bool,
        on_run: Callable[[RunSummary], None] | None = None,
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
        self.on_run = on_run or (lambda _summary: None)
        self.on_request = on_request or (lambda _record, _done, _total, _tokens: None)
        self.check_server = check_server or (lambda: None)
        self.early_stop = early_stop
        self.server_log = server_log
        self.headers = headers or {}  # Authorization when the server has an --api-key
        self.stopped_early = False
        self.prompts = load_prompts(spec.prompts, spec.seed)
        self.records: list[RequestRecord] = []  # kept even when a run fails halfway
        self.timelines: list[Timeline] = []  # measured requests' chunk arrivals
        self.run_summaries: list[RunSummary] = []
        self._origin = ServerClock.now()  # every time is relative to the benchmark's start

    def run(self) -> BenchmarkResult:
        return asyncio.run(self._watched())

    async def _watched(self) -> BenchmarkResult:
        """The benchmark beside a watchdog that checks the server every WATCH_INTERVAL_S: a server
        that dies mid-run ends the benchmark at once, not when its requests time out."""
        bench = asyncio.create_task(self._run())
        watch = asyncio.create_task(self._watch())
        await asyncio.wait({bench, watch}, return_when=asyncio.FIRST_COMPLETED)
        if not bench.done():
            bench.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await bench
            watch.result()  # raises the server's failure (ServerOOM, ServerCrashed)
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
        return bench.result()

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(WATCH_INTERVAL_S)
            self.check_server()

    def _server_time(self, wall: float) -> float:
        return self.clock.seconds(wall - self._origin)

    async def _run(self) -> BenchmarkResult:
        limits = httpx.Limits(max_connections=max(self.spec.concurrency) + 4)
        timeout = httpx.Timeout(self.spec.request_deadline_s, connect=30.0)
        async with httpx.AsyncClient(
            base_url=self.base_url, limits=limits, timeout=timeout, headers=self.headers
        ) as c:
            if self.spec.warmup:
                await self._requests(c, "warmup", 0, self.spec.concurrency[0], self.spec.warmup)
            for index, concurrency in enumerate(self.spec.concurrency):
                last_level = index == len(self.spec.concurrency) - 1
                run = 0
                while self._wants_another_run(run, concurrency):
                    run += 1
                    summary = await self._measured_run(c, run, concurrency)
                    self.run_summaries.append(summary)
                    self.on_run(summary)
                    more = not last_level or self._wants_another_run(run, concurrency)
                    complete = [r for r in self.run_summaries if not r.incomplete]
                    if more and self.early_stop and self.early_stop.should_stop(complete):
                        self.stopped_early = True
                        return self._result()
        return self._result()

    def metrics(self) -> dict[str, float]:
        return aggregate_metrics(self.run_summaries, self.spec.objective_concurrency)

    def _result(self) -> BenchmarkResult:
        return BenchmarkResult(self.records, self.run_summaries, self.metrics(), self.stopped_early)

    def _wants_another_run(self, started: int, concurrency: int) -> bool:
        """Until `runs` complete runs (an incomplete one is replaced, up to max_runs in all)."""
        level = [r for r in self.run_summaries if r.concurrency == concurrency]
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

    async def _measured_run(
        self, client: httpx.AsyncClient, run: int, concurrency: int
    ) -> RunSummary:
        flushed = await self._flush(client)
        counters_before = await self._counters(client)
        wall_start = datetime.now()
        timelines = await self._requests(
            client, "measure", run, concurrency, self.spec.requests_at(concurrency)
        )
        starts = [t.record.start_s for t in timelines]
        ends = [t.record.end_s for t in timelines if t.record.end_s is not None]
        window = (min(starts), max(ends) if ends else min(starts))
        accept, source = await self._accept_length(
            client, timelines, counters_before, wall_start, flushed
        )
        summary = summarize_run(run, concurrency, timelines, window, accept, source)
        # A request that missed its deadline held a slot the whole time: the run's rates are
        # not this configuration's. Kept and flagged, left out of the trial's means.
        summary.incomplete = any(t.record.error == self._deadline_error for t in timelines)
        return summary

    async def _flush(self, client: httpx.AsyncClient) -> bool:
        try:
            return (await client.post("/flush_cache")).status_code == 200
        except httpx.HTTPError as exc:
            log.warning("flush_cache failed: %s", exc)
            return False

    async def _counters(self, client: httpx.AsyncClient) -> dict[str, float]:
        if not self.speculative:
            return {}
        try:
            response = await client.get("/metrics")
        except httpx.HTTPError:
            return {}
        return prometheus_values(response.text) if response.status_code == 200 else {}

    async def _accept_length(
        self, client, timelines, before: dict[str, float], wall_start: datetime, flushed: bool
    ) -> tuple[float | None, str | None]:
        """The run's accept length from the best source available, and which one it was."""
        if not self.speculative:
            return None, None
        value = accept_from_requests([t.record for t in timelines])
        if value is not None:
            return value, "request_meta"
        requests = sum(1 for t in timelines if t.record.ok)
        if before:
            value = accept_from_counters(before, await self._counters(client), requests)
            if value is not None:
                return value, "metrics"
        value = self._accept_from_log(wall_start)
        if value is not None:
            return value, "log"
        return await self._accept_from_server_info(client, flushed)

    def _accept_from_log(self, since: datetime) -> float | None:
        if self.server_log is None or not self.server_log.is_file():
            return None
        values = []
        for line in self.server_log.read_text(errors="replace").splitlines():
            stats = parse_decode_line(line)
            if stats and stats.accept_len is not None and stats.timestamp:
                stamp = datetime.fromisoformat(stats.timestamp)
                if stamp >= since.replace(microsecond=0):
                    values.append(stats.accept_len)
        return sum(values) / len(values) if values else None

    async def _accept_from_server_info(
        self, client, flushed: bool
    ) -> tuple[float | None, str | None]:
        try:
            for path in SERVER_INFO_PATHS:  # the current path first, then the 0.5.1 one
                response = await client.get(path)
                if response.status_code != 404:
                    break
            info = response.json()
        except (httpx.HTTPError, json.JSONDecodeError) as exc:
            log.warning("could not read accept length: %s", exc)
            return None, None
        value = (info.get("internal_states") or [{}])[0].get("avg_spec_accept_length")
        if value is None:
            return None, None
        # Without a successful flush the counters span the server's lifetime, not this run.
        return float(value), "server_info" if flushed else "server_info_lifetime"

    async def _requests(
        self, client: httpx.AsyncClient, phase: str, run: int, concurrency: int, count: int
    ) -> list[Timeline]:
        semaphore = asyncio.Semaphore(concurrency)
        done = 0
        tokens = 0

        async def one(i: int) -> Timeline:
            nonlocal done, tokens
            prompt = self.prompts[i % len(self.prompts)]
            async with semaphore:
                timeline = await self._request(client, prompt, phase, run, concurrency)
            self.records.append(timeline.record)
            if phase == "measure":
                self.timelines.append(timeline)
            done += 1
            tokens += timeline.record.completion_tokens or 0
            if phase == "measure":
                self.on_request(timeline.record, done, count, tokens)
            if timeline.record.error is not None:
                self.check_server()  # a dead server raises ServerOOM/ServerCrashed here
            return timeline

        return list(await asyncio.gather(*(one(i) for i in range(count))))

    @property
    def _deadline_error(self) -> str:
        return f"no complete response within {self.spec.request_deadline_s:.0f} s (wall): stalled"

    def _body(self, prompt: Prompt) -> tuple[str, dict[str, Any]]:
        if self.spec.api == "generate":
            text = "\n".join(m["content"] for m in prompt.messages)
            params: dict[str, Any] = {
                "max_new_tokens": self.spec.max_tokens,
                "temperature": self.spec.temperature,
            }
            if self.spec.ignore_eos:
                params["ignore_eos"] = True
            return "/generate", {"text": text, "sampling_params": params, "stream": True}
        body: dict[str, Any] = {
            "model": self.spec.model,
            "messages": list(prompt.messages),
            "max_tokens": self.spec.max_tokens,
            "temperature": self.spec.temperature,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "chat_template_kwargs": {"thinking": self.spec.thinking},
        }
        if self.speculative:
            body["return_spec_tokens_details"] = True  # current SGLang: per-request accept length
        if self.spec.ignore_eos:
            body["ignore_eos"] = True
        return "/v1/chat/completions", body

    async def _request(
        self, client: httpx.AsyncClient, prompt: Prompt, phase: str, run: int, concurrency: int
    ) -> Timeline:
        path, body = self._body(prompt)
        record = RequestRecord(phase, run, concurrency, prompt.id, 0.0, None, None)
        timeline = Timeline(record)
        start = ServerClock.now()
        record.start_s = self._server_time(start)
        state = _StreamState(self.spec.api)
        try:
            async with asyncio.timeout(self.spec.request_deadline_s):
                async with client.stream("POST", path, json=body) as response:
                    if response.status_code != 200:
                        text = (await response.aread()).decode(errors="replace")[:300]
                        raise BenchmarkError(f"HTTP {response.status_code}: {text}")
                    async for line in response.aiter_lines():
                        if not line.startswith("data:"):
                            continue
                        data = line[5:].strip()
                        if data == "[DONE]":
                            break
                        if state.add(json.loads(data)):
                            timeline.points.append(
                                (self._server_time(ServerClock.now()), state.tokens)
                            )
            state.complete(record)
        except TimeoutError:
            record.error = self._deadline_error
        except (httpx.HTTPError, BenchmarkError, json.JSONDecodeError) as exc:
            record.error = f"{type(exc).__name__}: {exc}"
        if record.error is None:
            record.end_s = self._server_time(ServerClock.now())
            timeline.points = state.rescale(timeline.points)
            record.first_token_s = timeline.points[0][0] if timeline.points else None
        return timeline


class _StreamState:
    """What one stream said so far, for chat chunks and /generate chunks alike."""

    def __init__(self, api: str):
        self.api = api
        self.tokens = 0  # cumulative, exact when the server reports it, else chunks so far
        self.exact = False
        self.chunks = 0
        self.usage: dict[str, Any] = {}
        self.meta: dict[str, Any] = {}
        self.finish_reason: str | None = None
        self.answered = False  # content after the reasoning arrived

    def add(self, chunk: dict[str, Any]) -> bool:
        """Record a chunk; True if it carried new tokens."""
        if self.api == "generate":
            self.meta = chunk.get("meta_info") or {}
            reported = int(self.meta.get("completion_tokens") or 0)
            reason = self.meta.get("finish_reason")
            if isinstance(reason, dict):
                self.finish_reason = reason.get("type")
            self.exact = True
            new = reported > self.tokens
            self.tokens = max(self.tokens, reported)
            self.chunks += int(new)
            return new
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        if chunk.get("sglext"):
            self.meta = (chunk["sglext"] or {}).get("spec_tokens_details") or {}
        new = False
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.answered = True
            if delta.get("content") or delta.get("reasoning_content"):
                new = True
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
        if new:
            self.chunks += 1
            if chunk.get("usage"):  # continuous usage: exact cumulative count per chunk
                self.exact = True
                self.tokens = int(chunk["usage"].get("completion_tokens") or self.tokens + 1)
            else:
                self.tokens += 1  # rescaled to the true total at the end
        return new

    def complete(self, record: RequestRecord) -> None:
        """Fill the record from the final usage / meta_info; raise if tokens cannot be counted."""
        source = self.meta if self.api == "generate" else self.usage
        if not source:
            raise BenchmarkError("the stream carried no usage; cannot count tokens")
        details = source.get("completion_tokens_details") or {}
        record.prompt_tokens = source.get("prompt_tokens")
        record.completion_tokens = source.get("completion_tokens")
        record.reasoning_tokens = source.get("reasoning_tokens") or details.get("reasoning_tokens")
        record.finish_reason = self.finish_reason
        record.chunks = self.chunks
        if self.api == "chat":
            record.reasoning_ended = self.answered
        elif record.reasoning_tokens is not None and record.completion_tokens:
            record.reasoning_ended = record.reasoning_tokens < record.completion_tokens
        verify = self.meta.get("spec_verify_ct")
        if verify:
            record.verify_ct = int(verify)
            record.accepted_tokens = self.meta.get("spec_num_correct_drafts")

    def rescale(self, points: list[tuple[float, int]]) -> list[tuple[float, int]]:
        """Without per-chunk counts, spread the reported total evenly over the chunks."""
        total = int(
            (self.meta if self.api == "generate" else self.usage).get("completion_tokens") or 0
        )
        if self.exact or not points or not total:
            return points
        return [(t, math.ceil(total * n / self.chunks)) for t, n in points]
