"""The simulator's answer for one launch, computed in-process without serving anything.

`python -m harness.sim` and this module build the performance model the same way (from SGLang's
argv through SGLang's adjustments), so the oracle is what the served simulator would measure on
average. Benchmarks use it to evaluate hundreds of configurations in seconds (search efficiency)
and to know the true rate the client should measure (client fidelity).
"""

from __future__ import annotations

import argparse
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from drafter.checkpoint import CheckpointError, DrafterCheckpoint
from drafter.checks import footprint as drafter_footprint
from harness.sglang import memory
from harness.sglang.surfaces import CURRENT, surface
from harness.sim.capacity.settings import engine_capacity
from harness.sim.cli import build_parser, resolve, sglang_version_of
from harness.sim.cpu_device import on_cpu
from harness.sim.model.adaptive import adaptive_model
from harness.sim.model.perf_model import Deployment, PerfModel, Speculation
from harness.sim.model.profiles import (
    DRAFTERS,
    EAGLE3_37K_TTT5,
    HARDWARE,
    MIB,
    TARGETS,
    DrafterProfile,
)

PROMPT_TOKENS = 60  # typical of the bundled reasoning prompts


@dataclass(frozen=True)
class Evaluation:
    outcome: str  # "ok" or "oom"
    oom_kind: str | None
    tok_s: float | None  # expected single-stream decode tok/s (tokens after the first)
    accept_len: float | None
    startup_s: float  # simulated seconds until ready, or until the failure
    max_total_num_tokens: int


def with_checkpoint_footprint(profile: DrafterProfile, path: str | None, tp: int) -> DrafterProfile:
    """Memory from the drafter checkpoint itself when it is on this machine (weights + KV/token)."""
    if not path or not Path(path).is_dir():
        return profile
    try:
        footprint = drafter_footprint(DrafterCheckpoint.open(Path(path)))
    except CheckpointError:
        return profile  # the server's own start-up reports what is wrong with it
    return replace(
        profile,
        weights_mib_per_gpu=footprint.weights_bytes / tp / MIB,
        kv_bytes_per_token=footprint.kv_bytes_per_token // tp,
    )


def build_model(args: dict[str, Any], ns: argparse.Namespace, nccl_proto: str) -> PerfModel:
    """The PerfModel for resolved SGLang `args` and the simulator's own flags in `ns`."""
    hw, target = HARDWARE[ns.sim_hardware], TARGETS[ns.sim_target]
    speculation = None
    if args["speculative_algorithm"]:
        drafter = DRAFTERS[ns.sim_drafter] if ns.sim_drafter else EAGLE3_37K_TTT5
        speculation = Speculation(
            algorithm=args["speculative_algorithm"],
            steps=args["speculative_num_steps"],
            topk=args["speculative_eagle_topk"],
            draft_tokens=args["speculative_num_draft_tokens"],
            drafter=with_checkpoint_footprint(
                drafter, args["speculative_draft_model_path"], args["tp_size"]
            ),
            accept_decay=getattr(ns, "sim_accept_decay", 0.0),
        )
    deployment = Deployment(
        tp=args["tp_size"],
        cuda_graph=args["cuda_graph_enabled"] and not on_cpu(args),  # a CPU captures none
        device=args.get("device") or "cuda",
        overlap=not args["disable_overlap_schedule"],
        # The seeds' tuning: NCCL_PROTO=LL (with Ring and P2P over PCIe) cut allreduce latency.
        nccl_tuned=nccl_proto.upper().startswith("LL"),
        hicache_size_gb=args["hicache_size"] if args["enable_hierarchical_cache"] else 0,
        graph_max_bs=args["cuda_graph_max_bs_decode"],
        graph_bs=tuple(args.get("sim_graph_bs") or ()),
        speculation=speculation,
        kv_reserve_mib=_kv_reserve_mib(args, target.architecture, ns),
    )
    return adaptive_model(PerfModel(hw, target, deployment), args)


