"""A run window's memory, from what SGLang printed inside the window and the /metrics it serves.

Per measured run (`MemoryProbe`, fields on `RunSummary`): the decode lines' mean `token usage`,
`#running-req` and `#queue-req`, the prefill lines' cache hit rate (sum `#cached-token` over sum
`#new-token` + `#cached-token`), the retraction lines' requests, and the mean length of the
window's completed requests (prompt + output). The lines are those the server printed inside the
run's window: the log's byte offset is noted when the run starts, at every completion and when
it ends, so a steady-state window (C > 1, from its C-th completion) maps to the lines printed
between its first and last completion, with no timestamp parsing. Without log lines (another log
format, a window shorter than --decode-log-interval), the hit rate and the retractions come from
`/metrics` counter deltas over the run instead (`MemoryProbe._from_counters` says what those
cover: the token counters hold only the requests finished between the reads). The trial's
memory and the KV-bound verdict over these fields are `harness.measure.memory`'s. Everything
here is SGLang's own text (harness.server.logs cites each line's source).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from harness.measure.prometheus import prometheus_values
from harness.record.results import RequestRecord, RunSummary
from harness.server.logs import parse_decode_line, parse_prefill_line, parse_retract_line
from harness.tls import tls_context

# /metrics names (0.5.23 observability/metrics_collector.py; 0.5.1 metrics/collector.py).
RETRACTED_COUNTERS = (
    "sglang:num_retracted_requests_total",  # 0.5.23 counter
    "sglang:total_retracted_reqs",  # 0.5.1 gauge of the running total
)
CACHED_TOKENS = "sglang:cached_tokens_total"  # per finished request, by cache source (both)
PROMPT_TOKENS = "sglang:prompt_tokens_total"


@dataclass(frozen=True)
class WindowMemory:
    """What the lines printed inside one run window say."""

    decode_lines: int = 0
    prefill_lines: int = 0
    token_usage_mean: float | None = None
    token_usage_max: float | None = None
    running_mean: float | None = None
    queue_mean: float | None = None
    cache_hit_rate: float | None = None
    retractions: int = 0


def window_memory(lines: Iterable[str]) -> WindowMemory:
    """The window's decode, prefill and retraction lines, summarised."""
    usage: list[float] = []
    running: list[int] = []
    queue: list[int] = []
    new = cached = prefills = retracted = 0
    for line in lines:
        if (decode := parse_decode_line(line)) is not None:
            usage.append(decode.token_usage)
            running.append(decode.running_req)
            queue.append(decode.queue_req)
        elif (prefill := parse_prefill_line(line)) is not None:
            prefills += 1
            new += prefill.new_tokens
            cached += prefill.cached_tokens
        elif (count := parse_retract_line(line)) is not None:
            retracted += count
    return WindowMemory(
        decode_lines=len(usage),
        prefill_lines=prefills,
        token_usage_mean=_mean(usage),
        token_usage_max=max(usage) if usage else None,
        running_mean=_mean(running),
        queue_mean=_mean(queue),
        cache_hit_rate=cached / (new + cached) if new + cached > 0 else None,
        retractions=retracted,
    )


def counter_delta(
    before: dict[str, float], after: dict[str, float], names: Sequence[str]
) -> float | None:
    """after - before of the first of `names` the server serves (None: none of them)."""
    for name in names:
        if name in after:
            return after[name] - before.get(name, 0.0)
    return None


def hit_rate_of_finished(before: dict[str, float], after: dict[str, float]) -> float | None:
    """Cached over prompt tokens of the requests that finished between two /metrics reads (both
    counters move per finished request); None when none finished. 0.5.23 counts a request's hits
    once (its first prefill), so the ratio is at most 1; 0.5.1 counted a retracted request's
    redone prefill again, hence the clamp."""
    prompt = counter_delta(before, after, (PROMPT_TOKENS,))
    if not prompt:
        return None
    return min((counter_delta(before, after, (CACHED_TOKENS,)) or 0.0) / prompt, 1.0)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


