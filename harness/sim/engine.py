"""The simulated scheduler: continuous batching on a virtual clock.

One asyncio task runs SGLang's loop: a prefill of the waiting requests whenever there are any
(0.5.23 `managers/scheduler.py::get_next_batch_to_run`: "Run prefill first if possible"), else a
decode iteration for the running batch, each lasting what `PerfModel` says. With the overlap
scheduler one more step runs after the last response went out (its result queue drains): until
then the scheduler is not fully idle and a flush is refused. Iteration deadlines are absolute on
the virtual clock, so CPU hiccups delay a token but never slow the simulated server down on
average. Counters follow SGLang's: the Prometheus token, request, verify and cached counters
move once per finished (or aborted) request, by its whole count (request.py `Totals`); accept
length is folded in at each decode log line (every `--decode-log-interval` iterations);
`/flush_cache` resets the scheduler's speculative counters (/server_info's running average),
never the Prometheus totals.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from harness.sglang.surfaces import CURRENT, surface
from harness.sim.capacity.hicache import HostTier
from harness.sim.capacity.kvpool import KVPool
from harness.sim.capacity.policy import (
    NewTokenRatio,
    max_new_tokens_within,
    retract,
    select_prefill,
)
from harness.sim.clock import InstantClock, Lag, VirtualClock  # noqa: F401  (re-exported)
from harness.sim.intake import REASONING, build_request
from harness.sim.loglines import decode_line, prefill_line, retract_line
from harness.sim.model.drift import DRIFT_SIGMA, Drift
from harness.sim.model.perf_model import PerfModel
from harness.sim.request import Chunk, Counters, SimRequest, Totals

log = logging.getLogger("sglang.scheduler")


class Engine:
    def __init__(
        self,
        model: PerfModel,
        clock: VirtualClock,
        *,
        max_running_requests: int,
        kv_tokens: int,
        decode_log_interval: int,
        seed: int,
        log_format: str = CURRENT,  # the SGLang surface whose decode lines to print
        drift_sigma: float = DRIFT_SIGMA,
        crash_after_tokens: int | None = None,
        on_crash: Callable[[int, str], None] | None = None,  # (tokens so far, phase)
        log_forward_iters: bool = False,  # SGLANG_LOG_FORWARD_ITERS: "Decode batch [N],"
        drain_extra_s: float = 0.0,  # fault slow-drain: wall seconds added to the drain step
        host: HostTier | None = None,  # HiCache's host tier (--enable-hierarchical-cache)
        stream_interval: int = 1,  # --stream-interval: a chunk every N tokens (first at once)
        max_prefill_tokens: int = 16384,  # --max-prefill-tokens: a prefill batch's input
        reasoning: tuple[float, float] = REASONING,  # --sim-reasoning-tokens: median, sigma
        context_len: int | None = None,  # --context-length, else the model's
    ):
        if kv_tokens <= 0:  # SGLang never gets this far: it dies at start-up (sim.main)
            raise ValueError(f"no KV pool to schedule on ({kv_tokens} tokens)")
        self.model = model
        self.clock = clock
        self.max_running = max_running_requests
        self.kv_tokens = kv_tokens
        self.context_len = context_len
        self.pool = KVPool(kv_tokens, host)
        self.ratio = NewTokenRatio()
        self.stream_interval = max(1, stream_interval)
        self.reasoning = reasoning
        self.observer: Callable[[Engine, float], None] | None = None
        self.max_prefill_tokens = max_prefill_tokens
        # `new_tokens_required_next_decode`: a slot per request, a verify pass's with speculation
        self._per_request = model.spec.draft_tokens if model.spec else 1
        self.log_interval = decode_log_interval
        self.legacy_logs = surface(log_format).legacy  # "Decode batch." lines, no accept rate
        self.seed = seed
        self.waiting: list[SimRequest] = []
        self.running: list[SimRequest] = []
        self.counters = Counters()
        self.totals = Totals()
        self._wake = asyncio.Event()
        # The overlap scheduler's result queue: one step still in flight after the last response.
        self.overlap = model.dep.overlap
        self.draining = False
        self._drain_extra_s = drain_extra_s
        self._last_step_s = 0.0
        self._fully_idle = asyncio.Event()
        self._fully_idle.set()
        self._drift = Drift(drift_sigma, seed)
        self._t = 0.0  # engine time on the virtual clock
        self._last_emit: tuple[float, float] | None = None  # (virtual, wall) of the last chunk
        self.lag = Lag(clock)  # how far its schedule trails the clock (/server_info simulator)
        self._iterations = 0
        self._forward_ct = 0  # prefill and decode forwards, SGLang's scheduler.forward_ct
        self.log_forward_iters = log_forward_iters
        self._interval_tokens = 0
        self._interval_start = 0.0
        self._n_requests = 0
        self._crash_after = crash_after_tokens
        self._on_crash = on_crash
        self._total_generated = 0  # since start-up, flushes included (for the crash fault)
        self._crash_armed = False  # from ready on: the warm-up never trips a crash fault

    @property
    def speculative(self) -> bool:
        return self.model.spec is not None

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running

    @property
    def fully_idle(self) -> bool:
        """0.5.23 `scheduler.py::is_fully_idle`: no request and no batch left in flight (with
        overlap, `result_queue` empty: the step after the last response has finished)."""
        return self.idle and not self.draining

    async def wait_fully_idle(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` wall seconds for `fully_idle` (a deferred flush's wait)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self.fully_idle:
            left = deadline - loop.time()
            if left <= 0:
                return False
            try:
                async with asyncio.timeout(left):
                    await self._fully_idle.wait()
            except TimeoutError:
                return self.fully_idle
            await asyncio.sleep(0)  # a request submitted meanwhile clears it again
        return True

    def new_request(
        self,
        prompt: str | list[dict[str, Any]],
        max_new_tokens: int,
        *,
        ignore_eos: bool,
        thinking: bool,
        greedy: bool = False,
        prompt_tokens: int | None = None,
        temperature: float = 1.0,
    ) -> SimRequest:
        """`greedy` (temperature 0): its output (words and length) depends on the prompt alone,
        as a greedy decode does, speculative or not; sampled, on the request too, and the
        higher the `temperature`, the fewer drafts are accepted (perf_model). `prompt`: text, or
        chat messages (their contents, joined, are what lengths and acceptance hash; the
        template-rendered conversation is what the radix cache keys)."""
        self._n_requests += 1
        return build_request(
            prompt,
            max_new_tokens,
            n=self._n_requests,
            seed=self.seed,
            submitted_at=self._arrival(),
            ignore_eos=ignore_eos,
            thinking=thinking,
            greedy=greedy,
            prompt_tokens=prompt_tokens,
            temperature=temperature,
            reasoning=self.reasoning,
        )

    def submit(self, request: SimRequest) -> None:
        request.max_new_tokens = max_new_tokens_within(
            len(request.ids), request.max_new_tokens, self.kv_tokens, self.context_len
        )
        self.waiting.append(request)
        self._fully_idle.clear()
        self._wake.set()

    def abort(self, request: SimRequest) -> None:
        """The client went away: stop generating for it (SGLang aborts the request too)."""
        held = request in self.waiting or request in self.running
        if request in self.waiting:
            self.waiting.remove(request)
        if request in self.running:
            self.running.remove(request)
        self.pool.release(request)
        if held:  # the scheduler still had it: it finishes as aborted and is counted so
            self.totals.note_finished(request)

    def reset_fault_counters(self) -> None:
        """At ready: the crash fault counts tokens generated for clients, not the warm-up's."""
        self._total_generated = 0
        self._crash_armed = True

    def flush(self) -> bool:
        """SGLang flushes (and resets the scheduler's speculative counters) only when fully idle
        (0.5.23 `scheduler.py::flush_cache`); the Prometheus totals and gauges stay."""
        if not self.fully_idle:
            log.warning(
                "Cache not flushed because there are pending requests. #queue-req: %d, "
                "#running-req: %d",
                len(self.waiting),
                len(self.running),
            )
            return False
        c = self.counters
        self.counters = Counters(
            last_gen_throughput=c.last_gen_throughput,
            last_accept_len=c.last_accept_len,
            last_accept_rate=c.last_accept_rate,
        )
        self._interval_tokens = 0
        self.lag.reset()
        self.pool.reset()  # 0.5.23 flush_cache: tree_cache.reset(), the ratio back to its start
        self.ratio.reset()
        return True

    def avg_accept_length(self) -> float | None:
        c = self.counters
        if not self.speculative or c.spec_forward_ct == 0:
            return None
        return c.spec_accept_tokens / c.spec_forward_ct

    async def run(self) -> None:
        while True:
            if self.idle:
                await self._drain()
                if self.idle:
                    self._fully_idle.set()
                    self._wake.clear()
                    await self._wake.wait()
                self._t = self._pick_up()
            if await self._prefill():
                continue  # SGLang: a new prefill batch runs before the next decode step
            if self.running:
                await self._decode()

    def _arrival(self) -> float:
        """A request's receipt on the virtual clock. With none running, it answers the last
        response: the wall time since that chunk is the client's (and the simulator's HTTP
        handling), so it passes at wall rate, as against a real server at clock scale 1. Else
        now (the engine is busy; the request waits for a step boundary either way)."""
        if self.running or self._last_emit is None:
            return self.clock.now()
        return self.clock.client_time(self._last_emit)

    def _pick_up(self) -> float:
        """Where an engine that was idle (or draining) starts on what arrived: at its receipt or
        at the end of its own last step, whichever is later, not when the event loop got round
        to the engine task. That wall latency is CPU, not the simulated server: on the virtual
        clock it would land `clock_scale` times over in the chunk stamps (TTFT at a fast clock
        read ~10 ms high). The clock goes back to that point so the stamps' server time passes
        at the clock's rate from there; the client's wall share (harness.measure.clock.restamp)
        keeps the latency at wall rate, as against a real server."""
        now = self.clock.now()
        if not self.waiting:
            return max(self._t, now)
        start = max(min(r.submitted_at for r in self.waiting), self._t)
        self.clock.rebase(start)
        start = min(start, now)
        for r in self.waiting:  # received since, in wall time: never after the pick-up
            r.submitted_at = min(r.submitted_at, start)
        return max(self._t, start)

    async def _drain(self) -> None:
        """With the overlap scheduler, the step launched before the last results were processed
        is still in flight when the last response goes out: one more step before fully idle."""
        if not self.overlap or self._last_step_s <= 0:
            return
        self.draining = True
        try:
            await self._advance(self._last_step_s)
            if self._drain_extra_s:
                await asyncio.sleep(self._drain_extra_s)
                self._t = max(self._t, self.clock.now())
        finally:
            self.draining = False
            self._last_step_s = 0.0

    async def _advance(self, seconds: float) -> None:
        self._t += seconds
        await self.clock.sleep_until(self._t)
        self.lag.observe(self._t, seconds)
        if self.observer is not None:  # the oracle's sampler (mean usage, running, queue)
            self.observer(self, seconds)

    def kv_used(self) -> int:
        return self.pool.used

    async def _prefill(self) -> bool:
        """Prefill what SGLang's PrefillAdder admits (policy); False when it admitted nothing."""
        admitted = select_prefill(
            self.pool,
            self.waiting,
            self.running,
            self.ratio.current,
            max_running=self.max_running,
            max_prefill_tokens=self.max_prefill_tokens,
            now=self._t,
        )
        if not admitted:
            return False
        seconds = self.model.prefill_s(sum(a.extend for a in admitted))
        loaded = sum(a.host_hit for a in admitted)
        if loaded and self.pool.host is not None:  # layer-wise load-back overlaps the forward
            seconds = max(seconds, self.pool.host.transfer_s(loaded))
            self.pool.host.loaded_tokens += loaded
        await self._advance(seconds)
        self._last_step_s = seconds
        self._forward_ct += 1
        self.counters.note_prefill(admitted, self.totals)
        for a in admitted:
            r = a.request
            self.pool.commit(r, r.fill_ids(), self._t)
            self._emit(r, 1)  # the first token (again, after a retraction) comes from prefill
            if r.generated < r.limit and not r.stalled:
                self.running.append(r)
            elif r.generated >= r.limit:
                self._finish(r)
            else:
                self.pool.release(r)
        log.info(prefill_line(self, admitted, seconds))
        return True

    def _finish(self, r: SimRequest) -> None:
        self.pool.finish(r, r.ids + r.output_ids(0, r.generated), self._t)
        self.totals.note_finished(r)

    def _retract(self) -> None:
        """The next decode step does not fit: SGLang's retract_decode, then its warning."""
        old_ratio, before = self.ratio.current, self.pool.available
        retracted = retract(self.pool, self.running, self._per_request)
        self.ratio.current = NewTokenRatio.after_retract(self.running)
        self.counters.note_retract(retracted)
        self.totals.note_retract(retracted)
        gained = self.pool.available - before
        log.warning(
            retract_line(self.legacy_logs, len(retracted), gained, old_ratio, self.ratio.current)
        )
        self.waiting.extend(retracted)

    async def _decode(self) -> None:
        if not self.pool.ensure(len(self.running) * self._per_request):
            self._retract()
        else:
            self.ratio.decay_step()
        batch = len(self.running)
        context = sum(r.prompt_tokens + r.generated for r in self.running) // batch
        step = self.model.decode_step_s(batch, context)
        self._last_step_s = step * (1.0 + self._drift.wander(step))
        await self._advance(self._last_step_s)
        self._iterations += 1
        self._forward_ct += 1
        for r in list(self.running):
            if r.abort is not None and r.generated > 1:  # mid-stream: prefill's + one decode
                self.running.remove(r)
                self.pool.release(r)
                self.totals.note_finished(r)
                r.queue.put_nowait(Chunk([], "abort", self._t))
                continue
            sampled = self.model.sample_tokens(r.rng, r.generated, r.prompt_factor)
            n = min(sampled, r.limit - r.generated)  # max_tokens cuts the step, not the verify
            self.pool.grow(r, n)
            if self.speculative:
                r.note_verify(sampled - 1)
                self.counters.pending_accept_tokens += n
                self.counters.pending_forward_ct += 1
            self._emit(r, n)
        for r in self.running:
            if r.generated >= r.limit:
                self._finish(r)
        self.running = [r for r in self.running if r.generated < r.limit]
        if self._iterations % self.log_interval == 0:
            log.info(decode_line(self, batch))

    def _emit(self, request: SimRequest, n: int) -> None:
        start = request.generated
        request.generated += n
        self._interval_tokens += n
        self._total_generated += n
        crash = self._crash_after is not None and self._total_generated >= self._crash_after
        if crash and self._crash_armed:
            assert self._on_crash is not None
            # A request's first token comes from its prefill, every later one from a decode step.
            self._on_crash(self._total_generated, "prefill" if start == 0 else "decode")
        done = request.generated >= request.limit
        # 0.5.23 output_streamer.py::accept: every step at interval 1; else the first token at
        # once, then whenever at least stream_interval tokens are unsent; always at the end.
        unsent = request.generated - request.sent
        if not (done or self.stream_interval == 1 or unsent >= self.stream_interval or start == 0):
            return
        self._last_emit = (self._t, time.monotonic())
        request.queue.put_nowait(
            Chunk(
                list(range(request.sent, request.generated)),
                request.finish_reason if done else None,
                self._t,
            )
        )
        request.sent = request.generated