def _kv_reserve_mib(args: dict[str, Any], architecture: str, ns: argparse.Namespace) -> float:
    """0.5.23's multimodal KV reservation (not with --language-model-only; 0.5.1.post3 is not
    modelled with one)."""
    if surface(getattr(ns, "sim_sglang_version", CURRENT)).legacy or args.get(
        "language_model_only"
    ):
        return 0.0
    return memory.multimodal_kv_reserve_mib(memory.architecture(architecture), os.environ)


def expected_decode_tok_s(model: PerfModel, max_tokens: int) -> float:
    """Tokens after the first over the decode time of one stream, as the benchmark measures."""
    return expected_decode(model, max_tokens)[0]


def expected_decode(
    model: PerfModel, max_tokens: int, prompt_tokens: int = PROMPT_TOKENS, batch: int = 1
) -> tuple[float, float]:
    """(tok/s per request after the first token, tokens per verify step) of `batch` requests
    decoding `max_tokens` each in lockstep after a `prompt_tokens` prompt."""
    position, seconds, steps = 1.0, 0.0, 0  # the first token comes from prefill
    while position < max_tokens:
        seconds += model.decode_step_s(batch, prompt_tokens + int(position))
        position += min(model.expected_accept_len(int(position)), max_tokens - position)
        steps += 1
    return (position - 1) / seconds, (position - 1) / steps


