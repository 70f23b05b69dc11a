"""Benchmark client: streaming chat completions over async httpx, warm-up kept out, runs repeated.

Per run: flush the server's cache (so no run reuses another's prefixes and the server's speculative
counters cover only this run), send the run's requests at each concurrency level, then read the
accept length for the same window. Every time is converted to the server's clock through
`ServerClock`; records survive a failure halfway (they are kept on the instance).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from harness.clock import ServerClock
from harness.errors import BenchmarkError, ConfigError
from harness.prompts import Prompt, load_prompts
from harness.results import RequestRecord, RunSummary
from harness.stats import summarize

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BenchmarkSpec:
    model: str  # the "model" field of each request
    prompts: str = "builtin"
    max_tokens: int = 2048
    warmup: int = 2
    runs: int = 5
    concurrency: tuple[int, ...] = (1,)
    requests_per_run: int = 3  # per concurrency level: max(requests_per_run, concurrency)
    temperature: float = 0.0
    ignore_eos: bool = False
    thinking: bool = True  # chat template reasoning mode (Kimi/Qwen "thinking")
    request_timeout_s: float = 900.0  # wall seconds per request
    seed: int = 0

    def __post_init__(self) -> None:
        checks = [
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
            (0.0 <= self.temperature <= 2.0, f"benchmark.temperature={self.temperature}: 0..2"),
            (self.request_timeout_s > 0, "benchmark.request_timeout_s must be > 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(f"{message} (out of range).")

    @property
    def objective_concurrency(self) -> int:
        """Single-stream if measured, else the first level."""
        return 1 if 1 in self.concurrency else self.concurrency[0]

    def requests_at(self, concurrency: int) -> int:
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
        check_server: Callable[[], None] | None = None,
        early_stop: EarlyStop | None = None,
    ):
        self.base_url = base_url
        self.spec = spec
        self.clock = clock
        self.speculative = speculative
        self.on_run = on_run or (lambda _summary: None)
        self.check_server = check_server or (lambda: None)
        self.early_stop = early_stop
        self.stopped_early = False
        self.prompts = load_prompts(spec.prompts, spec.seed)
        self.records: list[RequestRecord] = []  # kept even when a run fails halfway
        self.run_summaries: list[RunSummary] = []

    def run(self) -> BenchmarkResult:
        return asyncio.run(self._run())

    async def _run(self) -> BenchmarkResult:
        limits = httpx.Limits(max_connections=max(self.spec.concurrency) + 4)
        timeout = httpx.Timeout(self.spec.request_timeout_s, connect=30.0)
        async with httpx.AsyncClient(base_url=self.base_url, limits=limits, timeout=timeout) as c:
            if self.spec.warmup:
                await self._requests(c, "warmup", 0, self.spec.concurrency[0], self.spec.warmup)
            for concurrency in self.spec.concurrency:
                for run in range(1, self.spec.runs + 1):
                    flushed = await self._flush(c)
                    n = self.spec.requests_at(concurrency)
                    window_start = ServerClock.now()
                    records = await self._requests(c, "measure", run, concurrency, n)
                    window_s = self.clock.seconds(ServerClock.now() - window_start)
                    accept_len, source = await self._accept_length(c, flushed)
                    summary = summarize_run(run, concurrency, records, window_s, accept_len, source)
                    self.run_summaries.append(summary)
                    self.on_run(summary)
                    more_to_come = run < self.spec.runs or concurrency != self.spec.concurrency[-1]
                    if (
                        more_to_come
                        and self.early_stop
                        and self.early_stop.should_stop(self.run_summaries)
                    ):
                        self.stopped_early = True
                        return self._result()
        return self._result()

    def _result(self) -> BenchmarkResult:
        return BenchmarkResult(self.records, self.run_summaries, self.metrics(), self.stopped_early)

    async def _flush(self, client: httpx.AsyncClient) -> bool:
        try:
            return (await client.post("/flush_cache")).status_code == 200
        except httpx.HTTPError as exc:
            log.warning("flush_cache failed: %s", exc)
            return False

    async def _accept_length(
        self, client: httpx.AsyncClient, flushed: bool
    ) -> tuple[float | None, str | None]:
        """Accept length for the run's window: the server's counters, reset by the flush."""
        if not self.speculative:
            return None, None
        try:
            response = await client.get("/server_info")
            if response.status_code == 404:
                response = await client.get("/get_server_info")
            info = response.json()
        except (httpx.HTTPError, json.JSONDecodeError) as exc:
            log.warning("could not read accept length: %s", exc)
            return None, None
        states = info.get("internal_states") or [{}]
        value = states[0].get("avg_spec_accept_length")
        if value is None:
            return None, None
        # Without a successful flush the counters span the server's lifetime, not this run.
        return float(value), "server_info" if flushed else "server_info_lifetime"

    async def _requests(
        self, client: httpx.AsyncClient, phase: str, run: int, concurrency: int, count: int
    ) -> list[RequestRecord]:
        semaphore = asyncio.Semaphore(concurrency)
        t0 = ServerClock.now()

        async def one(i: int) -> RequestRecord:
            prompt = self.prompts[i % len(self.prompts)]
            async with semaphore:
                record = await self._request(client, prompt, phase, run, concurrency, t0)
            self.records.append(record)
            if record.error is not None:
                self.check_server()  # a dead server raises ServerOOM/ServerCrashed here
            return record

        return list(await asyncio.gather(*(one(i) for i in range(count))))

    def _body(self, prompt: Prompt) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.spec.model,
            "messages": list(prompt.messages),
            "max_tokens": self.spec.max_tokens,
            "temperature": self.spec.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
            "chat_template_kwargs": {"thinking": self.spec.thinking},
        }
        if self.spec.ignore_eos:
            body["ignore_eos"] = True
        return body

    async def _request(
        self,
        client: httpx.AsyncClient,
        prompt: Prompt,
        phase: str,
        run: int,
        concurrency: int,
        t0: float,
    ) -> RequestRecord:
        start = ServerClock.now()
        first: float | None = None
        usage: dict[str, Any] = {}
        finish: str | None = None
        error: str | None = None
        try:
            async with asyncio.timeout(self.spec.request_timeout_s):
                async with client.stream(
                    "POST", "/v1/chat/completions", json=self._body(prompt)
                ) as response:
                    if response.status_code != 200:
                        text = (await response.aread()).decode(errors="replace")[:300]
                        raise BenchmarkError(f"HTTP {response.status_code}: {text}")
                    async for line in response.aiter_lines():
                        if not line.startswith("data:"):
                            continue
                        data = line[5:].strip()
                        if data == "[DONE]":
                            break
                        chunk = json.loads(data)
                        if chunk.get("usage"):
                            usage = chunk["usage"]
                        for choice in chunk.get("choices") or []:
                            delta = choice.get("delta") or {}
                            if first is None and (
                                delta.get("content") or delta.get("reasoning_content")
                            ):
                                first = ServerClock.now()
                            finish = choice.get("finish_reason") or finish
            if not usage:
                raise BenchmarkError("the stream carried no usage; cannot count tokens")
        except TimeoutError:
            error = f"no complete response within {self.spec.request_timeout_s:.0f} s (wall)"
        except (httpx.HTTPError, BenchmarkError, json.JSONDecodeError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        end = ServerClock.now() if error is None else None
        details = usage.get("completion_tokens_details") or {}
        return RequestRecord(
            phase=phase,
            run=run,
            concurrency=concurrency,
            prompt_id=prompt.id,
            start_s=self.clock.seconds(start - t0),
            first_token_s=None if first is None else self.clock.seconds(first - t0),
            end_s=None if end is None else self.clock.seconds(end - t0),
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            reasoning_tokens=usage.get("reasoning_tokens") or details.get("reasoning_tokens"),
            finish_reason=finish,
            error=error,
        )

    def metrics(self) -> dict[str, float]:
        return aggregate_metrics(self.run_summaries, self.spec.objective_concurrency)


def summarize_run(
    run: int,
    concurrency: int,
    records: list[RequestRecord],
    window_s: float,
    accept_len: float | None,
    accept_source: str | None,
) -> RunSummary:
    ok = [r for r in records if r.ok]
    tokens = sum(r.completion_tokens or 0 for r in ok)
    decode = [(r.completion_tokens - 1, r.decode_seconds()) for r in ok]  # type: ignore[operator]
    decode = [(t, s) for t, s in decode if s and s > 0 and t > 0]
    e2e = [(r.completion_tokens, r.end_s - r.start_s) for r in ok]  # type: ignore[operator]
    ttfts = [r.first_token_s - r.start_s for r in ok if r.first_token_s is not None]
    return RunSummary(
        run=run,
        concurrency=concurrency,
        requests=len(records),
        errors=len(records) - len(ok),
        output_tokens=tokens,
        # Token-weighted: total decode tokens over total decode time, as a user's stopwatch would.
        decode_tok_s=sum(t for t, _ in decode) / sum(s for _, s in decode) if decode else None,
        e2e_tok_s=sum(t for t, _ in e2e) / sum(s for _, s in e2e) if e2e else None,
        # Every request of the run starts inside the window, so all its tokens belong to it.
        output_tok_s=tokens / window_s if ok and window_s > 0 else None,
        ttft_s=sum(ttfts) / len(ttfts) if ttfts else None,
        accept_len=accept_len,
        accept_len_source=accept_source,
        truncated=sum(1 for r in ok if r.finish_reason == "length"),
    )


def aggregate_metrics(runs: list[RunSummary], objective_concurrency: int) -> dict[str, float]:
    """Flat metric dict: objective-level names (`tok_s`, ...) plus one set per level."""
    metrics: dict[str, float] = {}
    for concurrency in sorted({r.concurrency for r in runs}):
        level = [r for r in runs if r.concurrency == concurrency]
        suffix = f"_c{concurrency}"
        for name in ("decode_tok_s", "e2e_tok_s", "output_tok_s", "accept_len"):
            values = [getattr(r, name) for r in level if getattr(r, name) is not None]
            if values:
                stat = summarize(values)
                metrics[name + suffix] = stat.mean
                if name in ("decode_tok_s", "output_tok_s") and math.isfinite(stat.ci95):
                    metrics[name + suffix + "_ci95"] = stat.ci95
        requests = sum(r.requests for r in level)
        ok = requests - sum(r.errors for r in level)
        metrics["error_rate" + suffix] = (requests - ok) / requests if requests else 0.0
        metrics["truncation_rate" + suffix] = sum(r.truncated for r in level) / ok if ok else 0.0
        ttfts = [r.ttft_s for r in level if r.ttft_s is not None]
        if ttfts:
            metrics["ttft_ms" + suffix] = 1000 * sum(ttfts) / len(ttfts)

    level = [r for r in runs if r.concurrency == objective_concurrency]
    values = [r.decode_tok_s for r in level if r.decode_tok_s is not None]
    if values:
        stat = summarize(values)
        metrics["tok_s"] = stat.mean
        metrics["tok_s_runs"] = float(stat.n)
        if stat.n > 1:
            metrics["tok_s_ci95"] = stat.ci95
            metrics["tok_s_std"] = stat.std
            metrics["tok_s_cv"] = stat.cv
    suffix = f"_c{objective_concurrency}"
    for key, target in (("accept_len", "accept_len"), ("e2e_tok_s", "e2e_tok_s")):
        if key + suffix in metrics:
            metrics[target] = metrics[key + suffix]
    return metrics
