"""A simulated request and the counters the scheduler keeps: what the engine and the HTTP
routes (chat, completions, generate) share."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

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

    def token(self, index: int) -> int:
        """The id of its `index`-th output token (harness.sim.text); a lossy fault shifts every
        token from `lossy_after` on, as a drafter bug that accepts a wrong draft would."""
        lossy = self.lossy_after is not None and index >= self.lossy_after
        return token_id(self.text_seed + int(lossy), index, index < self.thinking_tokens)

    @property
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


@dataclass
class Counters:
    """Since the last flush (0.5.23 `metrics_reporter.py::reset_metrics`). `accept_*` are folded
    in at log lines, like SGLang's; the gauges keep their last value across a flush."""

    spec_accept_tokens: int = 0
    spec_forward_ct: int = 0
    pending_accept_tokens: int = 0
    pending_forward_ct: int = 0
    last_gen_throughput: float = 0.0
    last_accept_len: float | None = None
    last_accept_rate: float | None = None