def evaluate(argv: list[str], max_tokens: int, nccl_proto: str = "LL") -> Evaluation:
    """What a server started with `argv` (SGLang flags + --sim-* flags) would do."""
    ns = build_parser(sglang_version_of(argv)).parse_args(argv)
    hw, target = HARDWARE[ns.sim_hardware], TARGETS[ns.sim_target]
    args = resolve(ns, target.architecture, hw.gpu_memory_mib).args
    model = build_model(args, ns, nccl_proto)
    plan = model.memory_plan(args["mem_fraction_static"])
    if plan.failure:
        kind = {
            "graph_oom": "gpu",
            "kv_pool": "kv_pool",
            "no_kv_room": "kv_pool",
            "host_oom": "host",
        }[plan.failure]
        failed_after = {"gpu": target.load_s, "kv_pool": 0.7 * target.load_s, "host": 5.0}[kind]
        return Evaluation("oom", kind, None, None, failed_after, plan.kv_tokens)
    return Evaluation(
        outcome="ok",
        oom_kind=None,
        tok_s=expected_decode_tok_s(model, max_tokens),
        accept_len=model.expected_accept_len(max_tokens // 2),
        startup_s=target.load_s,
        max_total_num_tokens=plan.kv_tokens,
    )


@dataclass(frozen=True)
class LoadResult:
    output_tok_s: float  # tokens over the span from the first request's start to the last end
    decode_tok_s: float  # per stream, tokens after the first over decode time, token-weighted
    requests: int
    # The capacity model over the same window (modelled_steady_state; modelled_load: its span),
    # time-weighted over scheduler steps: what SGLang's decode lines and /metrics report.
    token_usage: float = 0.0  # mean `token usage` (num_used / max_total_num_tokens)
    running: float = 0.0  # mean #running-req
    queued: float = 0.0  # mean #queue-req
    cache_hit_rate: float = 0.0  # prefill tokens found in the device or host cache / all input
    retractions: int = 0  # requests retracted ("KV cache pool is full. Retract requests.")
    max_total_num_tokens: int = 0
    accept_len: float = 1.0  # tokens per request per verify step (the decode lines' accept len)


def _instant_engine(argv: list[str], nccl_proto: str):
    """The engine `argv` would serve, on an instant clock, without drift or log lines."""
    from harness.sim.engine import Engine, InstantClock

    ns = build_parser(sglang_version_of(argv)).parse_args(argv)
    hw, target = HARDWARE[ns.sim_hardware], TARGETS[ns.sim_target]
    args = resolve(ns, target.architecture, hw.gpu_memory_mib).args
    model = build_model(args, ns, nccl_proto)
    clock = InstantClock()
    engine = Engine(
        model,
        clock,
        max_running_requests=args["max_running_requests"],
        decode_log_interval=10**9,
        seed=ns.sim_seed,
        drift_sigma=0.0,
        **engine_capacity(args, ns, model, started_plan(model, args)),
    )
    return engine, clock


def started_plan(model, args: dict[str, Any]):
    """The memory plan of a server that starts; ValueError where the served simulator would die
    at start-up (no KV pool, graphs that do not fit): there is then no load to model."""
    plan = model.memory_plan(args["mem_fraction_static"])
    if plan.failure is not None:
        raise ValueError(
            f"the simulator would not start: {plan.failure} at --mem-fraction-static="
            f"{args['mem_fraction_static']} (name a fraction that fits)"
        )
    return plan


def modelled_load(
    argv: list[str], concurrency: int, prompts: list[str], max_tokens: int, nccl_proto: str = "LL"
) -> LoadResult:
    """The served simulator's engine run to completion on an instant clock, without drift: the
    rates a perfect client would measure for `prompts` sent `concurrency` at a time with
    ignore_eos (every request produces exactly `max_tokens`)."""
    import asyncio

    engine, clock = _instant_engine(argv, nccl_proto)
    spans: list[tuple[float, float, float, int]] = []

    async def one(prompt: str, gate: asyncio.Semaphore) -> None:
        async with gate:
            start = clock.now()
            request = engine.new_request(prompt, max_tokens, ignore_eos=True, thinking=True)
            engine.submit(request)
            first = None
            while True:
                chunk = await request.queue.get()
                first = chunk.at if first is None else first
                if chunk.finish_reason is not None:
                    spans.append((start, first, chunk.at, request.generated))
                    return

    async def drive() -> None:
        gate = asyncio.Semaphore(concurrency)
        loop = asyncio.create_task(engine.run())
        await asyncio.gather(*(one(p, gate) for p in prompts))
        loop.cancel()

    asyncio.run(drive())
    tokens = sum(s[3] for s in spans)
    span = max(s[2] for s in spans) - min(s[0] for s in spans)
    decode = sum(s[2] - s[1] for s in spans)
    return LoadResult(tokens / span, sum(s[3] - 1 for s in spans) / decode, len(spans))


class _Sampler:
    """Time-weighted means of the engine's state over a window, from its per-step observer."""

    def __init__(self, engine) -> None:
        self.engine = engine
        self.active = False
        self.weight = self.usage = self.running = self.queued = 0.0
        engine.observer = self.observe
        self.totals_at_start = None
        self.accepted = [(0, 0), (0, 0)]  # (tokens, verify steps) at the window's start and end

    def start(self) -> None:
        t = self.engine.totals
        self.active = True
        self.totals_at_start = (
            t.retracted_requests,
            t.prefill_hit_tokens,
            t.computed_prompt_tokens,
        )
        self.accepted[0] = self._accepted()

    def stop(self) -> None:
        self.active = False
        self.accepted[1] = self._accepted()

    def _accepted(self) -> tuple[int, int]:
        c = self.engine.counters  # what a decode line has folded in, and what it has not yet
        return (
            c.spec_accept_tokens + c.pending_accept_tokens,
            c.spec_forward_ct + c.pending_forward_ct,
        )

    def observe(self, engine, seconds: float) -> None:
        if not self.active or seconds <= 0:
            return
        self.weight += seconds
        self.usage += seconds * engine.pool.usage
        self.running += seconds * len(engine.running)
        self.queued += seconds * len(engine.waiting)

    def fields(self) -> dict[str, Any]:
        t, w = self.engine.totals, max(self.weight, 1e-12)
        retracted0, hits0, computed0 = self.totals_at_start or (0, 0, 0)
        starts, ends = self.accepted
        tokens = ends[0] - starts[0]
        hits = t.prefill_hit_tokens - hits0
        computed = t.computed_prompt_tokens - computed0
        return {
            "token_usage": self.usage / w,
            "running": self.running / w,
            "queued": self.queued / w,
            "cache_hit_rate": hits / (hits + computed) if hits + computed else 0.0,
            "retractions": t.retracted_requests - retracted0,
            "max_total_num_tokens": self.engine.kv_tokens,
            "accept_len": tokens / steps if (steps := ends[1] - starts[1]) > 0 else 1.0,
        }


def modelled_steady_state(
    argv: list[str],
    concurrency: int,
    prompts: list[str] | list[list[dict[str, Any]]],
    max_tokens: int,
    completions: int,
    *,
    thinking: bool = True,
    nccl_proto: str = "LL",
    ignore_eos: bool = False,  # every request makes exactly max_tokens (benchmarks/client_fidelity)
) -> LoadResult:
    """The served simulator's engine on an instant clock, without drift, fed as the steady-state
    benchmark feeds it (`harness.measure.steady`): `concurrency` slots, each sending the next of
    `prompts` (in order, greedy, natural lengths) the moment its previous request ended. The
    rate is of the tokens emitted between the C-th completion and `completions` later, as
    `harness.measure.steady.steady_window` defines the window; `requests` is the completions in it.
    `prompts`: strings, or chat message lists (role/content dicts) whose shared prefixes and
    multi-turn history reach the radix cache; the capacity fields (token usage, running,
    queued, cache hit rate, retractions) are over the same window. With --stream-interval N in
    `argv` the engine emits a chunk every N tokens (cheaper; the window's edges blur by N)."""
    import asyncio

    engine, _clock = _instant_engine(argv, nccl_proto)
    sampler = _Sampler(engine)
    quiet = logging.getLogger("sglang.scheduler")  # the retraction warnings of a modelled load
    was_disabled, quiet.disabled = quiet.disabled, True
    source = iter(prompts)
    arrivals: list[tuple[float, int]] = []  # (time, tokens) of every chunk
    ends: list[float] = []
    decode: list[tuple[int, float, float]] = []  # (tokens after the first, first, end)
    stop = asyncio.Event()

    async def slot() -> None:
        while not stop.is_set():
            request = engine.new_request(
                next(source), max_tokens, ignore_eos=ignore_eos, thinking=thinking, greedy=True
            )
            engine.submit(request)
            first = None
            try:
                while True:
                    chunk = await request.queue.get()
                    arrivals.append((chunk.at, len(chunk.tokens)))
                    first = chunk.at if first is None else first
                    if chunk.finish_reason is not None:
                        break
            except asyncio.CancelledError:
                engine.abort(request)
                raise
            ends.append(chunk.at)
            decode.append((request.generated - 1, first, chunk.at))
            if len(ends) == concurrency:
                sampler.start()
            if len(ends) >= concurrency + completions:
                sampler.stop()
                stop.set()

    async def drive() -> None:
        loop = asyncio.create_task(engine.run())
        slots = [asyncio.create_task(slot()) for _ in range(concurrency)]
        await stop.wait()
        for task in (*slots, loop):
            task.cancel()
        await asyncio.gather(*slots, loop, return_exceptions=True)

    try:
        asyncio.run(drive())
    finally:
        quiet.disabled = was_disabled
    ordered = sorted(ends)
    start, end = ordered[concurrency - 1], ordered[concurrency + completions - 1]
    tokens = sum(n for at, n in arrivals if start < at <= end)
    inside = [(n, f, e) for n, f, e in decode if start < e <= end]
    if end <= start or not inside:  # fixed-length requests finishing in lockstep waves
        raise ValueError(
            f"the steady-state window of {completions} completions after the {concurrency}-th is "
            "empty (every request ended at the same instant): ask for more completions than C"
        )
    per_user = sum(n for n, _, _ in inside) / sum(e - f for _, f, e in inside)
    return LoadResult(tokens / (end - start), per_user, len(inside), **sampler.fields())
