"""Memory as a result: what the KV pool did at each level of a trial, and whether it limited it.

Per trial (`memory_metrics`, TrialResult.metrics), over the runs' window memory
(`harness.measure.memory_probe`: token usage, running and queued requests, cache hits,
retractions, request lengths): the KV pool (`max_total_num_tokens`: the effective value from
/server_info, else the start-up log or /metrics), the HiCache host pool in tokens, how many
requests of the measured mean length the pool holds, and per level (`_c{C}`, unsuffixed at the
highest level: where capacity decides) the window means and `kv_bound`.

KV-bound (docs/memory.md, "Memory"): the pool, not the request cap or the GPU, limited the
level: requests waited while the pool was nearly full (mean token usage >= KV_BOUND_USAGE) or
while fewer ran than the request cap allows, or a request was retracted. Everything here is
SGLang's own text (harness.server.logs cites each line's source).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from harness.record.results import RunSummary
from harness.server.logs import host_pool_tokens, parse_pool_sizes

log = logging.getLogger(__name__)

# The rule for "KV-bound" at a level (docs/benchmark.md): SGLang admits a request only while the
# pool holds the running requests' tokens plus its reservation for their future decode tokens
# (0.5.23 managers/schedule_policy.py PrefillAdder: max_new_tokens x new_token_ratio each, x 1.0
# with ignore_eos), so a pool that limits the batch leaves requests waiting with fewer running
# than max_running_requests, and runs near full only when the reservation is small; a
# retraction means decode itself ran out of KV.
KV_BOUND_USAGE = 0.9
KV_BOUND_QUEUE = 1.0  # mean #queue-req at or above: requests were waiting
KV_BOUND_CAP_MARGIN = 1.0  # mean #running-req this far below the cap: the cap did not bind
# SGLang clips a request's max_new_tokens to this in its admission estimate
# (SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION, 0.5.23 environ.py; harness/sim/capacity/policy.py).
CLIP_MAX_NEW_TOKENS = 4096

# /metrics names (0.5.23 observability/metrics_collector.py; 0.5.1 metrics/collector.py).
HOST_TOTAL_TOKENS = "sglang:hicache_host_total_tokens"  # 0.5.23, with HiCache on
MAX_TOTAL_TOKENS = "sglang:max_total_num_tokens"  # 0.5.23


def kv_bound(
    usage: float | None,
    queue: float | None,
    retractions: float | None,
    running: float | None = None,
    cap: int | None = None,
    room: bool = False,
) -> bool:
    """The rule: any retraction; or requests waiting while the pool was nearly full, or while
    fewer ran than the request cap (`max_running_requests`, when known) allows and the pool was
    not roomy enough to rule memory out (`room`: it holds the cap's requests at their whole
    admission reservation, `admission_room`, so what kept them waiting was the prefill's turn)."""
    if retractions:
        return True
    if (queue or 0.0) < KV_BOUND_QUEUE:
        return False
    below_cap = cap is not None and running is not None and running < cap - KV_BOUND_CAP_MARGIN
    return (usage or 0.0) >= KV_BOUND_USAGE or (below_cap and not room)


def admission_room(
    pool: int | None, cap: int | None, request_tokens: float | None, max_new_tokens: int | None
) -> bool:
    """Whether the pool admits `cap` requests whatever their decode reservation: SGLang's
    PrefillAdder needs a request's prompt plus at most min(max_new_tokens, CLIP_MAX_NEW_TOKENS)
    (x new_token_ratio <= 1) free, so a pool of cap x (prompt + output + that) tokens never refuses
    one below the cap (0.5.23 managers/schedule_policy.py; harness/sim/capacity/policy.py). Below
    the cap with a queue, such a pool waited on the prefill (a burst of arrivals taking its turns of
    --chunked-prefill-size), not on memory. False when any part is unknown."""
    if not (pool and cap and request_tokens and max_new_tokens):
        return False
    return pool >= cap * (request_tokens + min(max_new_tokens, CLIP_MAX_NEW_TOKENS))


def pool_tokens(
    effective: dict[str, Any], log_text: str, counters: dict[str, float]
) -> tuple[int | None, int | None]:
    """(KV pool tokens, HiCache host pool tokens). The pool: /server_info's
    max_total_num_tokens, else the start-up log's, else /metrics'. The host pool: /metrics'
    gauge, else the start-up log's line; 0 when the server runs without HiCache."""
    sizes = parse_pool_sizes(log_text)
    pool = effective.get("max_total_num_tokens") or sizes.max_total_num_tokens
    if pool is None and counters.get(MAX_TOTAL_TOKENS):
        pool = int(counters[MAX_TOTAL_TOKENS])
    host = int(counters[HOST_TOTAL_TOKENS]) if counters.get(HOST_TOTAL_TOKENS) else None
    if host is None:
        host = host_pool_tokens(sizes)
    if host is None and effective.get("hicache_size") == 0:
        host = 0
    return (int(pool) if pool else None), host


_LEVEL_FIELDS = ("token_usage_mean", "running_mean", "queue_mean", "cache_hit_rate")


def memory_metrics(
    runs: Sequence[RunSummary],
    pool: int | None,
    host: int | None,
    cap: int | None = None,
    max_new_tokens: int | None = None,
) -> dict[str, float]:
    """The trial's memory metrics: the pools, and per level the window means over its complete
    runs (`_c{C}`), unsuffixed at the highest level measured; `cap`: the server's effective
    max_running_requests, `max_new_tokens`: the requests' (None: unknown)."""
    metrics: dict[str, float] = {}
    if pool is not None:
        metrics["kv_pool_tokens"] = float(pool)
    if host is not None:
        metrics["host_cache_tokens"] = float(host)
    runs = [r for r in runs if not r.incomplete]
    levels = sorted({r.concurrency for r in runs})
    for concurrency in levels:
        level = [r for r in runs if r.concurrency == concurrency]
        values: dict[str, float] = {}
        for name in _LEVEL_FIELDS:
            found = [getattr(r, name) for r in level if getattr(r, name) is not None]
            if found:
                values[name] = sum(found) / len(found)
        peaks = [r.token_usage_max for r in level if r.token_usage_max is not None]
        if peaks:
            values["token_usage_max"] = max(peaks)
        if any(r.memory_source for r in level):
            values["retractions"] = float(sum(r.retractions or 0 for r in level))
        lengths = [r.request_tokens_mean for r in level if r.request_tokens_mean]
        if lengths:
            values["request_tokens_mean"] = sum(lengths) / len(lengths)
            if pool:
                values["requests_fit"] = float(math.floor(pool / values["request_tokens_mean"]))
        if "token_usage_mean" in values or "retractions" in values:
            bound = kv_bound(
                values.get("token_usage_mean"),
                values.get("queue_mean"),
                values.get("retractions"),
                values.get("running_mean"),
                cap,
                admission_room(pool, cap, values.get("request_tokens_mean"), max_new_tokens),
            )
            values["kv_bound"] = float(bound)
        metrics.update({f"{k}_c{concurrency}": v for k, v in values.items()})
        if concurrency == levels[-1]:
            metrics.update(values)
    return metrics
