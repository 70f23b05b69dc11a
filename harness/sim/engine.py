"""The simulated scheduler: continuous batching on a virtual clock.

One asyncio task runs SGLang's loop: a prefill of the waiting requests whenever there are any
(0.5.23 `managers/scheduler.py::get_next_batch_to_run`: "Run prefill first if possible"), else a
decode iteration for the running batch, each lasting what `PerfModel` says. With the overlap
scheduler one more step runs after the last response went out (its result queue drains): until
then the scheduler is not fully idle and a flush is refused. Iteration deadlines are absolute on
the virtual clock, so CPU hiccups delay a token but never slow the simulated server down on
average. Counters follow SGLang's: accept length is folded in at each decode log line (every
`--decode-log-interval` iterations); `/flush_cache` resets the scheduler's speculative counters
(/server_info's running average), never the Prometheus totals.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Callable

from harness.sglang import CURRENT, surface
from harness.sim.clock import InstantClock, Lag, VirtualClock  # noqa: F401  (re-exported)
from harness.sim.perf_model import PerfModel, sampled_acceptance
from harness.sim.request import Chunk, Counters, SimRequest, Totals
from harness.sim.text import stable_hash

log = logging.getLogger("sglang.scheduler")
DRIFT_SIGMA = 0.02  # standard deviation of the machine's speed deviation
DRIFT_TIME_S = 20.0  # its correlation time, simulated seconds


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
    ):
        self.model = model
        self.drift_sigma = drift_sigma
        self.clock = clock
        self.max_running = max_running_requests
        self.kv_tokens = kv_tokens
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
        self._noise = random.Random(seed)
        self._drift = 0.0  # slowly varying speed deviation of the machine (clocks, PCIe, load)
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
        prompt: str,
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
        higher the `temperature`, the fewer drafts are accepted (perf_model)."""
        self._n_requests += 1
        h = stable_hash(prompt)
        rng = random.Random(hash((self.seed, h, self._n_requests)))
        lengths = random.Random(hash((self.seed, h))) if greedy else rng
        # A reasoning model thinks for one to a few thousand tokens on these prompts (median
        # ~1200, so 2048 tokens finish most chains and 512 cuts nearly all, as the seeds saw),
        # then answers in a few hundred.
        thinking_tokens = int(lengths.lognormvariate(math.log(1200), 0.5)) if thinking else 0
        natural = thinking_tokens + int(lengths.uniform(150, 600))
        return SimRequest(
            rid=f"{self._n_requests:08x}",
            prompt=prompt,
            submitted_at=self._arrival(),
            prompt_tokens=prompt_tokens or max(1, len(prompt) // 4 + 12),
            max_new_tokens=max_new_tokens,
            # ignore_eos: it would go on past max_new_tokens, so it ends by "length"
            natural_tokens=max_new_tokens + 1 if ignore_eos else natural,
            thinking_tokens=thinking_tokens,
            # Easy (formulaic) prompts accept more drafts than hard ones: +-10% around 1.
            prompt_factor=(0.9 + 0.2 * ((h >> 8) % 1000) / 999)
            * sampled_acceptance(0.0 if greedy else temperature),
            rng=rng,
            text_seed=h if greedy else self._n_requests,
            received_wall=time.monotonic(),
        )

    def submit(self, request: SimRequest) -> None:
        self.waiting.append(request)
        self._fully_idle.clear()
        self._wake.set()

    def abort(self, request: SimRequest) -> None:
        """The client went away: stop generating for it (SGLang aborts the request too)."""
        if request in self.waiting:
            self.waiting.remove(request)
        if request in self.running:
            self.running.remove(request)

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
        at the clock's rate from there; the client's wall share (harness.metrics.restamp) keeps
        the latency at wall rate, as against a real server."""
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

    def kv_used(self) -> int:
        return sum(r.prompt_tokens + r.generated for r in self.running)

    async def _prefill(self) -> bool:
        """Prefill what fits of the waiting queue; False when there was nothing to prefill."""
        new = []
        while self.waiting and len(self.running) + len(new) < self.max_running:
            new.append(self.waiting.pop(0))
        if not new:
            return False
        tokens = sum(r.prompt_tokens for r in new)
        seconds = self.model.prefill_s(tokens)
        await self._advance(seconds)
        self._last_step_s = seconds
        self._forward_ct += 1
        self.totals.prompt_tokens += tokens
        self.totals.requests += len(new)
        for r in new:
            self._emit(r, 1)  # the first token comes from prefill
        self.running.extend(r for r in new if r.generated < r.limit and not r.stalled)
        usage = self.kv_used() / max(self.kv_tokens, 1)
        if self.legacy_logs:
            log.info(
                "Prefill batch. #new-seq: %d, #new-token: %d, #cached-token: 0, "
                "token usage: %.2f, #running-req: %d, #queue-req: %d, ",
                len(new),
                tokens,
                usage,
                len(self.running),
                len(self.waiting),
            )
            return True
        log.info(
            "Prefill batch, #new-seq: %d, #new-token: %d, #cached-token: 0, token usage: %.2f, "
            "#running-req: %d, #queue-req: %d, #pending-token: 0, cuda graph: False, "
            "input throughput (token/s): %.2f",
            len(new),
            tokens,
            usage,
            len(self.running),
            len(self.waiting),
            tokens / seconds,
        )
        return True

    async def _decode(self) -> None:
        batch = len(self.running)
        context = sum(r.prompt_tokens + r.generated for r in self.running) // batch
        step = self.model.decode_step_s(batch, context)
        self._last_step_s = step * (1.0 + self._wander(step))
        await self._advance(self._last_step_s)
        self._iterations += 1
        self._forward_ct += 1
        for r in list(self.running):
            if r.abort is not None and r.generated > 1:  # mid-stream: prefill's + one decode
                self.running.remove(r)
                r.queue.put_nowait(Chunk([], "abort", self._t))
                continue
            n = self.model.sample_tokens(r.rng, r.generated, r.prompt_factor)
            n = min(n, r.limit - r.generated)
            if self.speculative:
                r.verify_ct += 1
                self.totals.verify_calls += 1
                self.counters.pending_accept_tokens += n
                self.counters.pending_forward_ct += 1
            self._emit(r, n)
        self.running = [r for r in self.running if r.generated < r.limit]
        if self._iterations % self.log_interval == 0:
            self._log_decode(batch)

    def _wander(self, dt: float) -> float:
        """Ornstein-Uhlenbeck deviation: ~2% spread, ~20 s memory, so runs differ like a real
        box's do (the seeds saw +-10% on single runs of a few requests) while runs average out."""
        decay = math.exp(-dt / DRIFT_TIME_S)
        self._drift = self._drift * decay + self.drift_sigma * math.sqrt(1 - decay * decay) * (
            self._noise.gauss(0.0, 1.0)
        )
        return self._drift

    def _emit(self, request: SimRequest, n: int) -> None:
        start = request.generated
        request.generated += n
        self.totals.generation_tokens += n
        self._interval_tokens += n
        self._total_generated += n
        crash = self._crash_after is not None and self._total_generated >= self._crash_after
        if crash and self._crash_armed:
            assert self._on_crash is not None
            # A request's first token comes from its prefill, every later one from a decode step.
            self._on_crash(self._total_generated, "prefill" if start == 0 else "decode")
        done = request.generated >= request.limit
        self._last_emit = (self._t, time.monotonic())
        request.queue.put_nowait(
            Chunk(
                list(range(start, request.generated)),
                request.finish_reason if done else None,
                self._t,
            )
        )

    def _log_decode(self, batch: int) -> None:
        c = self.counters
        gap = max(self._t - self._interval_start, 1e-9)
        c.last_gen_throughput = self._interval_tokens / gap
        self._interval_tokens, self._interval_start = 0, self._t
        msg = (
            f"Decode batch{self._iter_msg()}{'.' if self.legacy_logs else ','} "
            f"#running-req: {batch}, "
            f"#token: {self.kv_used()}, "
            f"token usage: {self.kv_used() / max(self.kv_tokens, 1):.2f}, "
        )
        if self.speculative and c.pending_forward_ct:
            accept_len = c.pending_accept_tokens / c.pending_forward_ct
            drafts = self.model.spec.draft_tokens - 1  # type: ignore[union-attr]
            rate = (c.pending_accept_tokens - c.pending_forward_ct) / (
                c.pending_forward_ct * drafts
            )
            msg += f"accept len: {accept_len:.2f}, "
            if not self.legacy_logs:
                msg += f"accept rate: {rate:.2f}, "
            c.last_accept_len, c.last_accept_rate = accept_len, rate
            c.spec_accept_tokens += c.pending_accept_tokens
            c.spec_forward_ct += c.pending_forward_ct
            c.pending_accept_tokens = c.pending_forward_ct = 0
        msg += (
            f"cuda graph: {self.model.dep.cuda_graph}, "
            f"gen throughput (token/s): {c.last_gen_throughput:.2f}, "
            f"#queue-req: {len(self.waiting)}"
        )
        log.info(msg + (", " if self.legacy_logs else ""))

    def _iter_msg(self) -> str:
        """0.5.23 `metrics_reporter.py`: f" [{batch_iter}]" only with SGLANG_LOG_FORWARD_ITERS."""
        return f" [{self._forward_ct}]" if self.log_forward_iters and not self.legacy_logs else ""
