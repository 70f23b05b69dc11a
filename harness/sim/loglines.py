"""The scheduler's log lines, as SGLang prints them per surface.

0.5.23 `managers/scheduler_components/metrics_reporter.py`: `report_prefill_stats` ("Prefill batch,
#new-seq, #new-token (computed input), #cached-token (device + host hits), token usage,
#running-req, #queue-req, #pending-token, cuda graph, input throughput") and
`report_decode_stats` ("Decode batch[ [iter]], #running-req, #token, token usage, [accept len,
accept rate,] cuda graph, gen throughput (token/s), #queue-req"), the pool parts from
`pool_stats_observer.py` ("#token: {num_used}, token usage: {usage:.2f}"); `scheduler.py::
update_running_batch`'s retraction warning. 0.5.1.post3 (`scheduler_metrics_mixin.py`): "Prefill
batch." / "Decode batch." with a trailing ", ", no accept rate, and a retraction warning without
"#new_tokens_gained" (`scheduler.py:1742`).
"""

from __future__ import annotations

from typing import Any

from harness.sglang.surfaces import surface
from harness.sim.capacity.policy import Admitted
from harness.sim.capacity.settings import host_tier

Engine = Any  # harness.sim.engine.Engine (which imports this module)


def prefill_line(engine: Engine, admitted: list[Admitted], seconds: float) -> str:
    new = sum(a.extend for a in admitted)
    cached = sum(a.device_hit + a.host_hit for a in admitted)
    usage, running, queued = engine.pool.usage, len(engine.running), len(engine.waiting)
    engine.counters.stats_line()
    if engine.legacy_logs:
        return (
            f"Prefill batch. #new-seq: {len(admitted)}, #new-token: {new}, "
            f"#cached-token: {cached}, token usage: {usage:.2f}, #running-req: {running}, "
            f"#queue-req: {queued}, "
        )
    return (
        f"Prefill batch, #new-seq: {len(admitted)}, #new-token: {new}, #cached-token: {cached}, "
        f"token usage: {usage:.2f}, #running-req: {running}, #queue-req: {queued}, "
        f"#pending-token: 0, {engine.model.dep.device} graph: False, "
        f"input throughput (token/s): {new / max(seconds, 1e-9):.2f}"
    )


def retract_line(legacy: bool, retracted: int, gained: int, old: float, new: float) -> str:
    if legacy:
        return (
            f"KV cache pool is full. Retract requests. #retracted_reqs: {retracted}, "
            f"#new_token_ratio: {old:.4f} -> {new:.4f}"
        )
    return (
        f"KV cache pool is full. Retract requests. #retracted_reqs: {retracted}, "
        f"#new_tokens_gained: {gained}, #new_token_ratio: {old:.4f} -> {new:.4f}"
    )


def decode_line(engine: Engine, batch: int) -> str:
    """Folds the pending speculative counters in, as SGLang's decode stats do."""
    c = engine.counters
    c.stats_line()
    gap = max(engine._t - engine._interval_start, 1e-9)
    c.last_gen_throughput = engine._interval_tokens / gap
    engine._interval_tokens, engine._interval_start = 0, engine._t
    it = f" [{engine._forward_ct}]" if engine.log_forward_iters and not engine.legacy_logs else ""
    used = engine.pool.used
    msg = (
        f"Decode batch{it}{'.' if engine.legacy_logs else ','} #running-req: {batch}, "
        f"#token: {used}, token usage: {used / max(engine.kv_tokens, 1):.2f}, "
    )
    if engine.speculative and c.pending_forward_ct:
        accept_len = c.pending_accept_tokens / c.pending_forward_ct
        drafts = engine.model.spec.draft_tokens - 1  # type: ignore[union-attr]
        rate = (c.pending_accept_tokens - c.pending_forward_ct) / (c.pending_forward_ct * drafts)
        msg += f"accept len: {accept_len:.2f}, "
        if not engine.legacy_logs:
            msg += f"accept rate: {rate:.2f}, "
        c.last_accept_len, c.last_accept_rate = accept_len, rate
        c.spec_accept_tokens += c.pending_accept_tokens
        c.spec_forward_ct += c.pending_forward_ct
        c.pending_accept_tokens = c.pending_forward_ct = 0
    msg += (
        # this batch replayed a graph (metrics_reporter.py: can_run_cuda_graph): eager above
        # the largest captured size
        f"{engine.model.dep.device} graph: {engine.model.graph_batch(batch) is not None}, "
        f"gen throughput (token/s): {c.last_gen_throughput:.2f}, "
        f"#queue-req: {len(engine.waiting)}"
    )
    return msg + (", " if engine.legacy_logs else "")


def scheduler_summary(model: Any, plan: Any, args: dict, version: str) -> list[str]:
    """What the scheduler prints once its TP worker (pool, graphs) is built, on TP rank 0: with
    HiCache the host pool as its cache is made (0.5.23 mem_cache/pool_host/base.py
    `_allocate_host_buffer`; 0.5.1.post3 mem_cache/memory_pool_host.py), then its summary (0.5.23
    managers/scheduler.py, the "Print debug info" block; 0.5.1.post3 prints the same fields).
    `harness.server.logs.parse_pool_sizes` reads both."""
    lines = []
    host = host_tier(args, model, plan.kv_tokens)
    if host is not None:
        host_gb = host.capacity * host.bytes_per_token / 1e9
        if surface(version).legacy:
            lines.append(f"Allocating {host_gb:.2f} GB host memory for hierarchical KV cache.")
        else:
            lines.append(
                f"Allocating kv hierarchical KV host pool: {host.capacity} tokens, "
                f"{host_gb:.2f} GB host memory."
            )
    graph_mib = plan.graph_mib if model.dep.cuda_graph else 0
    lines.append(
        f"max_total_num_tokens={plan.kv_tokens}, "
        f"chunked_prefill_size={args['chunked_prefill_size']}, "
        f"max_prefill_tokens={args.get('max_prefill_tokens') or 16384}, "
        f"max_running_requests={args['max_running_requests']}, "
        f"context_len={args['context_length'] or model.target.context_length}, "
        f"available_gpu_mem={(plan.gpu_mib - plan.static_mib - graph_mib) / 1024:.2f} GB"
    )
    return lines