class MemoryProbe:
    """Beside each measured run: the log offsets and /metrics counters that bound its window.

    `start_run()` before the run's first request, `on_request(record)` at each completion (the
    Benchmark's on_request hook, wrapped with `wrap`), `end_run(summary)` after it: it fills the
    summary's memory fields and returns it."""

    def __init__(self, server_log: Path, base_url: str, headers: dict[str, str] | None = None):
        self.server_log = server_log
        self.base_url = base_url
        self.headers = headers or {}
        self.counters: dict[str, float] = {}  # the last /metrics read
        self._before: dict[str, float] = {}
        self._start = 0
        self._marks: list[tuple[float, int]] = []  # (server-clock end of a completion, offset)
        self._requests: list[RequestRecord] = []

    def wrap(self, on_request: Callable[[RequestRecord, int, int, int], None]):
        def hook(record: RequestRecord, done: int, total: int, tokens: int) -> None:
            self.on_request(record)
            on_request(record, done, total, tokens)

        return hook

    def start_run(self) -> None:
        self._before = self.read_counters()
        self._start, self._marks, self._requests = self._offset(), [], []

    def on_request(self, record: RequestRecord) -> None:
        if record.phase == "measure" and record.end_s is not None:
            self._marks.append((record.end_s, self._offset()))
            if record.ok:
                self._requests.append(record)

    def end_run(self, summary: RunSummary) -> RunSummary:
        end_offset = self._offset()
        self.counters = self.read_counters()
        start, end = self._start, end_offset
        records = self._requests
        if summary.window:  # steady state: the lines between the window's first and last completion
            # Completions reach the client in wall order, their end_s (the server's clock) need
            # not be in the same order: the earliest offset at or after the window opened, the
            # latest at or before it closed.
            opened, closed = summary.window
            start = min((o for t, o in self._marks if t >= opened), default=start)
            end = max((o for t, o in self._marks if t <= closed), default=end)
            records = [r for r in records if opened < (r.end_s or 0) <= closed]
        memory = window_memory(self._lines(start, end))
        summary.token_usage_mean = memory.token_usage_mean
        summary.token_usage_max = memory.token_usage_max
        summary.running_mean = memory.running_mean
        summary.queue_mean = memory.queue_mean
        summary.cache_hit_rate, summary.retractions = memory.cache_hit_rate, memory.retractions
        summary.memory_source = "log" if memory.decode_lines or memory.prefill_lines else None
        if summary.memory_source is None:  # no lines: the counters over the whole run
            self._from_counters(summary)
        elif memory.prefill_lines == 0:  # decode lines but no prefill line fell in the window
            # (on a busy host the log offsets marked at completions lag the server's lines): the
            # hit rate over the requests that finished during the run, as without lines
            summary.cache_hit_rate = hit_rate_of_finished(self._before, self.counters)
        lengths = [(r.prompt_tokens or 0) + (r.completion_tokens or 0) for r in records]
        summary.request_tokens_mean = _mean(lengths) if any(lengths) else None
        return summary

    def _from_counters(self, summary: RunSummary) -> None:
        """The run's hit rate and retractions from /metrics deltas between its two reads.

        Two kinds of counter, two coverages. The retraction counter is the scheduler's and moves
        as retractions happen, so its delta is the run's time span. The cached and prompt
        counters are the tokenizer manager's and move once per FINISHED request, by its whole
        count (0.5.23 `observe_one_finished_request`), so the hit rate is over the requests that
        finished between the reads (`hit_rate_of_finished`): at C > 1 that is the whole run, its
        ramp-up included, not the steady window the log lines cover, and a request cut when the
        window closed is in it only if its abort reached the scheduler before the last read
        (0.5.23 sends it 2 s after the stream closed). No request finished: no hit rate."""
        before, after = self._before, self.counters
        retracted = counter_delta(before, after, RETRACTED_COUNTERS)
        prompt = counter_delta(before, after, (PROMPT_TOKENS,))
        if retracted is None and prompt is None:
            return
        summary.memory_source = "metrics"
        summary.retractions = int(retracted or 0)
        summary.cache_hit_rate = hit_rate_of_finished(before, after)

    def read_counters(self) -> dict[str, float]:
        """/metrics as {name: value}; {} when the server serves none (--enable-metrics off)."""
        try:
            response = httpx.get(
                self.base_url + "/metrics", headers=self.headers, timeout=10.0, verify=tls_context()
            )
        except httpx.HTTPError:
            return {}
        return prometheus_values(response.text) if response.status_code == 200 else {}

    def _offset(self) -> int:
        try:
            return self.server_log.stat().st_size
        except OSError:
            return 0

    def _lines(self, start: int, end: int) -> list[str]:
        if end <= start:
            return []
        try:
            with self.server_log.open("rb") as fh:
                fh.seek(start)
                text = fh.read(end - start).decode(errors="replace")
        except OSError:
            return []
        return text.splitlines()
