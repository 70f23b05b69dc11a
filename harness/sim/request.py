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
class Totals:
    """The Prometheus `*_total` counters: since start-up, never reset (a flush leaves them)."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    requests: int = 0
    verify_calls: int = 0
    retracted_requests: int = 0
    retracted_input_tokens: int = 0
    retracted_output_tokens: int = 0
    cached_device_tokens: int = 0  # sglang:cached_tokens_total{cache_source="device"}
    cached_host_tokens: int = 0  # ... {cache_source="host"}
    computed_prompt_tokens: int = 0  # prefill input not found in any cache (retractions' too)

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
        """0.5.23 report_prefill_stats: the batch's hit rate, hits over hits + computed input
        (and the `cached_tokens_total` counters by source)."""
        hits = sum(a.device_hit + a.host_hit for a in admitted)
        computed = sum(a.extend for a in admitted)
        self.cache_hit_rate = hits / (hits + computed) if hits + computed else 0.0
        totals.cached_device_tokens += sum(a.device_hit for a in admitted)
        totals.cached_host_tokens += sum(a.host_hit for a in admitted)
        totals.computed_prompt_tokens += computed

    def note_retract(self, retracted: list[SimRequest]) -> None:
        self.num_retracted_reqs += len(retracted)

    def stats_line(self) -> None:
        """A stats line publishes the retractions since the last one and resets the count
        (0.5.23 metrics_reporter.py: stats.num_retracted_reqs = ...; num_retracted_reqs = 0)."""
        self.retracted_gauge, self.num_retracted_reqs = self.num_retracted_reqs, 0
