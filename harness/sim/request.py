"""A simulated request and the counters the scheduler keeps: what the engine and the HTTP
routes (chat, completions, generate) share."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from harness.sim.text import token_id


@dataclass
class Chunk:
    tokens: list[int]  # absolute token indices produced in this iteration
    finish_reason: str | None = None
    at: float = 0.0  # simulated time of the iteration that produced it


@dataclass
class SimRequest:
    rid: str
    prompt: str
    submitted_at: float
    prompt_tokens: int
    max_new_tokens: int
    natural_tokens: int  # where the model would stop on its own (EOS)
    thinking_tokens: int  # the first tokens are reasoning (until </think>)
    prompt_factor: float  # per-prompt acceptance multiplier
    rng: random.Random
    queue: asyncio.Queue[Chunk] = field(default_factory=asyncio.Queue)
    generated: int = 0
    verify_ct: int = 0
    # verify steps by accepted drafts, [j]: steps that accepted j (SGLang 0.5.23
    # schedule_batch.py update_spec_correct_drafts_histogram: the verify's count, before max_tokens
    # cuts the step's tokens)
    drafts_histogram: list[int] = field(default_factory=list)
    stalled: bool = False  # fault injection: no token after the first
    abort: str | None = None  # fault injection: aborted with this message after two chunks
    die_after: bool = False  # fault injection: the server dies once this request finished
    text_seed: int = 0  # what its words are drawn from: the prompt alone when greedy
    lossy_after: int | None = None  # fault injection: tokens from this index on differ
    received_wall: float = 0.0  # time.monotonic() at receipt: the chunks' sim_wall_s count from it
    ids: tuple[int, ...] = ()  # prompt token ids (sim.capacity.tokens): what the radix cache keys
    ignore_eos: bool = False
    node: Any = None  # the radix node it holds locked while running (kvpool)
    in_tree: int = 0  # tokens of its sequence in the tree (prompt, and decoded ones re-prefilled)
    kv_private: int = 0  # decoded tokens it holds outside the tree
    retractions: int = 0
    sent: int = 0  # tokens handed to its queue (--stream-interval buffers the rest)
    stream: bool = False  # sent back as a stream: the counters' is_streaming label
    cached_device: int = 0  # its first prefill's hits by tier (0.5.23 Req.cached_tokens_device,
    cached_host: int = 0  # _host: set once, a retraction's re-prefill leaves them)

    def note_verify(self, correct_drafts: int) -> None:
        """One verify step that accepted `correct_drafts` drafts."""
        self.verify_ct += 1
        if len(self.drafts_histogram) <= correct_drafts:
            self.drafts_histogram.extend([0] * (correct_drafts + 1 - len(self.drafts_histogram)))
        self.drafts_histogram[correct_drafts] += 1

    def fill_ids(self) -> tuple[int, ...]:
        """What a prefill of it computes: the prompt, then what it had decoded before a
        retraction (0.5.23 `Req.fill_ids = origin_input_ids + output_ids`)."""
        if not self.generated:
            return self.ids
        return self.ids + self.output_ids(0, self.generated)

    def output_ids(self, start: int, end: int) -> tuple[int, ...]:
        """Decoded tokens as cache keys: unique to the request (outputs never match others')."""
        base = -(int(self.rid, 16) << 24)
        return tuple(range(base - start, base - end, -1))

    def token(self, index: int) -> int:
        """The id of its `index`-th output token (harness.sim.text); a lossy fault shifts every
        token from `lossy_after` on, as a drafter bug that accepts a wrong draft would."""
        lossy = self.lossy_after is not None and index >= self.lossy_after
        return token_id(self.text_seed + int(lossy), index, index < self.thinking_tokens)

    @cached_property
    def limit(self) -> int:
        return min(self.max_new_tokens, self.natural_tokens)

    @property
    def finish_reason(self) -> str:
        return "length" if self.natural_tokens > self.max_new_tokens else "stop"


@dataclass
class Finished:
    """One `is_streaming` series of the per-request counters."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    requests: int = 0


@dataclass
class Totals:
    """The Prometheus `*_total` counters: since start-up, never reset (a flush leaves them).

    Two owners, as in SGLang 0.5.23. The tokenizer manager's move once per FINISHED request
    (`observability/metrics_collector.py` `TokenizerMetricsCollector.observe_one_finished_request`,
    called from `managers/tokenizer_manager.py` `collect_metrics` under `state.finished`):
    `prompt_tokens_total`, `generation_tokens_total` and `num_requests_total` (labelled
    `is_streaming`), `spec_verify_calls_total` and `cached_tokens_total{cache_source}`, each by the
    request's whole count, so none of them moves while a request runs. An aborted request
    finishes too (finish reason abort) and is counted with what it had. The scheduler's move as
    things happen: the retraction counters.
    """

    finished: dict[str, Finished] = field(default_factory=dict)  # by is_streaming: "true"/"false"
    verify_calls: int = 0
    cached_device_tokens: int = 0  # sglang:cached_tokens_total{cache_source="device"}
    cached_host_tokens: int = 0  # ... {cache_source="host"}
    retracted_requests: int = 0
    retracted_input_tokens: int = 0
    retracted_output_tokens: int = 0
    # Not exported: every prefill's hits and computed input (a retraction's re-prefill too), what
    # the scheduler's prefill lines and the in-process oracle (harness.sim.oracle) read.
    prefill_hit_tokens: int = 0
    computed_prompt_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        return sum(f.prompt_tokens for f in self.finished.values())

    @property
    def generation_tokens(self) -> int:
        return sum(f.generation_tokens for f in self.finished.values())

    @property
    def requests(self) -> int:
        return sum(f.requests for f in self.finished.values())

    def note_finished(self, r: SimRequest) -> None:
        """0.5.23 observe_one_finished_request: the request's prompt (its original input, not what
        a retraction made it prefill again), its output, its verify steps and its first prefill's
        cache hits by source."""
        series = self.finished.setdefault("true" if r.stream else "false", Finished())
        series.prompt_tokens += r.prompt_tokens
        series.generation_tokens += r.generated
        series.requests += 1
        self.verify_calls += r.verify_ct
        self.cached_device_tokens += r.cached_device
        self.cached_host_tokens += r.cached_host

    def note_retract(self, retracted: list[SimRequest]) -> None:
        """0.5.23 scheduler.py update_running_batch: increment_retracted_reqs."""
        self.retracted_requests += len(retracted)
        self.retracted_input_tokens += sum(r.prompt_tokens for r in retracted)
        self.retracted_output_tokens += sum(r.generated for r in retracted)


@dataclass
class Counters:
    """Since the last flush (0.5.23 `metrics_reporter.py::reset_metrics`). `accept_*` are folded
    in at log lines, like SGLang's; the gauges keep their last value across a flush."""

    cache_hit_rate: float = 0.0  # the last prefill batch's hits / its input (sglang:cache_hit_rate)
    num_retracted_reqs: int = 0  # retracted since the last stats line
    retracted_gauge: int = 0  # what the last stats line set sglang:num_retracted_reqs to

    spec_accept_tokens: int = 0
    spec_forward_ct: int = 0
    pending_accept_tokens: int = 0
    pending_forward_ct: int = 0
    last_gen_throughput: float = 0.0
    last_accept_len: float | None = None
    last_accept_rate: float | None = None

    def note_prefill(self, admitted: list[Any], totals: Totals) -> None:
        """0.5.23 report_prefill_stats: the batch's hit rate, hits over hits + computed input.
        A request's first prefill sets its hits by tier, which its counters report when it
        finishes (0.5.23 schedule_batch.py: only once, `if not req.retracted_stain`)."""
        hits = sum(a.device_hit + a.host_hit for a in admitted)
        computed = sum(a.extend for a in admitted)
        self.cache_hit_rate = hits / (hits + computed) if hits + computed else 0.0
        totals.prefill_hit_tokens += hits
        totals.computed_prompt_tokens += computed
        for a in admitted:
            if not a.request.retractions:
                a.request.cached_device, a.request.cached_host = a.device_hit, a.host_hit

    def note_retract(self, retracted: list[SimRequest]) -> None:
        self.num_retracted_reqs += len(retracted)

    def stats_line(self) -> None:
        """A stats line publishes the retractions since the last one and resets the count
        (0.5.23 metrics_reporter.py: stats.num_retracted_reqs = ...; num_retracted_reqs = 0)."""
        self.retracted_gauge, self.num_retracted_reqs = self.num_retracted_reqs, 0
